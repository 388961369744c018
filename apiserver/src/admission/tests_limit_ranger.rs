//! LimitRanger against fixed LimitRanges: defaults and their annotation, the constraints of
//! `Container`, `Pod` and `PersistentVolumeClaim` items with upstream's messages
//! (`limitranger/admission_test.go`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::limit_constraints::pod_total;
use super::*;
use crate::registry::{Forbidden, Objects};

struct Ranges(Vec<Value>);

impl Objects for Ranges {
    fn list(&self, _group: &str, plural: &str) -> Vec<Arc<Value>> {
        match plural {
            "limitranges" => self.0.iter().cloned().map(Arc::new).collect(),
            _ => Vec::new(),
        }
    }

    fn get(&self, _: &str, _: &str, _: Option<&str>, _: &str) -> Option<Arc<Value>> {
        None
    }
}

fn range(limits: Value) -> Ranges {
    Ranges(vec![
        json!({"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": limits}}),
    ])
}

fn attrs(resource: &'static str, old: Option<&'static Value>) -> Attributes<'static> {
    Attributes {
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        group: "",
        resource,
        namespace: Some("ns"),
        old,
        subresource: "",
        warnings: None,
        audit: None,
        user: None,
        authorizes: false,
    }
}

fn container(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "i", "resources": resources})
}

fn pod(containers: Vec<Value>, init: Vec<Value>) -> Value {
    json!({"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"containers": containers, "initContainers": init},
           "status": {"phase": "Pending", "qosClass": "BestEffort"}})
}

fn check(ranges: &Ranges, obj: &mut Value, resource: &'static str) -> Result<(), Forbidden> {
    let a = attrs(resource, None);
    LimitRanger.admit(&a, obj, ranges)?;
    LimitRanger.validate(&a, obj, ranges)
}

fn refused(msg: &str) -> Result<(), Forbidden> {
    Err(Forbidden(msg.to_string()))
}

#[test]
fn container_defaults_fill_what_is_missing_and_annotate_the_pod() {
    let ranges = range(json!([{"type": "Container",
        "default": {"cpu": "500m", "memory": "512Mi"},
        "defaultRequest": {"cpu": "100m", "memory": "256Mi"}}]));
    let mut p = pod(
        vec![container("web", json!({}))],
        vec![container(
            "init",
            json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}),
        )],
    );
    assert_eq!(check(&ranges, &mut p, "pods"), Ok(()));
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}})
    );
    assert_eq!(
        p["spec"]["initContainers"][0]["resources"],
        json!({"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "1", "memory": "256Mi"}})
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web; memory request for init container init; memory limit for init container init"
    );
    assert_eq!(p["status"]["qosClass"], "Burstable");
    // Nothing to set: no annotation.
    let mut full = pod(
        vec![container(
            "web",
            json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}),
        )],
        vec![],
    );
    assert_eq!(check(&ranges, &mut full, "pods"), Ok(()));
    assert!(full["metadata"].get("annotations").is_none(), "{full}");
}

