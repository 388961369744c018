//! Table-driven tests of the apps/v1 StatefulSet, DaemonSet and ControllerRevision strategies:
//! defaults, validation messages and field paths, update rules, `/scale` and printers.

use super::*;
use crate::registry::{builtin, Resource};
use serde_json::json;
use std::sync::Arc;

fn res(plural: &str) -> Arc<Resource> {
    match builtin::find("apps", plural) {
        Some(r) => r,
        None => panic!("no strategy for apps/{plural}"),
    }
}

fn rendered(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn now() -> jiff::Timestamp {
    api::meta::parse_time("2026-12-02T16:00:00Z").unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn statefulset() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2026-12-02T15:59:00Z"},
        "spec": {
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        },
        "status": {"replicas": 5},
    })
}

fn created_sts() -> Value {
    let mut s = statefulset();
    res("statefulsets").prepare_for_create(&mut s);
    s
}

#[test]
fn statefulset_defaults() {
    let s = created_sts();
    let spec = &s["spec"];
    assert_eq!(spec["podManagementPolicy"], json!("OrderedReady"));
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(spec["replicas"], json!(1));
    assert_eq!(spec["revisionHistoryLimit"], json!(10));
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(
        spec.pointer("/volumeClaimTemplates/0/spec/volumeMode"),
        Some(&json!("Filesystem"))
    );
    assert_eq!(
        spec.pointer("/volumeClaimTemplates/0/status"),
        Some(&json!({"phase": "Pending"}))
    );
    assert_eq!(
        spec.pointer("/template/spec/restartPolicy"),
        Some(&json!("Always"))
    );
    assert_eq!(s["status"], json!({"availableReplicas": 0, "replicas": 0}));
    assert_eq!(s.pointer("/metadata/generation"), Some(&json!(1)));
    let errs = res("statefulsets").validate_create(&s);
    assert!(errs.is_empty(), "{:?}", rendered(&errs));

    // An explicit RollingUpdate without rollingUpdate stays so; OnDelete gets no partition;
    // maxUnavailable (an alpha field) is dropped.
    let mut explicit = statefulset();
    explicit["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    res("statefulsets").prepare_for_create(&mut explicit);
    assert_eq!(
        explicit.pointer("/spec/updateStrategy"),
        Some(&json!({"type": "RollingUpdate"}))
    );
    let mut max = statefulset();
    max["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2, "partition": 1}});
    res("statefulsets").prepare_for_create(&mut max);
    assert_eq!(
        max.pointer("/spec/updateStrategy/rollingUpdate"),
        Some(&json!({"partition": 1}))
    );
}

#[test]
fn statefulset_validation_messages() {
    let st = res("statefulsets");
    let errs = |mutate: &dyn Fn(&mut Value)| {
        let mut s = statefulset();
        mutate(&mut s);
        st.prepare_for_create(&mut s);
        rendered(&st.validate_create(&s))
    };
    for (mutate, want) in [
        (Box::new(|s: &mut Value| s["metadata"]["name"] = json!("web.v1")) as Box<dyn Fn(&mut Value)>,
            "metadata.name: Invalid value: \"web.v1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        (Box::new(|s: &mut Value| s["spec"]["podManagementPolicy"] = json!("Random")),
            "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"),
        (Box::new(|s: &mut Value| s["spec"]["updateStrategy"] = json!({"type": "Sometimes"})),
            "spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'"),
        (Box::new(|s: &mut Value| s["spec"]["updateStrategy"] = json!({"type": "OnDelete", "rollingUpdate": {"partition": 2}})),
            "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:2, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"),
        (Box::new(|s: &mut Value| s["spec"]["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"partition": -1}})),
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"),
        (Box::new(|s: &mut Value| s["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenDeleted": "Keep"})),
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\""),
        (Box::new(|s: &mut Value| s["spec"]["replicas"] = json!(-1)),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        (Box::new(|s: &mut Value| s["spec"]["ordinals"] = json!({"start": -1})),
            "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"),
        (Box::new(|s: &mut Value| s["spec"]["selector"] = json!({"matchLabels": {"app": "other"}})),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"nginx\"}: `selector` does not match template `labels`"),
        (Box::new(|s: &mut Value| s["spec"]["selector"] = json!({})),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"),
        (Box::new(|s: &mut Value| s["spec"]["template"]["spec"]["restartPolicy"] = json!("Never")),
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""),
        (Box::new(|s: &mut Value| s["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5)),
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"),
    ] {
        let got = errs(&mutate);
        assert!(got.contains(&want.to_string()), "missing {want}: {got:?}");
    }
    let missing = errs(&|s: &mut Value| {
        if let Some(spec) = s["spec"].as_object_mut() {
            spec.remove("selector");
        }
    });
    assert_eq!(missing, vec![
        "spec.selector: Required value",
        "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"nginx\"}: `selector` does not match template `labels`",
    ]);
    // 1.33 does not validate a StatefulSet's pod spec (only its template metadata).
    assert!(
        errs(&|s: &mut Value| s["spec"]["template"]["spec"]["containers"] = json!([])).is_empty()
    );
}

#[test]
fn statefulset_updates_and_scale() {
    let st = res("statefulsets");
    let old = created_sts();
    let mut ok = old.clone();
    ok["spec"]["replicas"] = json!(3);
    ok["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    ok["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    ok["spec"]["minReadySeconds"] = json!(5);
    ok["spec"]["ordinals"] = json!({"start": 1});
    ok["spec"]["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenDeleted": "Delete", "whenScaled": "Retain"});
    st.prepare_for_update(&mut ok, &old);
    assert!(
        st.validate_update(&ok, &old).is_empty(),
        "{:?}",
        rendered(&st.validate_update(&ok, &old))
    );
    assert_eq!(ok.pointer("/metadata/generation"), Some(&json!(2)));
    assert_eq!(
        ok.pointer("/status/replicas"),
        Some(&json!(0)),
        "status comes from storage"
    );
    for (k, v) in [
        ("serviceName", json!("other")),
        ("volumeClaimTemplates", json!([])),
        ("podManagementPolicy", json!("Parallel")),
        ("revisionHistoryLimit", json!(3)),
        (
            "selector",
            json!({"matchLabels": {"app": "nginx", "x": "y"}}),
        ),
    ] {
        let mut bad = old.clone();
        bad["spec"][k] = v;
        bad["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
        st.prepare_for_update(&mut bad, &old);
        let errs = rendered(&st.validate_update(&bad, &old));
        assert_eq!(
            errs,
            vec!["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"],
            "{k}"
        );
    }
    // A stored maxUnavailable is kept.
    let mut with_max = old.clone();
    with_max["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(2);
    let mut again = with_max.clone();
    st.prepare_for_update(&mut again, &with_max);
    assert_eq!(
        again.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable"),
        Some(&json!(2))
    );
    again["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!("0%");
    assert!(rendered(&st.validate_update(&again, &with_max)).contains(
        &"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"0%\"}: cannot be 0".to_string()
    ));

    let Some(scale) = st.strategy.scale() else {
        panic!("statefulsets have /scale");
    };
    let mut s = old.clone();
    s["status"] = json!({"replicas": 1, "readyReplicas": 1});
    let sc = scale.to_scale(&s);
    assert_eq!(sc["kind"], json!("Scale"));
    assert_eq!(sc.pointer("/spec/replicas"), Some(&json!(1)));
    assert_eq!(sc.pointer("/status/replicas"), Some(&json!(1)));
    assert_eq!(sc.pointer("/status/selector"), Some(&json!("app=nginx")));
    assert_eq!(
        scale.apply_scale(&mut s, &json!({"spec": {"replicas": 4}})),
        Ok(())
    );
    assert_eq!(s.pointer("/spec/replicas"), Some(&json!(4)));
    assert!(scale
        .apply_scale(&mut s, &json!({"spec": {"replicas": -4}}))
        .is_err());
    assert_eq!(
        st.strategy.table_cells(&s, now()),
        vec![
            json!("web"),
            json!("1/4"),
            json!("60s"),
            json!("nginx"),
            json!("nginx:1.27")
        ]
    );
}

fn daemonset() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system", "creationTimestamp": "2026-12-01T16:00:00Z"},
        "spec": {
            "selector": {"matchLabels": {"name": "agent"}},
            "template": {"metadata": {"labels": {"name": "agent"}}, "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}},
        },
    })
}

#[test]
fn daemonset_defaults_and_template_generation() {
    let st = res("daemonsets");
    let mut d = daemonset();
    st.prepare_for_create(&mut d);
    assert_eq!(
        d.pointer("/spec/updateStrategy"),
        Some(
            &json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        )
    );
    assert_eq!(d.pointer("/spec/revisionHistoryLimit"), Some(&json!(10)));
    assert_eq!(
        d.pointer("/metadata/annotations/deprecated.daemonset.template.generation"),
        Some(&json!("1"))
    );
    assert_eq!(
        d["status"],
        json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0})
    );
    assert!(
        st.validate_create(&d).is_empty(),
        "{:?}",
        rendered(&st.validate_create(&d))
    );

    let mut labels = d.clone();
    labels["metadata"]["labels"] = json!({"a": "b"});
    labels["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = json!("7");
    st.prepare_for_update(&mut labels, &d);
    assert_eq!(
        labels.pointer("/metadata/annotations/deprecated.daemonset.template.generation"),
        Some(&json!("1")),
        "clients do not set the template generation"
    );
    assert_eq!(labels.pointer("/metadata/generation"), Some(&json!(1)));
    let mut image = d.clone();
    image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("agent:2");
    st.prepare_for_update(&mut image, &d);
    assert_eq!(
        image.pointer("/metadata/annotations/deprecated.daemonset.template.generation"),
        Some(&json!("2"))
    );
    assert_eq!(image.pointer("/metadata/generation"), Some(&json!(2)));
    assert!(st.validate_update(&image, &d).is_empty());
    let mut moved = d.clone();
    moved["spec"]["selector"] = json!({"matchLabels": {"name": "agent", "v": "2"}});
    moved["spec"]["template"]["metadata"]["labels"]["v"] = json!("2");
    st.prepare_for_update(&mut moved, &d);
    assert_eq!(
        rendered(&st.validate_update(&moved, &d)),
        vec!["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"name\":\"agent\", \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    );
}

#[test]
fn daemonset_validation_messages_and_table() {
    let st = res("daemonsets");
    let errs = |mutate: &dyn Fn(&mut Value)| {
        let mut d = daemonset();
        mutate(&mut d);
        st.prepare_for_create(&mut d);
        rendered(&st.validate_create(&d))
    };
    for (mutate, want) in [
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"type": "Sometimes"})) as Box<dyn Fn(&mut Value)>,
            "spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\""),
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxSurge": 1}})),
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero"),
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 0}})),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"),
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": "lots"}})),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"lots\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": "150%"}})),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"),
        (Box::new(|d: &mut Value| d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": -1}})),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
        (Box::new(|d: &mut Value| d["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure")),
            "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\""),
        (Box::new(|d: &mut Value| d["spec"]["template"]["spec"]["containers"] = json!([])),
            "spec.template.spec.containers: Required value"),
        (Box::new(|d: &mut Value| d["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(3)),
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported"),
        (Box::new(|d: &mut Value| d["spec"]["selector"] = json!({"matchLabels": {}})),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for daemonset"),
        (Box::new(|d: &mut Value| d["spec"]["template"]["metadata"]["labels"] = json!({"name": "other"})),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"name\":\"other\"}: `selector` does not match template `labels`"),
    ] {
        let got = errs(&mutate);
        assert!(got.contains(&want.to_string()), "missing {want}: {got:?}");
    }
    assert!(errs(&|d: &mut Value| d["spec"]["updateStrategy"] =
        json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}}))
    .is_empty());
    assert!(
        errs(&|d: &mut Value| d["spec"]["updateStrategy"] = json!({"type": "OnDelete"})).is_empty()
    );

    let mut d = daemonset();
    st.prepare_for_create(&mut d);
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    d["status"] = json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2});
    assert_eq!(
        st.strategy.table_cells(&d, now()),
        vec![
            json!("agent"),
            json!(3),
            json!(3),
            json!(2),
            json!(3),
            json!(2),
            json!("kubernetes.io/os=linux"),
            json!("24h"),
            json!("agent"),
            json!("agent:1"),
            json!("name=agent")
        ]
    );
    assert_eq!(
        st.strategy
            .table_columns()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].clone())
            .collect::<Vec<_>>(),
        vec![
            json!("Name"),
            json!("Desired"),
            json!("Current"),
            json!("Ready"),
            json!("Up-to-date"),
            json!("Available"),
            json!("Node Selector"),
            json!("Age")
        ]
    );
}

#[test]
fn controller_revisions() {
    let st = res("controllerrevisions");
    let mut cr = json!({
        "metadata": {"name": "web-6b7f", "namespace": "default", "creationTimestamp": "2026-12-02T15:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]},
        "data": {"spec": {"template": {}}},
        "revision": 2,
    });
    st.prepare_for_create(&mut cr);
    assert_eq!(cr.get("status"), None);
    assert_eq!(cr.pointer("/metadata/generation"), None);
    assert!(st.validate_create(&cr).is_empty());
    assert_eq!(
        st.strategy.table_cells(&cr, now()),
        vec![
            json!("web-6b7f"),
            json!("statefulset.apps/web"),
            json!(2),
            json!("60m")
        ]
    );
    let mut orphan = cr.clone();
    orphan["metadata"]["ownerReferences"] = json!([]);
    assert_eq!(st.strategy.table_cells(&orphan, now())[1], json!("<none>"));
    let bad = json!({"metadata": {"name": "x", "namespace": "default"}, "revision": -1});
    assert_eq!(
        rendered(&st.validate_create(&bad)),
        vec![
            "data: Required value: data is mandatory",
            "revision: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
    let mut changed = cr.clone();
    changed["data"] = json!({"spec": {}});
    changed["revision"] = json!(3);
    assert_eq!(
        rendered(&st.validate_update(&changed, &cr)),
        vec!["data: Invalid value: {\"spec\":{}}: field is immutable"]
    );
}
