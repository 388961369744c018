//! Patch tests: strategic merge cases from Kubernetes' own semantics, merge/JSON patch, server-side apply.

use super::*;
use serde_json::json;

fn info(group: &str, plural: &str) -> &'static ResourceInfo {
    let all = builtin_infos();
    match all.iter().find(|r| r.group == group && r.plural == plural) {
        Some(i) => i,
        None => panic!("no resource {plural}"),
    }
}

/// The built-in resources, made once for the test binary.
fn builtin_infos() -> &'static [ResourceInfo] {
    static ALL: std::sync::OnceLock<Vec<ResourceInfo>> = std::sync::OnceLock::new();
    ALL.get_or_init(api::resources::builtin)
}

fn smp(plural: &str, original: Value, patch: Value) -> Value {
    let g = if plural == "deployments" || plural == "replicasets" {
        "apps"
    } else {
        ""
    };
    match apply_patch(
        info(g, plural),
        PatchType::StrategicMerge,
        &original,
        patch.to_string().as_bytes(),
    ) {
        Ok(v) => v,
        Err(e) => panic!("patch failed: {e}"),
    }
}

#[test]
fn content_types() {
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
        Some(PatchType::StrategicMerge)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(PatchType::from_content_type("application/json"), None);
}

fn pod_obj() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "u1"}]},
        "spec": {
            "containers": [
                {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}, {"containerPort": 443}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "args": ["x", "y"]},
                {"name": "side", "image": "busybox"}
            ],
            "volumes": [{"name": "v1", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists"}]
        },
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}
    })
}

#[test]
fn smp_merges_containers_by_name_and_keeps_others() {
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}),
    );
    assert_eq!(
        got.pointer("/spec/containers/0/image"),
        Some(&json!("nginx:2"))
    );
    assert_eq!(
        got.pointer("/spec/containers/0/ports/1/containerPort"),
        Some(&json!(443)),
        "nested lists kept"
    );
    assert_eq!(
        got.pointer("/spec/containers/1/name"),
        Some(&json!("side")),
        "other elements kept"
    );
    let added = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"containers": [{"name": "new", "image": "x"}]}}),
    );
    assert_eq!(
        added
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(3)
    );
    assert_eq!(
        added.pointer("/spec/containers/2/name"),
        Some(&json!("new"))
    );
}

#[test]
fn smp_nested_merge_keys() {
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"containers": [{"name": "web",
        "ports": [{"containerPort": 8080}], "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}]}}),
    );
    let ports: Vec<Value> = got
        .pointer("/spec/containers/0/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        ports,
        vec![
            json!({"containerPort": 80}),
            json!({"containerPort": 443}),
            json!({"containerPort": 8080})
        ]
    );
    let env = got.pointer("/spec/containers/0/env").cloned();
    assert_eq!(
        env,
        Some(
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        )
    );
}

#[test]
fn smp_replaces_lists_without_strategy() {
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"tolerations": [{"key": "other", "operator": "Exists"}], "containers": [{"name": "web", "args": ["z"]}]}}),
    );
    assert_eq!(
        got.pointer("/spec/tolerations"),
        Some(&json!([{"key": "other", "operator": "Exists"}]))
    );
    assert_eq!(got.pointer("/spec/containers/0/args"), Some(&json!(["z"])));
}

#[test]
fn smp_metadata_lists_and_null_deletes() {
    let got = smp(
        "pods",
        pod_obj(),
        json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["y", "x"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "u1", "controller": true}]}}),
    );
    assert_eq!(
        got.pointer("/metadata/labels"),
        Some(&json!({"b": "2", "c": "3"}))
    );
    assert_eq!(
        got.pointer("/metadata/finalizers"),
        Some(&json!(["x", "y"])),
        "primitive merge list is a union"
    );
    assert_eq!(
        got.pointer("/metadata/ownerReferences/0/controller"),
        Some(&json!(true))
    );
    assert_eq!(
        got.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn smp_status_conditions_by_type() {
    let got = smp(
        "pods",
        pod_obj(),
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    assert_eq!(
        got.pointer("/status/conditions"),
        Some(
            &json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}])
        )
    );
}