#[test]
fn container_min_max_and_ratio_with_upstreams_messages() {
    let ranges = range(
        json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "100Mi"},
                               "maxLimitRequestRatio": {"cpu": "2"}}]),
    );
    let cases = [
        (json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1500m", "memory": "1Gi"}}),
         "maximum cpu usage per Container is 1, but request is 1500m"),
        (json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1500m", "memory": "1Gi"}}),
         "maximum cpu usage per Container is 1, but limit is 2"),
        (json!({"requests": {"cpu": "100m", "memory": "1Gi"}}),
         "[maximum cpu usage per Container is 1.  No limit is specified, cpu max limit to request ratio per Container is 2, but no limit is specified or limit is 0]"),
        (json!({"limits": {"cpu": "500m", "memory": "50Mi"}, "requests": {"cpu": "500m", "memory": "50Mi"}}),
         "minimum memory usage per Container is 100Mi, but request is 50Mi"),
        (json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}),
         "cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000"),
        (json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m"}}),
         "minimum memory usage per Container is 100Mi.  No request is specified"),
    ];
    for (resources, want) in cases {
        let mut p = pod(vec![container("c", resources.clone())], vec![]);
        assert_eq!(check(&ranges, &mut p, "pods"), refused(want), "{resources}");
    }
    let mut ok = pod(
        vec![container(
            "c",
            json!({"limits": {"cpu": "1000m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "100Mi"}}),
        )],
        vec![],
    );
    assert_eq!(check(&ranges, &mut ok, "pods"), Ok(()));
    // Init containers are held to the same items.
    let mut init = pod(
        vec![],
        vec![container(
            "i",
            json!({"limits": {"cpu": "3", "memory": "1Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}}),
        )],
    );
    assert_eq!(
        check(&ranges, &mut init, "pods"),
        refused("maximum cpu usage per Container is 1, but limit is 3")
    );
}

#[test]
fn pod_items_hold_the_sum_of_containers_and_the_largest_init_container() {
    let ranges = range(json!([{"type": "Pod", "max": {"cpu": "1", "memory": "1Gi"}}]));
    let two = |cpu: &str| {
        container(
            "c",
            json!({"limits": {"cpu": cpu, "memory": "256Mi"}, "requests": {"cpu": cpu, "memory": "256Mi"}}),
        )
    };
    let mut p = pod(vec![two("600m"), two("600m")], vec![]);
    assert_eq!(
        check(&ranges, &mut p, "pods"),
        refused("maximum cpu usage per Pod is 1, but limit is 1200m")
    );
    let mut p = pod(
        vec![two("500m")],
        vec![container(
            "i",
            json!({"limits": {"cpu": "100m", "memory": "2Gi"}, "requests": {"cpu": "100m", "memory": "2Gi"}}),
        )],
    );
    assert_eq!(
        check(&ranges, &mut p, "pods"),
        refused("maximum memory usage per Pod is 1Gi, but limit is 2Gi")
    );
    let mut ok = pod(vec![two("500m"), two("500m")], vec![]);
    assert_eq!(check(&ranges, &mut ok, "pods"), Ok(()));
}

#[test]
fn pod_totals_count_sidecars_with_the_containers() {
    let c = |cpu: &str, sidecar: bool| {
        let mut c = container("c", json!({"requests": {"cpu": cpu}}));
        if sidecar {
            c["restartPolicy"] = json!("Always");
        }
        c
    };
    let spec =
        json!({"containers": [c("1", false)], "initContainers": [c("2", true), c("2500m", false)]});
    let total = pod_total(&spec, "requests");
    // Containers 1 + sidecar 2 = 3; the init container needs 2.5 + the sidecar's 2 = 4.5.
    assert_eq!(
        total.get("cpu").map(|q| q.canonical()),
        Some("4500m".to_string())
    );
}

#[test]
fn claims_are_held_to_min_and_max_of_their_requests() {
    let ranges = range(
        json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]),
    );
    let claim = |requests: Value| json!({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"resources": {"requests": requests}}});
    let mut big = claim(json!({"storage": "20Gi"}));
    assert_eq!(
        check(&ranges, &mut big, "persistentvolumeclaims"),
        refused("maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi")
    );
    let mut small = claim(json!({"storage": "500Mi"}));
    assert_eq!(
        check(&ranges, &mut small, "persistentvolumeclaims"),
        refused("minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi")
    );
    let mut none = claim(json!({}));
    assert_eq!(
        check(&ranges, &mut none, "persistentvolumeclaims"),
        refused("[minimum storage usage per PersistentVolumeClaim is 1Gi.  No request is specified, maximum storage usage per PersistentVolumeClaim is 10Gi.  No request is specified]")
    );
    let mut ok = claim(json!({"storage": "5Gi"}));
    assert_eq!(check(&ranges, &mut ok, "persistentvolumeclaims"), Ok(()));
    // Claim updates are checked too, unless the claim is being deleted.
    static DELETING: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
        || json!({"metadata": {"name": "c", "namespace": "ns", "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
    );
    static LIVE: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| json!({"metadata": {"name": "c", "namespace": "ns"}}));
    assert!(LimitRanger
        .validate(&attrs("persistentvolumeclaims", Some(&LIVE)), &big, &ranges)
        .is_err());
    assert_eq!(
        LimitRanger.validate(
            &attrs("persistentvolumeclaims", Some(&DELETING)),
            &big,
            &ranges
        ),
        Ok(())
    );
    // A subresource write (`/status`, by the volume controllers) is not LimitRanger's
    // (`SupportsAttributes`), whatever the claim requests.
    let status = Attributes {
        subresource: "status",
        ..attrs("persistentvolumeclaims", Some(&LIVE))
    };
    assert_eq!(LimitRanger.validate(&status, &big, &ranges), Ok(()));
}

#[test]
fn pod_updates_and_other_namespaces_are_not_checked() {
    static OLD: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| json!({"metadata": {"name": "p"}}));
    let ranges = range(json!([{"type": "Container", "max": {"cpu": "1"}}]));
    let mut p = pod(
        vec![container("c", json!({"limits": {"cpu": "2"}}))],
        vec![],
    );
    let update = attrs("pods", Some(&OLD));
    assert_eq!(LimitRanger.admit(&update, &mut p, &ranges), Ok(()));
    assert_eq!(LimitRanger.validate(&update, &p, &ranges), Ok(()));
    let elsewhere = Attributes {
        namespace: Some("other"),
        ..attrs("pods", None)
    };
    assert_eq!(LimitRanger.validate(&elsewhere, &p, &ranges), Ok(()));
}
