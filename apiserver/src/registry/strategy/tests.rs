//! Table-driven tests of the strategies.

use super::*;
use crate::registry::{builtin, Resource};
use serde_json::json;

fn s(group: &str, plural: &str) -> std::sync::Arc<Resource> {
    match builtin::find(group, plural) {
        Some(s) => s,
        None => panic!("no strategy for {group}/{plural}"),
    }
}

/// Every built-in resource, each with its own strategy.
fn all() -> Vec<std::sync::Arc<Resource>> {
    let ips = std::sync::Arc::new(ClusterIpAllocator::new());
    builtin::resources(&ips)
        .into_iter()
        .map(std::sync::Arc::new)
        .collect()
}

#[test]
fn every_resource_has_its_strategy_and_aligned_table() {
    let now = jiff::Timestamp::now();
    for st in all() {
        let r = &st.info;
        let obj = json!({"metadata": {"name": "x", "namespace": "default", "creationTimestamp": api::meta::now_rfc3339()}});
        assert_eq!(
            st.strategy.table_columns().len(),
            st.strategy.table_cells(&obj, now).len(),
            "{}",
            r.plural
        );
        assert_eq!(st.has_status(), r.has_status_subresource(), "{}", r.plural);
        assert_eq!(
            st.strategy.scale().is_some(),
            r.subresource_named("scale").is_some(),
            "{}",
            r.plural
        );
        assert_eq!(st.field_value(&obj, "metadata.name").as_deref(), Some("x"));
        assert!(st.field_value(&obj, "no.such.field").is_none());
    }
}

fn now() -> jiff::Timestamp {
    api::meta::parse_time("2026-12-02T16:00:00Z").unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn pod(extra_spec: Value, status: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "nginx", "image": "nginx:1.25"}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx", "namespace": "default", "creationTimestamp": "2026-12-02T15:55:00Z"},
        "spec": spec,
        "status": status,
    })
}

fn cells(plural: &str, obj: &Value) -> Vec<Value> {
    let g = if plural == "deployments" || plural == "replicasets" {
        "apps"
    } else if plural == "leases" {
        "coordination.k8s.io"
    } else {
        ""
    };
    s(g, plural).strategy.table_cells(obj, now())
}