#[test]
fn smp_directives() {
    // $patch: delete on a list element.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}),
    );
    assert_eq!(
        got.pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(1)
    );
    // $patch: replace as a list element replaces the whole list.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"containers": [{"name": "only", "image": "i"}, {"$patch": "replace"}]}}),
    );
    assert_eq!(
        got.pointer("/spec/containers"),
        Some(&json!([{"name": "only", "image": "i"}]))
    );
    // $patch: replace on a map.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"metadata": {"labels": {"z": "9", "$patch": "replace"}}}),
    );
    assert_eq!(got.pointer("/metadata/labels"), Some(&json!({"z": "9"})));
    // $patch: delete on a map removes it.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"metadata": {"labels": {"$patch": "delete"}}}),
    );
    assert!(got.pointer("/metadata/labels").is_none());
    // $deleteFromPrimitiveList.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
    );
    assert_eq!(got.pointer("/metadata/finalizers"), Some(&json!([])));
    // $retainKeys (volumes use merge,retainKeys).
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"volumes": [{"name": "v1", "hostPath": {"path": "/x"}, "$retainKeys": ["name", "hostPath"]}]}}),
    );
    assert_eq!(
        got.pointer("/spec/volumes/0"),
        Some(&json!({"name": "v1", "hostPath": {"path": "/x"}}))
    );
    // $setElementOrder keeps the order kubectl's 3-way apply asks for.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}], "containers": [{"name": "web", "image": "nginx:3"}]}}),
    );
    assert_eq!(got.pointer("/spec/containers/0/name"), Some(&json!("side")));
    assert_eq!(
        got.pointer("/spec/containers/1/image"),
        Some(&json!("nginx:3"))
    );
    // No directive ever persists, also in newly added subtrees.
    let got = smp(
        "pods",
        pod_obj(),
        json!({"spec": {"initContainers": [{"name": "i", "image": "x", "$patch": "merge"}],
        "$setElementOrder/initContainers": [{"name": "i"}]}}),
    );
    assert!(!got.to_string().contains('$'), "{got}");
}

#[test]
fn smp_on_workload_templates_and_kubectl_apply_shape() {
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"replicas": 3, "selector": {"app": "web"}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}});
    // The patch kubectl's client-side apply sends for rc-v2.yaml.
    let patch = json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"v\":2}"}},
        "spec": {"replicas": 4, "template": {"spec": {"$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{"image": "nginx:1.26", "name": "nginx"}]}}}});
    let got = smp("replicationcontrollers", rc, patch);
    assert_eq!(got.pointer("/spec/replicas"), Some(&json!(4)));
    assert_eq!(
        got.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:1.26"))
    );
    assert_eq!(
        got.pointer("/spec/template/spec/containers/0/ports/0/containerPort"),
        Some(&json!(80))
    );
    let d = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}}});
    let got = smp(
        "deployments",
        d,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "3"}]}}}}),
    );
    assert_eq!(
        got.pointer("/spec/template/spec/containers/1/image"),
        Some(&json!("3"))
    );
    assert_eq!(
        got.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("1"))
    );
    // Service ports merge by port.
    let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
    let got = smp(
        "services",
        svc,
        json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
    );
    assert_eq!(
        got.pointer("/spec/ports"),
        Some(&json!([{"port": 80, "targetPort": 9090}, {"port": 443}]))
    );
}

#[test]
fn smp_errors() {
    let i = info("", "pods");
    let bad_key = apply_patch(
        i,
        PatchType::StrategicMerge,
        &pod_obj(),
        br#"{"spec":{"containers":[{"image":"x"}]}}"#,
    );
    assert!(
        matches!(bad_key, Err(PatchError::Malformed(_))),
        "{bad_key:?}"
    );
    assert!(matches!(
        apply_patch(i, PatchType::StrategicMerge, &pod_obj(), b"[1]"),
        Err(PatchError::Malformed(_))
    ));
    assert!(matches!(
        apply_patch(i, PatchType::StrategicMerge, &pod_obj(), b"{nope"),
        Err(PatchError::Malformed(_))
    ));
    let st = PatchError::Malformed("x".into()).to_status("pods", "p");
    assert_eq!(api::status::code(&st), 400);
}

#[test]
fn merge_patch_rfc7386() {
    let i = info("", "replicationcontrollers");
    let orig = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
    let got = apply_patch(
        i,
        PatchType::Merge,
        &orig,
        br#"{"a":{"b":null,"c":[3]},"e":{"f":null,"g":1}}"#,
    );
    assert_eq!(got, Ok(json!({"a": {"c": [3]}, "d": "x", "e": {"g": 1}})));
    assert!(matches!(
        apply_patch(i, PatchType::Merge, &orig, b"[]"),
        Err(PatchError::Malformed(_))
    ));
}

