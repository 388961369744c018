//! The core storage and policy kinds and EndpointSlices: upstream's defaults, messages and field
//! paths, update rules and printer cells, through the same steps the generic store runs.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn res(group: &str, plural: &str) -> Arc<Resource> {
    builtin::find(group, plural).unwrap_or_else(|| panic!("no {plural}"))
}

fn created(r: &Resource, obj: Value) -> (Value, Vec<String>) {
    let mut obj = obj;
    r.prepare_for_create(&mut obj);
    let errs = r
        .validate_create(&obj)
        .iter()
        .map(|e| e.to_string())
        .collect();
    (obj, errs)
}

fn updated(r: &Resource, new: Value, old: &Value) -> (Value, Vec<String>) {
    let mut new = new;
    r.prepare_for_update(&mut new, old);
    let errs = r
        .validate_update(&new, old)
        .iter()
        .map(|e| e.to_string())
        .collect();
    (new, errs)
}

fn pv(spec: Value) -> Value {
    json!({"metadata": {"name": "pv1"}, "spec": spec})
}

#[test]
fn persistent_volume_defaults_status_and_validation() {
    let r = res("", "persistentvolumes");
    let (obj, errs) = created(
        &r,
        pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}),
        ),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
    assert_eq!(obj["spec"]["hostPath"]["type"], "");
    assert_eq!(obj["status"]["phase"], "Pending");
    assert!(obj["status"]["lastPhaseTransitionTime"].is_string());

    let (_, errs) = created(&r, pv(json!({})));
    assert_eq!(
        errs,
        [
            "spec.accessModes: Required value",
            "spec.capacity: Required value",
            "spec.capacity: Unsupported value: core.ResourceList{}: supported values: \"storage\"",
            "spec: Required value: must specify a volume type",
        ]
    );
    let (_, errs) = created(
        &r,
        pv(
            json!({"capacity": {"storage": "0"}, "accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"],
            "persistentVolumeReclaimPolicy": "Keep", "hostPath": {"path": "/a"}, "nfs": {"server": "s", "path": "/b"}}),
        ),
    );
    assert_eq!(
        errs,
        [
            "spec.accessModes: Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
            "spec.capacity[storage]: Invalid value: \"0\": must be greater than zero",
            "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
            "spec.nfs: Forbidden: may not specify more than 1 volume type",
        ]
    );
    let (_, errs) = created(
        &r,
        pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/mnt"}}),
        ),
    );
    assert_eq!(
        errs,
        ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
    );
}

#[test]
fn persistent_volume_source_and_mode_are_immutable() {
    let r = res("", "persistentvolumes");
    let (old, _) = created(
        &r,
        pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}),
        ),
    );
    let mut new = old.clone();
    new["spec"]["capacity"]["storage"] = json!("2Gi");
    new["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
    assert!(updated(&r, new.clone(), &old).1.is_empty());
    new["spec"]["hostPath"]["path"] = json!("/other");
    new["spec"]["volumeMode"] = json!("Block");
    let errs = updated(&r, new, &old).1;
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with(
        "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n"
    ));
    assert_eq!(
        errs[1],
        "volumeMode: Invalid value: \"Block\": field is immutable"
    );
}

fn pvc(spec: Value) -> Value {
    json!({"metadata": {"name": "data", "namespace": "default"}, "spec": spec})
}