#[test]
fn pod_table_rows() {
    let running = json!({"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-12-02T15:55:01Z"}}}]});
    let rows: Vec<(Value, Vec<Value>)> = vec![
        (
            pod(json!({}), json!({"phase": "Pending"})),
            vec![
                json!("nginx"),
                json!("0/1"),
                json!("Pending"),
                json!("0"),
                json!("5m"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
            ],
        ),
        (
            pod(json!({"nodeName": "node1"}), running.clone()),
            vec![
                json!("nginx"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("5m"),
                json!("10.0.0.5"),
                json!("node1"),
                json!("<none>"),
                json!("<none>"),
            ],
        ),
        (
            pod(
                json!({}),
                json!({"phase": "Pending", "containerStatuses": [{"name": "nginx", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
            ),
            vec![json!("nginx"), json!("0/1"), json!("ContainerCreating")],
        ),
        (
            pod(
                json!({}),
                json!({"phase": "Running", "containerStatuses": [{"name": "nginx", "ready": false, "restartCount": 3,
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-12-02T15:58:00Z"}},
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
            ),
            vec![
                json!("nginx"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("3 (2m ago)"),
            ],
        ),
        (
            pod(
                json!({}),
                json!({"phase": "Succeeded", "containerStatuses": [{"name": "nginx", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
            ),
            vec![json!("nginx"), json!("0/1"), json!("Completed")],
        ),
        (
            pod(
                json!({}),
                json!({"phase": "Failed", "containerStatuses": [{"name": "nginx", "state": {"terminated": {"exitCode": 2}}}]}),
            ),
            vec![json!("nginx"), json!("0/1"), json!("ExitCode:2")],
        ),
        (
            pod(
                json!({"initContainers": [{"name": "init", "image": "busybox"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [{"name": "init", "state": {"waiting": {"reason": "PodInitializing"}}}]}),
            ),
            vec![json!("nginx"), json!("0/1"), json!("Init:0/1")],
        ),
        (
            pod(
                json!({}),
                json!({"phase": "Pending", "containerStatuses": [{"name": "nginx", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}),
            ),
            vec![json!("nginx"), json!("0/1"), json!("ImagePullBackOff")],
        ),
    ];
    for (obj, want) in rows {
        let got = cells("pods", &obj);
        assert_eq!(&got[..want.len()], &want[..], "{obj}");
    }
    let mut terminating = pod(json!({"nodeName": "n"}), running);
    api::meta::set_deletion(&mut terminating, "2026-12-02T16:00:30Z", 30);
    assert_eq!(cells("pods", &terminating)[2], json!("Terminating"));
    assert_eq!(pod_status_reason(&terminating), "Terminating");
    let gates = pod(
        json!({"readinessGates": [{"conditionType": "x"}]}),
        json!({"conditions": [{"type": "x", "status": "True"}]}),
    );
    assert_eq!(cells("pods", &gates)[8], json!("1/1"));
}

#[test]
fn workload_table_rows() {
    let rc = json!({"metadata": {"name": "web", "creationTimestamp": "2026-12-02T15:00:00Z"},
        "spec": {"replicas": 3, "selector": {"app": "web"}, "template": {"spec": {"containers": [{"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]}}},
        "status": {"replicas": 2, "readyReplicas": 1}});
    assert_eq!(
        cells("replicationcontrollers", &rc),
        vec![
            json!("web"),
            json!(3),
            json!(2),
            json!(1),
            json!("60m"),
            json!("a,b"),
            json!("i1,i2"),
            json!("app=web")
        ]
    );
    let rs = json!({"metadata": {"name": "rs", "creationTimestamp": "2026-12-01T16:00:00Z"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]}, "template": {}}});
    assert_eq!(
        cells("replicasets", &rs),
        vec![
            json!("rs"),
            json!(1),
            json!(0),
            json!(0),
            json!("24h"),
            json!(""),
            json!(""),
            json!("app=x,t in (a)")
        ]
    );
    let d = json!({"metadata": {"name": "d", "creationTimestamp": "2026-12-02T15:59:50Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}}, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    assert_eq!(
        cells("deployments", &d),
        vec![
            json!("d"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("10s"),
            json!("c"),
            json!("nginx"),
            json!("app=d")
        ]
    );
}

#[test]
fn other_table_rows() {
    let node = json!({"metadata": {"name": "n1", "creationTimestamp": "2026-11-30T16:00:00Z", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                   "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Fake", "kernelVersion": "6.0", "containerRuntimeVersion": "fake://1"}}});
    assert_eq!(
        cells("nodes", &node),
        vec![
            json!("n1"),
            json!("Ready,SchedulingDisabled"),
            json!("control-plane,worker"),
            json!("2d"),
            json!("v1.33.0"),
            json!("10.1.0.1"),
            json!("<none>"),
            json!("Fake"),
            json!("6.0"),
            json!("fake://1")
        ]
    );
    let bare_node = json!({"metadata": {"name": "n2"}});
    assert_eq!(cells("nodes", &bare_node)[1], json!("Unknown"));
    let ns = json!({"metadata": {"name": "default", "creationTimestamp": "2026-12-02T15:59:00Z"}, "status": {"phase": "Active"}});
    assert_eq!(
        cells("namespaces", &ns),
        vec![json!("default"), json!("Active"), json!("60s")]
    );
    let svc = json!({"metadata": {"name": "web", "creationTimestamp": "2026-12-02T15:59:00Z"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}], "selector": {"app": "web"}}});
    assert_eq!(
        cells("services", &svc),
        vec![
            json!("web"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("60s"),
            json!("app=web")
        ]
    );
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.11", "ports": []}});
    assert_eq!(cells("services", &lb)[3], json!("<pending>"));
    assert_eq!(cells("services", &lb)[4], json!("<none>"));
    let cm = json!({"metadata": {"name": "cm1", "creationTimestamp": "2026-12-02T15:59:58Z"}, "data": {"a": "b", "c": "d"}, "binaryData": {"e": "AA=="}});
    assert_eq!(
        cells("configmaps", &cm),
        vec![json!("cm1"), json!(3), json!("2s")]
    );
    let secret = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "Yg=="}});
    assert_eq!(
        cells("secrets", &secret),
        vec![json!("s"), json!("Opaque"), json!(1), json!("<unknown>")]
    );
    let sa = json!({"metadata": {"name": "default"}, "secrets": [{"name": "x"}]});
    assert_eq!(cells("serviceaccounts", &sa)[1], json!(1));
    let lease = json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
    assert_eq!(cells("leases", &lease)[1], json!("n1"));
}

#[test]
fn event_rows_in_both_api_versions() {
    let ev = json!({"metadata": {"name": "nginx.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "nginx", "namespace": "default", "uid": "u1", "fieldPath": "spec.containers{nginx}"},
        "reason": "Pulled", "message": "ok \n", "type": "Normal", "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-12-02T15:50:00Z", "lastTimestamp": "2026-12-02T15:59:00Z", "count": 4});
    let want = vec![
        json!("60s"),
        json!("Normal"),
        json!("Pulled"),
        json!("pod/nginx"),
        json!("spec.containers{nginx}"),
        json!("kubelet, node1"),
        json!("ok"),
        json!("10m"),
        json!(4),
        json!("nginx.1"),
    ];
    assert_eq!(cells("events", &ev), want);
    let new_api = s("events.k8s.io", "events");
    let converted = new_api.strategy.from_storage(ev.clone());
    assert_eq!(converted.get("note"), Some(&json!("ok \n")));
    assert_eq!(converted.pointer("/regarding/name"), Some(&json!("nginx")));
    assert_eq!(
        converted.get("apiVersion"),
        Some(&json!("events.k8s.io/v1"))
    );
    assert_eq!(new_api.strategy.table_cells(&converted, now()), want);
    let back = new_api.strategy.to_storage(converted);
    assert_eq!(back.get("message"), Some(&json!("ok \n")));
    assert_eq!(back.get("apiVersion"), Some(&json!("v1")));
    assert_eq!(
        s("", "events")
            .field_value(&ev, "involvedObject.uid")
            .as_deref(),
        Some("u1")
    );
    assert_eq!(
        s("", "events").field_value(&ev, "source").as_deref(),
        Some("kubelet")
    );
    assert!(s("", "events").strategy.allow_create_on_update());
    let series = json!({"metadata": {"name": "e"}, "eventTime": "2026-12-02T15:59:59.000000Z", "series": {"count": 7, "lastObservedTime": "2026-12-02T15:59:30.000000Z"}, "regarding": {"kind": "Node", "name": "n"}});
    let c = new_api.strategy.table_cells(&series, now());
    assert_eq!(
        (c[0].clone(), c[3].clone(), c[7].clone(), c[8].clone()),
        (json!("30s"), json!("node/n"), json!("1s"), json!(7))
    );
    let missing =
        new_api.validate_create(&json!({"metadata": {"name": "e", "namespace": "default"}}));
    assert!(
        missing.iter().any(|e| e.field == "eventTime"),
        "{missing:?}"
    );
}

#[test]
fn pod_defaults_status_and_validation() {
    let st = s("", "pods");
    let mut p = pod(json!({}), json!({"phase": "Running"}));
    st.prepare_for_create(&mut p);
    assert_eq!(
        p.pointer("/status"),
        Some(&json!({"phase": "Pending", "qosClass": "BestEffort"}))
    );
    assert_eq!(p.pointer("/spec/restartPolicy"), Some(&json!("Always")));
    assert_eq!(
        p.pointer("/spec/terminationGracePeriodSeconds"),
        Some(&json!(30))
    );
    assert_eq!(p.pointer("/spec/dnsPolicy"), Some(&json!("ClusterFirst")));
    assert_eq!(
        p.pointer("/spec/schedulerName"),
        Some(&json!("default-scheduler"))
    );
    assert_eq!(
        p.pointer("/spec/containers/0/imagePullPolicy"),
        Some(&json!("IfNotPresent"))
    );
    assert_eq!(
        p.pointer("/spec/containers/0/terminationMessagePath"),
        Some(&json!("/dev/termination-log"))
    );
    assert!(p.pointer("/metadata/generation").is_none());
    assert!(
        st.validate_create(&p).is_empty(),
        "{:?}",
        st.validate_create(&p)
    );

    let mut latest = pod(
        json!({"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "r/x:latest", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}]}),
        json!({}),
    );
    st.prepare_for_create(&mut latest);
    assert_eq!(
        latest.pointer("/spec/containers/0/imagePullPolicy"),
        Some(&json!("Always"))
    );
    assert_eq!(
        latest.pointer("/status/qosClass"),
        Some(&json!("Burstable"))
    );

    let bad = json!({"metadata": {"name": "Bad_Name", "namespace": "default"},
        "spec": {"containers": [{"name": "a"}, {"name": "a", "image": "x", "ports": [{"containerPort": 70000}]}], "restartPolicy": "Sometimes"}});
    let errs = st.validate_create(&bad);
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    for f in [
        "metadata.name",
        "spec.containers[0].image",
        "spec.containers[1].name",
        "spec.containers[1].ports[0].containerPort",
        "spec.restartPolicy",
    ] {
        assert!(fields.contains(&f), "{f} not in {fields:?}");
    }
    let st_invalid = api::status::invalid("Pod", "Bad_Name", &errs);
    assert_eq!(api::status::code(&st_invalid), 422);
    assert!(st
        .validate_create(&json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {}}))
        .iter()
        .any(|e| e.field == "spec.containers"));
}

#[test]
fn pod_updates_are_mostly_immutable() {
    let st = s("", "pods");
    let mut old = pod(json!({}), json!({}));
    st.prepare_for_create(&mut old);
    old["status"] = json!({"phase": "Running"});
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    new["status"] = json!({"phase": "Failed"});
    api::meta::set_name(&mut new, "nginx");
    new["metadata"]["labels"] = json!({"a": "b"});
    st.prepare_for_update(&mut new, &old);
    assert_eq!(
        new.pointer("/status/phase"),
        Some(&json!("Running")),
        "status kept from old"
    );
    assert!(
        st.validate_update(&new, &old).is_empty(),
        "{:?}",
        st.validate_update(&new, &old)
    );
    let mut changed = old.clone();
    changed["spec"]["restartPolicy"] = json!("Never");
    st.prepare_for_update(&mut changed, &old);
    let errs = st.validate_update(&changed, &old);
    assert!(
        errs.iter()
            .any(|e| e.field == "spec" && e.kind == api::validation::FieldErrorKind::Forbidden),
        "{errs:?}"
    );
    // A PUT without the defaulted fields is defaulted again, so it is not a spec change.
    let mut stripped = old.clone();
    stripped["spec"] = json!({"containers": [{"name": "nginx", "image": "nginx:1.25"}]});
    st.prepare_for_update(&mut stripped, &old);
    assert!(
        st.validate_update(&stripped, &old).is_empty(),
        "{:?}",
        st.validate_update(&stripped, &old)
    );
    // Status writes keep the spec.
    let mut status_write = old.clone();
    status_write["spec"]["containers"][0]["image"] = json!("evil");
    status_write["status"] = json!({"phase": "Succeeded"});
    st.prepare_for_status_update(&mut status_write, &old);
    assert_eq!(
        status_write.pointer("/spec/containers/0/image"),
        Some(&json!("nginx:1.25"))
    );
    assert_eq!(
        status_write.pointer("/status/phase"),
        Some(&json!("Succeeded"))
    );
}

#[test]
fn pod_field_selectors_and_grace() {
    let st = s("", "pods");
    let p = pod(
        json!({"nodeName": "n1", "restartPolicy": "Always"}),
        json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}),
    );
    let f = |k: &str| st.field_value(&p, k);
    assert_eq!(f("spec.nodeName").as_deref(), Some("n1"));
    assert_eq!(f("spec.host"), None, "an old name, converted when parsed");
    assert_eq!(
        st.strategy.field_label_alias("spec.host"),
        Some("spec.nodeName")
    );
    assert_eq!(f("status.phase").as_deref(), Some("Running"));
    assert_eq!(f("status.podIP").as_deref(), Some("10.0.0.1"));
    assert_eq!(f("status.podIPs").as_deref(), Some("10.0.0.1,fd00::1"));
    assert_eq!(f("spec.hostNetwork").as_deref(), Some("false"));
    assert_eq!(f("metadata.namespace").as_deref(), Some("default"));
    assert_eq!(f("status.nominatedNodeName").as_deref(), Some(""));
    assert_eq!(f("spec.unschedulable"), None);
    let sel =
        api::fields::Selector::parse("status.phase=Running,spec.nodeName!=n2").unwrap_or_default();
    assert!(sel.matches(|k| st.field_value(&p, k)));
    assert_eq!(st.strategy.graceful_deletion_seconds(&p, None), Some(30));
    assert_eq!(st.strategy.graceful_deletion_seconds(&p, Some(5)), Some(5));
    assert_eq!(st.strategy.graceful_deletion_seconds(&p, Some(0)), None);
    assert_eq!(st.strategy.graceful_deletion_seconds(&p, Some(-3)), Some(1));
    let unscheduled = pod(json!({}), json!({"phase": "Pending"}));
    assert_eq!(
        st.strategy
            .graceful_deletion_seconds(&unscheduled, Some(30)),
        None
    );
    let done = pod(json!({"nodeName": "n1"}), json!({"phase": "Succeeded"}));
    assert_eq!(st.strategy.graceful_deletion_seconds(&done, None), None);
    assert_eq!(
        s("", "replicationcontrollers")
            .strategy
            .graceful_deletion_seconds(&p, Some(30)),
        None
    );
}

#[test]
fn rc_defaulting_generation_and_scale() {
    let st = s("", "replicationcontrollers");
    let mut rc = json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
        "status": {"replicas": 9}});
    st.prepare_for_create(&mut rc);
    assert_eq!(rc.pointer("/spec/replicas"), Some(&json!(1)));
    assert_eq!(rc.pointer("/spec/selector"), Some(&json!({"app": "web"})));
    assert_eq!(rc.pointer("/metadata/labels"), Some(&json!({"app": "web"})));
    assert_eq!(rc.pointer("/status"), Some(&json!({"replicas": 0})));
    assert_eq!(rc.pointer("/metadata/generation"), Some(&json!(1)));
    assert_eq!(
        rc.pointer("/spec/template/spec/restartPolicy"),
        Some(&json!("Always"))
    );
    assert!(
        st.validate_create(&rc).is_empty(),
        "{:?}",
        st.validate_create(&rc)
    );

    let mut labels_only = rc.clone();
    labels_only["metadata"]["labels"]["x"] = json!("y");
    labels_only["status"] = json!({"replicas": 5});
    st.prepare_for_update(&mut labels_only, &rc);
    assert_eq!(
        labels_only.pointer("/metadata/generation"),
        Some(&json!(1)),
        "metadata-only write keeps generation"
    );
    assert_eq!(
        labels_only.pointer("/status/replicas"),
        Some(&json!(0)),
        "main-resource write keeps status"
    );
    let mut scaled = rc.clone();
    scaled["spec"]["replicas"] = json!(3);
    st.prepare_for_update(&mut scaled, &rc);
    assert_eq!(scaled.pointer("/metadata/generation"), Some(&json!(2)));

    let mut with_status = rc.clone();
    with_status["status"] = json!({"replicas": 1, "readyReplicas": 1});
    with_status["spec"]["replicas"] = json!(7);
    st.prepare_for_status_update(&mut with_status, &rc);
    assert_eq!(with_status.pointer("/spec/replicas"), Some(&json!(1)));
    assert_eq!(with_status.pointer("/metadata/generation"), Some(&json!(1)));
    assert_eq!(
        with_status.pointer("/status/readyReplicas"),
        Some(&json!(1))
    );

    let sc = st
        .strategy
        .scale()
        .map(|sc| sc.to_scale(&scaled))
        .unwrap_or_default();
    assert_eq!(sc.pointer("/kind"), Some(&json!("Scale")));
    assert_eq!(sc.pointer("/apiVersion"), Some(&json!("autoscaling/v1")));
    assert_eq!(sc.pointer("/spec/replicas"), Some(&json!(3)));
    assert_eq!(sc.pointer("/status/selector"), Some(&json!("app=web")));
    assert_eq!(sc.pointer("/metadata/name"), Some(&json!("web")));
    let mut target = scaled.clone();
    let ok = st
        .strategy
        .scale()
        .map(|sc| sc.apply_scale(&mut target, &json!({"spec": {"replicas": 10}})));
    assert_eq!(ok, Some(Ok(())));
    assert_eq!(target.pointer("/spec/replicas"), Some(&json!(10)));
    let bad = st
        .strategy
        .scale()
        .map(|sc| sc.apply_scale(&mut target, &json!({"spec": {"replicas": -1}})));
    assert!(matches!(bad, Some(Err(_))));
    assert_eq!(st.field_value(&rc, "status.replicas").as_deref(), Some("0"));
    assert_eq!(
        st.strategy.default_propagation_policy(),
        Propagation::Orphan
    );

    let mismatch = json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": -1, "selector": {"app": "other"}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}});
    let errs = st.validate_create(&mismatch);
    let rendered: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert!(rendered.contains(&"spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`".to_string()), "{rendered:?}");
    assert!(
        rendered.contains(
            &"spec.replicas: Invalid value: -1: must be greater than or equal to 0".to_string()
        ),
        "{rendered:?}"
    );
    assert!(rendered.contains(&"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"".to_string()), "{rendered:?}");
}

#[test]
fn apps_selectors_are_required_and_immutable() {
    for plural in ["replicasets", "deployments"] {
        let st = s("apps", plural);
        let mut d = json!({"metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        st.prepare_for_create(&mut d);
        assert!(
            st.validate_create(&d).is_empty(),
            "{plural}: {:?}",
            st.validate_create(&d)
        );
        assert_eq!(d.pointer("/spec/replicas"), Some(&json!(1)));
        assert_eq!(d.pointer("/metadata/generation"), Some(&json!(1)));
        let mut changed = d.clone();
        changed["spec"]["selector"] = json!({"matchLabels": {"app": "e"}});
        changed["spec"]["template"]["metadata"]["labels"] = json!({"app": "e"});
        st.prepare_for_update(&mut changed, &d);
        assert!(st
            .validate_update(&changed, &d)
            .iter()
            .any(|e| e.field == "spec.selector" && e.message == "field is immutable"));
        let mut none = d.clone();
        if let Some(spec) = none["spec"].as_object_mut() {
            spec.remove("selector");
        }
        assert!(st
            .validate_create(&none)
            .iter()
            .any(|e| e.field == "spec.selector"));
        let sc = st
            .strategy
            .scale()
            .map(|s| s.to_scale(&d))
            .unwrap_or_default();
        assert_eq!(sc.pointer("/status/selector"), Some(&json!("app=d")));
    }
    let st = s("apps", "deployments");
    let mut d = json!({"metadata": {"name": "d", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    st.prepare_for_create(&mut d);
    assert_eq!(
        d.pointer("/spec/strategy"),
        Some(
            &json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        )
    );
    assert_eq!(d.pointer("/spec/revisionHistoryLimit"), Some(&json!(10)));
    assert_eq!(
        d.pointer("/spec/progressDeadlineSeconds"),
        Some(&json!(600))
    );
    assert_eq!(
        st.strategy.default_propagation_policy(),
        Propagation::Background
    );
}

#[test]
fn namespaces_nodes_services_configs() {
    let ns = s("", "namespaces");
    let mut n = json!({"metadata": {"name": "foo"}});
    ns.prepare_for_create(&mut n);
    assert_eq!(n.pointer("/spec/finalizers"), Some(&json!(["kubernetes"])));
    assert_eq!(n.pointer("/status/phase"), Some(&json!("Active")));
    assert_eq!(
        n.pointer("/metadata/labels/kubernetes.io~1metadata.name"),
        Some(&json!("foo"))
    );
    assert!(ns.validate_create(&n).is_empty());
    assert!(
        !ns.validate_create(&json!({"metadata": {"name": "a.b"}}))
            .is_empty(),
        "namespaces are DNS labels"
    );
    assert!(
        !ns.validate_create(&json!({"metadata": {"name": "a", "namespace": "x"}}))
            .is_empty(),
        "cluster-scoped"
    );
    assert_eq!(
        ns.field_value(&n, "status.phase").as_deref(),
        Some("Active")
    );
    assert_eq!(ns.field_value(&n, "metadata.namespace"), None);
    let mut upd = n.clone();
    upd["spec"]["finalizers"] = json!([]);
    ns.prepare_for_update(&mut upd, &n);
    assert_eq!(
        upd.pointer("/spec/finalizers"),
        Some(&json!(["kubernetes"]))
    );

    let node = s("", "nodes");
    let mut nd = json!({"metadata": {"name": "node-1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    node.prepare_for_create(&mut nd);
    assert!(
        nd.pointer("/status/conditions").is_some(),
        "nodes are created with their status"
    );
    assert_eq!(
        node.field_value(&nd, "spec.unschedulable").as_deref(),
        Some("false")
    );

    let svc = s("", "services");
    let mut sv = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    svc.prepare_for_create(&mut sv);
    assert_eq!(sv.pointer("/spec/type"), Some(&json!("ClusterIP")));
    assert_eq!(
        sv.pointer("/spec/ports/0"),
        Some(&json!({"port": 80, "protocol": "TCP", "targetPort": 80}))
    );
    assert_eq!(sv.pointer("/spec/sessionAffinity"), Some(&json!("None")));
    assert!(
        svc.validate_create(&sv).is_empty(),
        "{:?}",
        svc.validate_create(&sv)
    );
    assert!(!svc.validate_create(&json!({"metadata": {"name": "1web", "namespace": "d"}, "spec": {"ports": [{"port": 80}]}})).is_empty(), "DNS-1035");
    assert!(svc
        .validate_create(&json!({"metadata": {"name": "w", "namespace": "d"}, "spec": {}}))
        .iter()
        .any(|e| e.field == "spec.ports"));
    let alloc = ClusterIpAllocator::new();
    assert!(matches!(alloc.assign(&mut sv), Ok(Some(_))));
    let mut upd = sv.clone();
    if let Some(spec) = upd["spec"].as_object_mut() {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    svc.prepare_for_update(&mut upd, &sv);
    assert_eq!(
        upd.pointer("/spec/clusterIP"),
        sv.pointer("/spec/clusterIP"),
        "apply without clusterIP keeps it"
    );
    assert!(svc.validate_update(&upd, &sv).is_empty());
    upd["spec"]["clusterIP"] = json!("10.96.9.9");
    assert!(!svc.validate_update(&upd, &sv).is_empty());

    let cm = s("", "configmaps");
    assert!(cm
        .validate_create(
            &json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"ok.key_1": "v"}})
        )
        .is_empty());
    assert!(!cm
        .validate_create(
            &json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"bad key": "v"}})
        )
        .is_empty());
    let frozen =
        json!({"metadata": {"name": "c", "namespace": "d"}, "immutable": true, "data": {"a": "1"}});
    let mut thawed = frozen.clone();
    thawed["data"]["a"] = json!("2");
    assert!(!cm.validate_update(&thawed, &frozen).is_empty());

    let sec = s("", "secrets");
    let mut secret =
        json!({"metadata": {"name": "s", "namespace": "d"}, "stringData": {"p": "hi"}});
    sec.prepare_for_create(&mut secret);
    assert_eq!(secret.pointer("/data/p"), Some(&json!("aGk=")));
    assert_eq!(secret.pointer("/type"), Some(&json!("Opaque")));
    assert!(secret.get("stringData").is_none());
    assert!(sec.validate_create(&secret).is_empty());
    assert!(!sec
        .validate_create(
            &json!({"metadata": {"name": "s", "namespace": "d"}, "data": {"a": "!!!"}})
        )
        .is_empty());
    assert!(!sec.validate_create(&json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {}})).is_empty());
    assert_eq!(sec.field_value(&secret, "type").as_deref(), Some("Opaque"));
    let mut retyped = secret.clone();
    retyped["type"] = json!("kubernetes.io/basic-auth");
    assert!(sec
        .validate_update(&retyped, &secret)
        .iter()
        .any(|e| e.field == "type"));

    let lease = s("coordination.k8s.io", "leases");
    assert!(!lease.validate_create(&json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"leaseDurationSeconds": 0}})).is_empty());
    assert!(lease.validate_create(&json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"holderIdentity": "n", "leaseDurationSeconds": 40}})).is_empty());
}

#[test]
fn metadata_immutability_and_finalizers() {
    let st = s("", "configmaps");
    let old = json!({"metadata": {"name": "c", "namespace": "d", "uid": "u1", "deletionTimestamp": "2026-12-02T16:00:00Z", "finalizers": ["a"]}});
    let mut new = old.clone();
    new["metadata"]["uid"] = json!("u2");
    new["metadata"]["finalizers"] = json!(["a", "b"]);
    let errs = st.validate_update(&new, &old);
    assert!(errs.iter().any(|e| e.field == "metadata.uid"));
    assert!(errs.iter().any(|e| e.field == "metadata.finalizers"
        && e.kind == api::validation::FieldErrorKind::Forbidden));
}

#[test]
fn binding_assigns_once() {
    let mut p = pod(
        json!({}),
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}),
    );
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "nginx", "annotations": {"x": "y"}}, "target": {"kind": "Node", "name": "node1"}});
    assert_eq!(apply_binding(&mut p, &b), Ok(()));
    assert_eq!(p.pointer("/spec/nodeName"), Some(&json!("node1")));
    assert_eq!(p.pointer("/metadata/annotations/x"), Some(&json!("y")));
    let conds = p
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0]["status"], json!("True"));
    let again = apply_binding(&mut p, &b);
    assert_eq!(
        again,
        Err(BindingError::AlreadyBound {
            pod: "nginx".into(),
            node: "node1".into()
        })
    );
    let st = again
        .err()
        .map(|e| e.to_status("nginx"))
        .unwrap_or_default();
    assert_eq!(api::status::code(&st), 409);
    assert_eq!(st.message.as_deref(), Some("Operation cannot be fulfilled on pods/binding \"nginx\": pod nginx is already assigned to node \"node1\""));
    let mut fresh = pod(json!({}), json!({}));
    assert!(matches!(
        apply_binding(&mut fresh, &json!({"target": {}})),
        Err(BindingError::Invalid(_))
    ));
    api::meta::set_deletion(&mut fresh, "2026-12-02T16:00:00Z", 0);
    assert!(matches!(
        apply_binding(&mut fresh, &b),
        Err(BindingError::BeingDeleted { .. })
    ));
}

mod prop {
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::Strategy as _;

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-zA-Z0-9_. -]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// No hook panics on arbitrary JSON, and tables stay aligned.
        #[test]
        fn hooks_never_panic(spec in arb_json(), status in arb_json(), meta in arb_json()) {
            let now = jiff::Timestamp::now();
            for st in all() {
                let mut obj = json!({"metadata": meta.clone(), "spec": spec.clone(), "status": status.clone(), "data": spec.clone(), "involvedObject": spec.clone()});
                let old = obj.clone();
                st.prepare_for_create(&mut obj);
                let _ = st.validate_create(&obj);
                let mut upd = old.clone();
                st.prepare_for_update(&mut upd, &obj);
                let _ = st.validate_update(&upd, &obj);
                st.prepare_for_status_update(&mut upd, &obj);
                prop_assert_eq!(st.strategy.table_cells(&obj, now).len(), st.strategy.table_columns().len());
                let _ = st.field_value(&obj, "status.phase");
                let _ = st.strategy.graceful_deletion_seconds(&obj, Some(3));
                if let Some(sc) = st.strategy.scale() {
                    let _ = sc.to_scale(&obj);
                    let _ = sc.apply_scale(&mut obj, &spec);
                }
                let _ = st.strategy.from_storage(st.strategy.to_storage(obj));
            }
        }

        #[test]
        fn name_validation_matches_the_grammar(name in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?") {
            let st = s("", "configmaps");
            let obj = json!({"metadata": {"name": name, "namespace": "default"}});
            prop_assert!(st.validate_create(&obj).is_empty());
        }
    }
}