#[test]
fn json_patch_rfc6902() {
    let i = info("", "replicationcontrollers");
    let orig =
        json!({"spec": {"replicas": 1, "list": ["a"]}, "metadata": {"labels": {"a/b": "c"}}});
    let got = apply_patch(i, PatchType::Json, &orig, br#"[{"op":"replace","path":"/spec/replicas","value":7},{"op":"add","path":"/spec/list/-","value":"b"},{"op":"remove","path":"/metadata/labels/a~1b"},{"op":"test","path":"/spec/replicas","value":7}]"#);
    assert_eq!(
        got,
        Ok(json!({"spec": {"replicas": 7, "list": ["a", "b"]}, "metadata": {"labels": {}}}))
    );
    let failed = apply_patch(
        i,
        PatchType::Json,
        &orig,
        br#"[{"op":"test","path":"/spec/replicas","value":2}]"#,
    );
    assert!(matches!(failed, Err(PatchError::Invalid(_))));
    assert_eq!(
        failed
            .err()
            .map(|e| api::status::code(&e.to_status("replicationcontrollers", "web"))),
        Some(422)
    );
    assert!(matches!(
        apply_patch(i, PatchType::Json, &orig, br#"{"op":"x"}"#),
        Err(PatchError::Malformed(_))
    ));
    assert!(matches!(
        apply_patch(
            i,
            PatchType::Json,
            &orig,
            br#"[{"op":"remove","path":"/nope"}]"#
        ),
        Err(PatchError::Invalid(_))
    ));
}

#[test]
fn deep_nesting_is_rejected() {
    let i = info("", "pods");
    let deep = format!(
        "{}1{}",
        "{\"a\":".repeat(MAX_DEPTH + 5),
        "}".repeat(MAX_DEPTH + 5)
    );
    assert!(matches!(
        apply_patch(i, PatchType::Merge, &json!({}), deep.as_bytes()),
        Err(PatchError::Malformed(_))
    ));
    assert!(matches!(
        apply_patch(i, PatchType::StrategicMerge, &json!({}), deep.as_bytes()),
        Err(PatchError::Malformed(_))
    ));
}

const RC_APPLY: &str = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"labels":{"app":"web"},"name":"web","namespace":"default"},"spec":{"replicas":3,"selector":{"app":"web"},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.25","name":"nginx","ports":[{"containerPort":80}]}]}}}}"#;

fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|e| e.get("manager").and_then(Value::as_str) == Some(manager))
        })
}

#[test]
fn ssa_creates_with_managed_fields() {
    let i = info("", "replicationcontrollers");
    let now = "2026-12-02T16:00:00Z";
    let created = server_side_apply(i, None, RC_APPLY.as_bytes(), "kubectl", false, now);
    let created = match created {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(created.pointer("/spec/replicas"), Some(&json!(3)));
    let e = entry(&created, "kubectl").cloned().unwrap_or_default();
    assert_eq!(e.get("operation"), Some(&json!("Apply")));
    assert_eq!(e.get("apiVersion"), Some(&json!("v1")));
    assert_eq!(e.get("time"), Some(&json!(now)));
    assert_eq!(e.get("fieldsType"), Some(&json!("FieldsV1")));
    assert_eq!(
        e.get("fieldsV1"),
        Some(&json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {},
                "f:template": {"f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}}}}}}}
        }))
    );
    // YAML bodies parse too.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n";
    let cm = server_side_apply(
        info("", "configmaps"),
        None,
        yaml.as_bytes(),
        "m",
        false,
        now,
    );
    assert_eq!(
        cm.ok().and_then(|c| c.pointer("/data/a").cloned()),
        Some(json!("b"))
    );
}