#[test]
fn claims_default_validate_and_keep_their_spec() {
    let r = res("", "persistentvolumeclaims");
    let (obj, errs) = created(
        &r,
        pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeAttributesClassName": "gold"}),
        ),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
    assert_eq!(obj["status"], json!({"phase": "Pending"}));
    assert!(obj["spec"].get("volumeAttributesClassName").is_none());

    let (_, errs) = created(
        &r,
        pvc(json!({"resources": {"requests": {"storage": "-1"}}, "storageClassName": "Fast_"})),
    );
    assert_eq!(
        errs[0],
        "spec.accessModes: Required value: at least 1 access mode is required"
    );
    assert_eq!(
        errs[1],
        "spec.resources[storage]: Invalid value: \"-1\": must be greater than zero"
    );
    assert!(errs[2].starts_with(
        "spec.storageClassName: Invalid value: \"Fast_\": a lowercase RFC 1123 subdomain"
    ));
    let (_, errs) = created(&r, pvc(json!({"accessModes": ["ReadWriteOnce"]})));
    assert_eq!(errs, ["spec.resources[storage]: Required value"]);

    // Unbound: the spec is immutable, requests included; a first volumeName may be set.
    let mut new = obj.clone();
    new["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    let errs = updated(&r, new, &obj).1;
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"), "{errs:?}");
    let mut named = obj.clone();
    named["spec"]["volumeName"] = json!("pv1");
    assert!(updated(&r, named, &obj).1.is_empty());
    // Bound: the request may grow.
    let mut bound = obj.clone();
    bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    let mut grown = bound.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    assert!(updated(&r, grown.clone(), &bound).1.is_empty());
    let mut shrunk = grown.clone();
    shrunk["spec"]["resources"]["requests"]["storage"] = json!("1Gi");
    assert_eq!(
        updated(&r, shrunk, &grown).1,
        ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
    );
}

#[test]
fn printers_of_volumes_and_claims() {
    let now = jiff::Timestamp::now();
    let r = res("", "persistentvolumes");
    let (mut obj, _) = created(
        &r,
        pv(
            json!({"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "hostPath": {"path": "/d"},
            "claimRef": {"namespace": "default", "name": "data"}, "storageClassName": "manual"}),
        ),
    );
    obj["metadata"]["creationTimestamp"] = json!(api::meta::format_time(now));
    let cells = r.strategy.table_cells(&obj, now);
    assert_eq!(
        cells[..9],
        [
            json!("pv1"),
            json!("5Gi"),
            json!("RWO,RWX"),
            json!("Retain"),
            json!("Pending"),
            json!("default/data"),
            json!("manual"),
            json!("<unset>"),
            json!("")
        ]
    );
    assert_eq!(cells[10], "Filesystem");
    let names: Vec<Value> = r
        .strategy
        .table_columns()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Capacity",
            "Access Modes",
            "Reclaim Policy",
            "Status",
            "Claim",
            "StorageClass",
            "VolumeAttributesClass",
            "Reason",
            "Age",
            "VolumeMode"
        ]
    );
    let c = res("", "persistentvolumeclaims");
    let (claim, _) = created(
        &c,
        pvc(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
        ),
    );
    let cells = c.strategy.table_cells(&claim, now);
    assert_eq!(
        cells[..7],
        [
            json!("data"),
            json!("Pending"),
            json!(""),
            json!(""),
            json!(""),
            json!(""),
            json!("<unset>")
        ]
    );
}

#[test]
fn limit_ranges_default_container_items_and_validate() {
    let r = res("", "limitranges");
    let (obj, errs) = created(
        &r,
        json!({"metadata": {"name": "lr", "namespace": "default"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"cpu": "100m"}, "default": {"memory": "512Mi"}},
            {"type": "Pod", "max": {"cpu": "4"}},
        ]}}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    let c = &obj["spec"]["limits"][0];
    assert_eq!(c["default"], json!({"cpu": "2", "memory": "512Mi"}));
    assert_eq!(c["defaultRequest"], json!({"cpu": "2", "memory": "512Mi"}));
    assert!(obj["spec"]["limits"][1].get("default").is_none());

    let (_, errs) = created(
        &r,
        json!({"metadata": {"name": "lr", "namespace": "default"}, "spec": {"limits": [
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "Pod"},
            {"type": "PersistentVolumeClaim"},
            {"type": "Widget", "max": {"bogus": "1"}},
        ]}}),
    );
    assert_eq!(
        errs,
        [
            "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
            "spec.limits[0].defaultRequest[cpu]: Invalid value: \"1\": min value 2 is greater than default request value 1",
            "spec.limits[0].default[cpu]: Invalid value: \"2\": min value 2 is greater than default value 1",
            "spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'",
            "spec.limits[2].type: Duplicate value: \"Pod\"",
            "spec.limits[3].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
            "spec.limits[4].type: Invalid value: \"Widget\": must be a standard limit type or fully qualified",
            "spec.limits[4].max[bogus]: Invalid value: \"bogus\": must be a standard resource type or fully qualified",
        ]
    );
}