#[test]
fn ssa_reapply_changes_and_removes_own_fields() {
    let i = info("", "replicationcontrollers");
    let live =
        server_side_apply(i, None, RC_APPLY.as_bytes(), "kubectl", false, "t1").unwrap_or_default();
    let mut live = live;
    live["status"] = json!({"replicas": 3});
    live["metadata"]["labels"]["other"] = json!("kept");
    let v2 = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},"spec":{"replicas":5,"selector":{"app":"web"},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.26","name":"nginx"}]}}}}"#;
    let got = server_side_apply(i, Some(&live), v2.as_bytes(), "kubectl", false, "t2");
    let got = match got {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(got.pointer("/spec/replicas"), Some(&json!(5)));
    assert_eq!(
        got.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:1.26"))
    );
    assert!(
        got.pointer("/spec/template/spec/containers/0/ports")
            .is_none(),
        "ports no longer applied → removed"
    );
    assert!(
        got.pointer("/metadata/labels/app").is_none(),
        "label no longer applied → removed"
    );
    assert_eq!(
        got.pointer("/metadata/labels/other"),
        Some(&json!("kept")),
        "unowned field kept"
    );
    assert_eq!(got.pointer("/status/replicas"), Some(&json!(3)));
    assert_eq!(
        entry(&got, "kubectl").and_then(|e| e.get("time")),
        Some(&json!("t2"))
    );
    assert_eq!(
        got.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn ssa_conflicts_between_managers_and_force() {
    let i = info("", "replicationcontrollers");
    let live =
        server_side_apply(i, None, RC_APPLY.as_bytes(), "kubectl", false, "t1").unwrap_or_default();
    let other = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},"spec":{"replicas":9}}"#;
    let err = server_side_apply(i, Some(&live), other.as_bytes(), "hpa", false, "t2");
    let Err(PatchError::Conflict { conflicts }) = &err else {
        panic!("expected a conflict, got {err:?}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(
        (
            conflicts[0].manager.as_str(),
            conflicts[0].operation.as_str(),
            conflicts[0].field.as_str()
        ),
        ("kubectl", "Apply", ".spec.replicas")
    );
    let st = err
        .err()
        .map(|e| e.to_status("replicationcontrollers", "web"))
        .unwrap_or_default();
    assert_eq!(api::status::code(&st), 409);
    assert_eq!(
        st.message.as_deref(),
        Some("Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas")
    );
    assert_eq!(st.details.and_then(|d| d.causes).map(|c| c.len()), Some(1));
    // Same value: shared ownership, no conflict.
    let same = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},"spec":{"replicas":3}}"#;
    assert!(server_side_apply(i, Some(&live), same.as_bytes(), "hpa", false, "t2").is_ok());
    // Force moves ownership.
    let forced =
        server_side_apply(i, Some(&live), other.as_bytes(), "hpa", true, "t3").unwrap_or_default();
    assert_eq!(forced.pointer("/spec/replicas"), Some(&json!(9)));
    let kubectl_fields = entry(&forced, "kubectl")
        .and_then(|e| e.pointer("/fieldsV1/f:spec"))
        .cloned()
        .unwrap_or_default();
    assert!(
        kubectl_fields.get("f:replicas").is_none(),
        "{kubectl_fields}"
    );
    assert!(entry(&forced, "hpa").is_some());
    // The first manager re-applying without replicas does not remove hpa's field.
    let without = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},"spec":{"selector":{"app":"web"}}}"#;
    let after = server_side_apply(i, Some(&forced), without.as_bytes(), "kubectl", false, "t4")
        .unwrap_or_default();
    assert_eq!(after.pointer("/spec/replicas"), Some(&json!(9)));
}

#[test]
fn ssa_rejects_bad_requests() {
    let i = info("", "replicationcontrollers");
    assert_eq!(
        server_side_apply(i, None, RC_APPLY.as_bytes(), "", false, "t"),
        Err(PatchError::FieldManagerRequired)
    );
    let st = PatchError::FieldManagerRequired.to_status("replicationcontrollers", "web");
    assert_eq!(st.message.as_deref(), Some("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"));
    for body in [
        r#"{"kind":"ReplicationController","metadata":{"name":"w"}}"#,
        r#"{"apiVersion":"apps/v1","kind":"ReplicationController","metadata":{"name":"w"}}"#,
        r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"w","managedFields":[]}}"#,
        "- a\n- b\n",
        "a: [",
    ] {
        assert!(
            matches!(
                server_side_apply(i, None, body.as_bytes(), "m", false, "t"),
                Err(PatchError::Malformed(_))
            ),
            "{body}"
        );
    }
}

#[test]
fn update_entries_track_changed_fields() {
    let i = info("", "replicationcontrollers");
    let mut created = json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 1}, "status": {"replicas": 0}});
    update_managed_fields(i, None, &mut created, "kubectl-create", "t1", None);
    let e = entry(&created, "kubectl-create")
        .cloned()
        .unwrap_or_default();
    assert_eq!(e.get("operation"), Some(&json!("Update")));
    assert_eq!(
        e.get("fieldsV1"),
        Some(&json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:replicas": {}}}))
    );
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(5);
    update_managed_fields(i, Some(&created), &mut scaled, "kubectl-scale", "t2", None);
    let create_entry = entry(&scaled, "kubectl-create")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        create_entry.pointer("/fieldsV1/f:spec"),
        None,
        "replicas moved to the scaler"
    );
    assert_eq!(
        entry(&scaled, "kubectl-scale").and_then(|e| e.pointer("/fieldsV1")),
        Some(&json!({"f:spec": {"f:replicas": {}}}))
    );
    // Status writes are recorded with the subresource.
    let mut st = scaled.clone();
    st["status"]["replicas"] = json!(5);
    update_managed_fields(
        i,
        Some(&scaled),
        &mut st,
        "rc-controller",
        "t3",
        Some("status"),
    );
    assert_eq!(
        entry(&st, "rc-controller").and_then(|e| e.get("subresource")),
        Some(&json!("status"))
    );
    // A body without managedFields keeps the stored ones; `[{}]` clears them.
    let mut put = st.clone();
    api::meta::remove(&mut put, "managedFields");
    update_managed_fields(i, Some(&st), &mut put, "", "t4", None);
    assert_eq!(
        put.pointer("/metadata/managedFields"),
        st.pointer("/metadata/managedFields")
    );
    let mut clear = st.clone();
    clear["metadata"]["managedFields"] = json!([{}]);
    update_managed_fields(i, Some(&st), &mut clear, "x", "t5", None);
    assert!(clear.pointer("/metadata/managedFields").is_none());
    // An empty list is no reset either (a client that sends `[]` keeps the entries), and a
    // subresource write never sets them: not even `[{}]` or a forged entry.
    let mut empty = st.clone();
    empty["metadata"]["managedFields"] = json!([]);
    update_managed_fields(i, Some(&st), &mut empty, "", "t4", None);
    assert_eq!(
        empty.pointer("/metadata/managedFields"),
        st.pointer("/metadata/managedFields")
    );
    for forged in [
        json!([{}]),
        json!([{"manager": "forger", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]),
    ] {
        let mut status_put = st.clone();
        status_put["metadata"]["managedFields"] = forged;
        update_managed_fields(i, Some(&st), &mut status_put, "", "t5", Some("status"));
        assert_eq!(
            status_put.pointer("/metadata/managedFields"),
            st.pointer("/metadata/managedFields")
        );
    }
    // An apply-created object keeps its Apply entry through the create flow.
    let mut applied =
        server_side_apply(i, None, RC_APPLY.as_bytes(), "kubectl", false, "t6").unwrap_or_default();
    update_managed_fields(i, None, &mut applied, "kubectl", "t6", None);
    assert_eq!(
        entry(&applied, "kubectl").and_then(|e| e.get("operation")),
        Some(&json!("Apply"))
    );
}