#[test]
fn quotas_validate_names_scopes_and_keep_status() {
    let r = res("", "resourcequotas");
    let (obj, errs) = created(
        &r,
        json!({"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"pods": "10", "requests.cpu": "1", "count/deployments.apps": "2"}}, "status": {"hard": {"pods": "1"}}}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["status"], json!({}));
    let (_, errs) = created(
        &r,
        json!({"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"pods": "1.5", "widgets": "1", "cpu": "-1"}, "scopes": ["BestEffort", "NotBestEffort"]}}),
    );
    assert_eq!(
        errs,
        [
            "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            "spec.hard[pods]: Invalid value: \"1.5\": must be an integer",
            "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: unsupported scope applied to resource",
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: conflicting scopes",
        ]
    );
    let mut scoped = obj.clone();
    scoped["spec"]["scopes"] = json!(["NotTerminating"]);
    assert_eq!(
        updated(&r, scoped, &obj).1,
        ["spec.scopes: Invalid value: []core.ResourceQuotaScope{\"NotTerminating\"}: field is immutable"]
    );
    let mut with_status = obj.clone();
    with_status["status"] =
        json!({"hard": {"pods": "10", "limits.memory": "1Gi"}, "used": {"pods": "3"}});
    let cells = r.strategy.table_cells(&with_status, jiff::Timestamp::now());
    assert_eq!(cells[2], "pods: 3/10");
    assert_eq!(cells[3], "limits.memory: 0/1Gi");
}

#[test]
fn endpoints_default_protocols_and_refuse_special_addresses() {
    let r = res("", "endpoints");
    let (obj, errs) = created(
        &r,
        json!({"metadata": {"name": "web", "namespace": "default"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}]}]}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["subsets"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(
        r.strategy.table_cells(&obj, jiff::Timestamp::now())[1],
        "10.0.0.1:80,10.0.0.2:80"
    );
    let (_, errs) = created(
        &r,
        json!({"metadata": {"name": "web", "namespace": "default"}, "subsets": [{}, {"addresses": [{"ip": "127.0.0.1"}, {"ip": "nope"}], "ports": [{"port": 0, "protocol": "ICMP"}, {"port": 81}]}]}),
    );
    assert_eq!(
        errs,
        [
            "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`",
            "subsets[1].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "subsets[1].addresses[1].ip: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "subsets[1].addresses[1].ip: Invalid value: \"nope\": must be a valid IP address",
            "subsets[1].ports[0].name: Required value",
            "subsets[1].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "subsets[1].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "subsets[1].ports[1].name: Required value",
        ]
    );
}

#[test]
fn endpoint_slices_default_ports_and_keep_their_address_type() {
    let r = res("discovery.k8s.io", "endpointslices");
    let (obj, errs) = created(
        &r,
        json!({"metadata": {"name": "web-abc", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}], "ports": [{"port": 80}]}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(
        obj["ports"][0],
        json!({"port": 80, "name": "", "protocol": "TCP"})
    );
    let cells = r.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(
        cells[1..4],
        [json!("IPv4"), json!("80"), json!("10.0.0.1,10.0.0.2")]
    );
    let mut new = obj.clone();
    new["addressType"] = json!("IPv6");
    new["endpoints"] = json!([{"addresses": ["fe80::1"]}, {"addresses": []}]);
    assert_eq!(
        updated(&r, new, &obj).1,
        [
            "endpoints[0].addresses[0]: Invalid value: \"fe80::1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
            "endpoints[1].addresses: Required value: must contain at least 1 address",
            "addressType: Invalid value: \"IPv6\": field is immutable",
        ]
    );
    let (_, errs) = created(
        &r,
        json!({"metadata": {"name": "x", "namespace": "default"}, "addressType": "IPX"}),
    );
    assert_eq!(errs, ["addressType: Unsupported value: \"IPX\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""]);
    let many: Vec<Value> = (0..1001)
        .map(|_| json!({"addresses": ["10.0.0.1"]}))
        .collect();
    let (_, errs) = created(
        &r,
        json!({"metadata": {"name": "x", "namespace": "default"}, "addressType": "IPv4", "endpoints": many}),
    );
    assert_eq!(
        errs,
        ["endpoints: Too many: 1001: must have at most 1000 items"]
    );
}

#[test]
fn pod_templates_and_pods_get_volume_and_probe_defaults() {
    let r = res("", "podtemplates");
    let (obj, errs) = created(
        &r,
        json!({"metadata": {"name": "t", "namespace": "default"}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {
            "containers": [{"name": "c", "image": "nginx:1", "readinessProbe": {"httpGet": {"port": 80}},
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "h", "hostPath": {"path": "/h"}}]}}}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    let spec = &obj["template"]["spec"];
    assert_eq!(
        spec["volumes"][0],
        json!({"name": "scratch", "emptyDir": {}})
    );
    assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], 420);
    assert_eq!(spec["volumes"][2]["hostPath"]["type"], "");
    let probe = &spec["containers"][0]["readinessProbe"];
    assert_eq!(
        probe,
        &json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(
        spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(spec["restartPolicy"], "Always");
    let cells = r.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(
        cells,
        [json!("t"), json!("c"), json!("nginx:1"), json!("app=a")]
    );

    // Pods only: requests default to limits, host ports to container ports with hostNetwork.
    let pods = res("", "pods");
    let (pod, errs) = created(
        &pods,
        json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "nginx:1",
            "ports": [{"containerPort": 8080}], "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}], "volumes": [{"name": "v"}]}}),
    );
    assert!(errs.is_empty(), "{errs:?}");
    let c = &pod["spec"]["containers"][0];
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(c["ports"][0]["hostPort"], 8080);
    assert_eq!(pod["spec"]["volumes"][0]["emptyDir"], json!({}));
    assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    // Templates keep their requests as written.
    let rs = res("apps", "replicasets");
    let (obj, _) = created(
        &rs,
        json!({"metadata": {"name": "r", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}], "volumes": [{"name": "v"}]}}}}),
    );
    assert!(
        obj["spec"]["template"]["spec"]["containers"][0]["resources"]
            .get("requests")
            .is_none()
    );
    assert_eq!(
        obj["spec"]["template"]["spec"]["volumes"][0]["emptyDir"],
        json!({})
    );
}

#[test]
fn a_volume_phase_change_through_status_sets_its_transition_time() {
    let r = res("", "persistentvolumes");
    let old = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}},
        "status": {"phase": "Pending", "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
    let mut new = old.clone();
    new["status"]["phase"] = json!("Available");
    new["spec"]["capacity"]["storage"] = json!("9Gi");
    r.prepare_for_status_update(&mut new, &old);
    assert_eq!(new["spec"]["capacity"]["storage"], "1Gi");
    assert_ne!(
        new["status"]["lastPhaseTransitionTime"],
        "2020-01-01T00:00:00Z"
    );
    let mut same = old.clone();
    same["status"]["reason"] = json!("r");
    r.prepare_for_status_update(&mut same, &old);
    assert_eq!(
        same["status"]["lastPhaseTransitionTime"],
        "2020-01-01T00:00:00Z"
    );
}

#[test]
fn claim_data_sources_mirror_each_other() {
    let r = res("", "persistentvolumeclaims");
    let spec = |extra: Value| {
        let mut s = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            s[k] = v;
        }
        pvc(s)
    };
    let snap =
        json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s1"});
    let (obj, errs) = created(&r, spec(json!({"dataSource": snap})));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["spec"]["dataSourceRef"], snap);
    let (obj, _) = created(&r, spec(json!({"dataSourceRef": snap})));
    assert_eq!(obj["spec"]["dataSource"], snap);
    let other = json!({"kind": "PersistentVolumeClaim", "name": "src"});
    let (_, errs) = created(
        &r,
        spec(json!({"dataSource": other, "dataSourceRef": snap})),
    );
    assert_eq!(
        errs,
        ["spec: Invalid value: \"spec.dataSource\": must match dataSourceRef"]
    );
}

#[test]
fn templates_and_slices_count_generations_without_a_spec() {
    let r = res("", "podtemplates");
    let (old, _) = created(
        &r,
        json!({"metadata": {"name": "t", "namespace": "default"}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
    );
    assert_eq!(old["metadata"]["generation"], 1);
    let mut labelled = old.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(updated(&r, labelled, &old).0["metadata"]["generation"], 1);
    let mut changed = old.clone();
    changed["template"]["spec"]["containers"][0]["image"] = json!("j");
    assert_eq!(updated(&r, changed, &old).0["metadata"]["generation"], 2);

    let s = res("discovery.k8s.io", "endpointslices");
    let (old, _) = created(
        &s,
        json!({"metadata": {"name": "e", "namespace": "default"}, "addressType": "IPv4", "endpoints": []}),
    );
    assert_eq!(old["metadata"]["generation"], 1);
    let mut changed = old.clone();
    changed["endpoints"] = json!([{"addresses": ["10.0.0.9"]}]);
    assert_eq!(updated(&s, changed, &old).0["metadata"]["generation"], 2);
}