#[test]
fn a_manager_rewriting_its_own_fields_keeps_its_set_and_moves_its_time() {
    let i = info("", "replicationcontrollers");
    let base =
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}, "status": {"replicas": 0}});
    let mut first = base.clone();
    first["status"]["replicas"] = json!(1);
    update_managed_fields(i, Some(&base), &mut first, "ctl", "t1", Some("status"));
    let owned = json!({"f:status": {"f:replicas": {}}});
    assert_eq!(
        entry(&first, "ctl").and_then(|e| e.get("fieldsV1")),
        Some(&owned)
    );
    // The same field again: same set, new time.
    let mut second = first.clone();
    second["status"]["replicas"] = json!(2);
    update_managed_fields(i, Some(&first), &mut second, "ctl", "t2", Some("status"));
    let e = entry(&second, "ctl").cloned().unwrap_or_default();
    assert_eq!(
        (e.get("fieldsV1"), e.get("time")),
        (Some(&owned), Some(&json!("t2")))
    );
    // A field new to it: the set grows.
    let mut third = second.clone();
    third["status"]["readyReplicas"] = json!(2);
    update_managed_fields(i, Some(&second), &mut third, "ctl", "t3", Some("status"));
    let e = entry(&third, "ctl").cloned().unwrap_or_default();
    assert_eq!(
        (e.get("fieldsV1"), e.get("time")),
        (
            Some(&json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})),
            Some(&json!("t3"))
        )
    );
    // A field of its going away: the set shrinks.
    let mut fourth = third.clone();
    fourth["status"]
        .as_object_mut()
        .map(|s| s.remove("readyReplicas"));
    update_managed_fields(i, Some(&third), &mut fourth, "ctl", "t4", Some("status"));
    assert_eq!(
        entry(&fourth, "ctl").and_then(|e| e.get("fieldsV1")),
        Some(&owned)
    );
    // Nothing changed: nothing moves.
    let mut same = fourth.clone();
    update_managed_fields(i, Some(&fourth), &mut same, "ctl", "t5", Some("status"));
    assert_eq!(same, fourth);
    // The same when the write carries the entries it read (a client sending the object back).
    let mut scaled = base.clone();
    scaled["spec"]["replicas"] = json!(2);
    update_managed_fields(i, Some(&base), &mut scaled, "ed", "t6", None);
    let mut rescaled = scaled.clone();
    rescaled["spec"]["replicas"] = json!(3);
    update_managed_fields(i, Some(&scaled), &mut rescaled, "ed", "t7", None);
    let e = entry(&rescaled, "ed").cloned().unwrap_or_default();
    assert_eq!(
        (e.get("fieldsV1"), e.get("time")),
        (
            Some(&json!({"f:spec": {"f:replicas": {}}})),
            Some(&json!("t7"))
        )
    );
}

#[test]
fn membership_without_building_the_set() {
    let i = info("", "pods");
    let set = managed::field_set(i, &pod_obj(), managed::Scope::All);
    let tree = managed::to_fields_v1(&set);
    for p in &set {
        assert!(managed::fields_v1_contains(&tree, p), "{p:?}");
        // A proper prefix is an inner node, not a member.
        if p.len() > 1 {
            assert!(!managed::fields_v1_contains(
                &tree,
                &p[..p.len() - 1].to_vec()
            ));
        }
        let mut longer = p.clone();
        longer.push("f:nope".into());
        assert!(!managed::fields_v1_contains(&tree, &longer));
    }
    assert!(!managed::fields_v1_contains(
        &tree,
        &vec!["f:nope".to_string()]
    ));
    assert!(!managed::fields_v1_contains(&tree, &Vec::new()));
}

#[test]
fn fields_v1_tree_members_sorted_and_prefixes_kept() {
    let path = |segs: &[&str]| segs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let set: managed::FieldSet = [
        path(&["f:status", "f:phase"]),
        path(&["f:metadata", "f:labels", "f:b"]),
        path(&["f:metadata", "f:labels", "f:a"]),
        path(&["f:spec", "f:containers", "k:{\"name\":\"c\"}", "."]),
        path(&["f:spec", "f:containers", "k:{\"name\":\"c\"}", "f:image"]),
        path(&["f:spec", "f:containers"]),
        path(&["f:metadata", "f:ownerReferences", "k:{\"uid\":\"u\"}"]),
    ]
    .into_iter()
    .collect();
    let tree = managed::to_fields_v1(&set);
    // Members in sorted order, every level (what Go's encoding of the FieldsV1 map gives too).
    assert_eq!(
        serde_json::to_string(&tree).unwrap(),
        concat!(
            r#"{"f:metadata":{"f:labels":{"f:a":{},"f:b":{}},"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}},"#,
            r#""f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}},"#,
            r#""f:status":{"f:phase":{}}}"#
        )
    );
    // A path that is a prefix of another is an inner node of the tree, as it always was.
    let mut expected = set.clone();
    expected.remove(&path(&["f:spec", "f:containers"]));
    assert_eq!(managed::from_fields_v1(&tree), expected);
    assert_eq!(managed::to_fields_v1(&managed::FieldSet::new()), json!({}));
}

#[test]
fn field_paths_roundtrip() {
    let i = info("", "pods");
    let set = managed::field_set(i, &pod_obj(), managed::Scope::All);
    let tree = managed::to_fields_v1(&set);
    assert_eq!(managed::from_fields_v1(&tree), set);
    for p in &set {
        assert!(managed::get_path(&pod_obj(), p).is_some(), "{p:?}");
    }
    let path: Vec<String> = vec![
        "f:spec".into(),
        "f:containers".into(),
        "k:{\"name\":\"web\"}".into(),
        "f:image".into(),
    ];
    assert_eq!(
        managed::render_path(&path),
        ".spec.containers[name=\"web\"].image"
    );
    let mut obj = pod_obj();
    assert!(managed::remove_path(&mut obj, &path));
    assert!(obj.pointer("/spec/containers/0/image").is_none());
    let elem: Vec<String> = vec!["f:metadata".into(), "f:finalizers".into(), "v:\"x\"".into()];
    assert!(managed::remove_path(&mut obj, &elem));
    assert_eq!(obj.pointer("/metadata/finalizers"), Some(&json!([])));
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-5i64..5).prop_map(Value::from),
            prop_oneof![
                Just("name"),
                Just("$patch"),
                Just("replace"),
                Just("delete"),
                Just("x")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("spec".to_string()),
                        Just("containers".to_string()),
                        Just("name".to_string()),
                        Just("$patch".to_string()),
                        Just("$retainKeys".to_string()),
                        Just("$setElementOrder/containers".to_string()),
                        Just("$deleteFromPrimitiveList/finalizers".to_string()),
                        Just("metadata".to_string()),
                        Just("finalizers".to_string()),
                        "[a-z]{1,3}"
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn patches_never_panic(orig in arb_json(), patch in arb_json()) {
            let bytes = patch.to_string();
            for r in builtin_infos() {
                for ty in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
                    let _ = apply_patch(r, ty, &orig, bytes.as_bytes());
                }
                let _ = server_side_apply(r, Some(&orig), bytes.as_bytes(), "m", false, "t");
                let mut o = orig.clone();
                update_managed_fields(r, Some(&patch), &mut o, "m", "t", None);
            }
        }

        /// The co-walking diff agrees with the set definition: `gone` is exactly old − new, and
        /// `changed` holds every leaf of new whose value differs (element markers aside).
        #[test]
        fn diff_matches_set_semantics(a in arb_json(), b in arb_json()) {
            let kind = info("", "pods");
            let old = json!({"metadata": {"labels": a.clone(), "finalizers": b.clone()}, "spec": {"containers": a.clone(), "x": b.clone()}});
            let new = json!({"metadata": {"labels": b.clone(), "finalizers": a.clone()}, "spec": {"containers": b, "x": a}});
            let (changed, gone) = managed::diff_sets(kind, Some(&old), &new, managed::Scope::Main);
            let os = managed::field_set(kind, &old, managed::Scope::Main);
            let ns = managed::field_set(kind, &new, managed::Scope::Main);
            let want_gone: managed::FieldSet = os.difference(&ns).cloned().collect();
            prop_assert_eq!(&gone, &want_gone);
            prop_assert!(changed.is_subset(&ns));
            for p in &ns {
                let marker = p.last().map(String::as_str) == Some(".");
                if !marker && managed::get_path(&old, p) != managed::get_path(&new, p) {
                    prop_assert!(changed.contains(p), "{:?} missing", p);
                }
            }
        }

        #[test]
        fn strategic_results_carry_no_directives(patch in arb_json()) {
            if let Ok(v) = apply_patch(info("", "pods"), PatchType::StrategicMerge, &pod_obj(), patch.to_string().as_bytes()) {
                let mut stack = vec![&v];
                while let Some(x) = stack.pop() {
                    match x {
                        Value::Object(m) => {
                            prop_assert!(!m.keys().any(|k| k.starts_with('$')), "{}", v);
                            stack.extend(m.values());
                        }
                        Value::Array(a) => stack.extend(a.iter()),
                        _ => {}
                    }
                }
            }
        }
    }
}

#[test]
fn ssa_conflicts_with_client_side_apply_updates() {
    // Object created by `kubectl apply` (client-side): an Update entry owns its fields.
    let i = info("", "replicationcontrollers");
    let mut live: Value = serde_json::from_str(RC_APPLY).unwrap_or_default();
    update_managed_fields(i, None, &mut live, "kubectl-client-side-apply", "t0", None);
    let v4 = RC_APPLY.replace("\"replicas\":3", "\"replicas\":4");
    let err = server_side_apply(i, Some(&live), v4.as_bytes(), "kubectl", false, "t1");
    let st = err
        .err()
        .map(|e| e.to_status("replicationcontrollers", "web"))
        .unwrap_or_default();
    assert_eq!(
        st.message.as_deref(),
        Some("Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .spec.replicas")
    );
    // Applying the same values shares ownership instead.
    let same = server_side_apply(i, Some(&live), RC_APPLY.as_bytes(), "kubectl", false, "t1");
    assert!(same.is_ok_and(
        |o| entry(&o, "kubectl").is_some() && entry(&o, "kubectl-client-side-apply").is_some()
    ));
}

/// A pod as `kubectl apply` (client-side) creates it: the last-applied annotation and the
/// `kubectl-client-side-apply` Update entry owning every field.
fn client_side_applied_pod(image: &str) -> Value {
    let config = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"containers": [{"name": "nginx", "image": image}]}});
    let mut pod = config.clone();
    pod["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": config.to_string(),
    });
    update_managed_fields(
        info("", "pods"),
        None,
        &mut pod,
        "kubectl-client-side-apply",
        "t1",
        None,
    );
    pod
}

#[test]
fn kubectl_server_side_apply_takes_over_from_client_side_apply() {
    let i = info("", "pods");
    let live = client_side_applied_pod("nginx:1.27");
    let v2 = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}"#;
    // Another manager conflicts, as upstream: only `kubectl` takes over.
    match server_side_apply(i, Some(&live), v2.as_bytes(), "other", false, "t2") {
        Err(PatchError::Conflict { conflicts }) => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!(conflicts[0].manager, "kubectl-client-side-apply");
            assert_eq!(conflicts[0].field, ".spec.containers[name=\"nginx\"].image");
        }
        other => panic!("{other:?}"),
    }
    let got = match server_side_apply(i, Some(&live), v2.as_bytes(), "kubectl", false, "t2") {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        got.pointer("/spec/containers/0/image"),
        Some(&json!("nginx:1.28"))
    );
    let image = [
        "f:spec",
        "f:containers",
        "k:{\"name\":\"nginx\"}",
        "f:image",
    ];
    let owns = |manager: &str| {
        entry(&got, manager)
            .and_then(|e| e.get("fieldsV1"))
            .and_then(|f| image.iter().try_fold(f, |node, seg| node.get(*seg)))
            .is_some()
    };
    assert!(owns("kubectl"));
    assert!(!owns("kubectl-client-side-apply"));

    // A field changed since the last client-side apply is not the last applier's: it conflicts.
    let mut changed = live.clone();
    changed["spec"]["containers"][0]["image"] = json!("nginx:edited");
    match server_side_apply(i, Some(&changed), v2.as_bytes(), "kubectl", false, "t2") {
        Err(PatchError::Conflict { conflicts }) => assert_eq!(conflicts.len(), 1),
        other => panic!("{other:?}"),
    }
    // So does a last-applied configuration of another apiVersion.
    let mut other_version = live;
    other_version["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(r#"{"apiVersion":"v2","kind":"Pod"}"#);
    assert!(matches!(
        server_side_apply(
            i,
            Some(&other_version),
            v2.as_bytes(),
            "kubectl",
            false,
            "t2"
        ),
        Err(PatchError::Conflict { .. })
    ));
}

#[test]
fn kubectl_server_side_apply_keeps_the_last_applied_annotation_current() {
    let i = info("", "pods");
    let live = client_side_applied_pod("nginx:1.27");
    let v2 = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}"#;
    let got = server_side_apply(i, Some(&live), v2.as_bytes(), "kubectl", false, "t2")
        .unwrap_or_default();
    let text = got
        .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert_eq!(
        text,
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"image\":\"nginx:1.28\",\"name\":\"nginx\"}]}}\n"
    );
}

#[test]
fn the_first_apply_to_an_unmanaged_object_conflicts_with_before_first_apply() {
    let i = info("", "pods");
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}});
    let v2 = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}"#;
    match server_side_apply(i, Some(&live), v2.as_bytes(), "m", false, "t2") {
        Err(PatchError::Conflict { conflicts }) => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!(conflicts[0].manager, "before-first-apply");
            assert_eq!(conflicts[0].operation, "Update");
        }
        other => panic!("{other:?}"),
    }
    // Applying the same values takes co-ownership without a conflict.
    let same = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}"#;
    let got =
        server_side_apply(i, Some(&live), same.as_bytes(), "m", false, "t2").unwrap_or_default();
    assert!(entry(&got, "before-first-apply").is_some());
    assert!(entry(&got, "m").is_some());
}
