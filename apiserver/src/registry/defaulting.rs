//! The defaults of objects read from storage, by storage key: the registry's side of the watch
//! cache's [`StorageDefaults`] (see `watch_cache/defaults.rs` for where they are applied).
//!
//! Upstream decodes a stored object with the codec of the version it is stored in and runs the
//! scheme's defaulter on it; a custom resource's codec applies the structural schema of the
//! object's own version. Here the object's stored `apiVersion` and `kind` choose, among the
//! resources served from its storage segment, the endpoint whose form it is in (the same test
//! as [`Resource::is_presentable`]), and that endpoint's [`Strategy::default_decoded`] applies;
//! an object without type meta takes the first resource registered for its segment (the
//! preferred version). An object the defaults change is put back into Go field order.
//!
//! Cost: one look-up in the served set and, for kinds with defaults, the defaults themselves and
//! two walks counting the object's fields (no copy); kinds without defaults cost the look-up
//! only.
//!
//! [`Strategy::default_decoded`]: super::Strategy::default_decoded

use std::sync::Arc;

use serde_json::Value;

use super::resources::{Resource, Served};
use super::ResourceRegistry;
use crate::watch_cache::{resource_prefix, SelectorView, StorageDefaults, REGISTRY_ROOT};

/// The resource whose storage form `obj`, stored under the segment `storage`, is in.
fn resource_of<'s>(served: &'s Served, storage: &str, obj: &Value) -> Option<&'s Arc<Resource>> {
    let text = |k: &str| obj.get(k).and_then(Value::as_str);
    let mut of_segment = served
        .resources
        .iter()
        .filter(|r| r.info.storage == storage);
    match (text("apiVersion"), text("kind")) {
        (Some(api_version), Some(kind)) => {
            of_segment.find(|r| r.info.kind == kind && r.info.is_api_version(api_version))
        }
        _ => of_segment.next(),
    }
}

impl StorageDefaults for ResourceRegistry {
    fn default_stored(&self, key: &str, obj: &mut Value) -> bool {
        let Some(storage) = storage_segment(key) else {
            return false;
        };
        let served = self.snapshot();
        let Some(resource) = resource_of(&served, storage, obj) else {
            return false;
        };
        if !resource.strategy.default_decoded(obj) {
            return false;
        }
        resource.canonicalize(obj);
        true
    }

    fn selector_view(&self, key: &str, obj: &Value) -> Option<SelectorView> {
        let storage = storage_segment(key)?;
        let served = self.snapshot();
        let resource = resource_of(&served, storage, obj)?;
        let text = |field: &str| obj.get(field).and_then(Value::as_str).unwrap_or("");
        // Type meta too: a list writes a held object's text as it is when its kind and version
        // are the endpoint's.
        SelectorView::new(
            text("apiVersion"),
            text("kind"),
            api::meta::name(obj).unwrap_or(""),
            api::meta::namespace(obj).unwrap_or(""),
            &api::meta::labels(obj),
            resource.strategy.field_labels().unwrap_or_default(),
            |f| resource.strategy.field_value(obj, f).unwrap_or_default(),
        )
    }
}

/// `<storage>` of a key `/registry/<storage>/...`.
fn storage_segment(key: &str) -> Option<&str> {
    resource_prefix(key)
        .and_then(|p| p.strip_prefix(REGISTRY_ROOT))
        .and_then(|p| p.strip_suffix('/'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::ClusterIpAllocator;

    fn registry() -> ResourceRegistry {
        let registry = ResourceRegistry::new();
        let ips = Arc::new(ClusterIpAllocator::new());
        crate::registry::builtin::register(&registry, &ips).unwrap();
        registry
    }

    #[test]
    fn a_pods_selector_view_answers_every_field_label_and_labels_as_the_pod() {
        let registry = registry();
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7",
                         "labels": {"app": "a", "tier": "web"}, "annotations": {"x": "y"}},
            "spec": {"nodeName": "n1", "restartPolicy": "Never", "schedulerName": "s",
                     "serviceAccountName": "sa", "hostNetwork": true,
                     "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "nominatedNodeName": "n2", "podIP": "10.0.0.1",
                       "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                       "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let key = "/registry/pods/ns/p";
        let view = registry.selector_view(key, &pod).expect("pods have a view");
        let served = registry.snapshot();
        let pods = resource_of(&served, "pods", &pod).expect("pods are served");
        // Upstream's pod field labels (`AddFieldLabelConversionsForPod`), named here
        // independently of the strategy's list.
        for field in [
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.nominatedNodeName",
            "status.podIP",
            "status.podIPs",
        ] {
            let whole = pods.field_value(&pod, field);
            assert!(
                whole.as_deref().is_some_and(|v| !v.is_empty()),
                "{field}: {whole:?}"
            );
            assert_eq!(view.field(field), whole.as_deref(), "{field}");
        }
        assert_eq!(view.field("spec.containers"), None, "not a field label");
        assert_eq!((view.api_version(), view.kind()), ("v1", "Pod"));
        for (k, v) in api::meta::labels(&pod) {
            assert_eq!(view.label(&k), Some(v.as_str()), "{k}");
        }
        assert_eq!(view.label("x"), None, "annotations are not labels");
        // A kind that lists no fields of its own: name, namespace and labels.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
                        "data": {"k": "v"}});
        let view = registry
            .selector_view("/registry/configmaps/ns/c", &cm)
            .expect("config maps have a view");
        assert_eq!((view.api_version(), view.kind()), ("v1", "ConfigMap"));
        assert_eq!(view.field("metadata.name"), Some("c"));
        assert_eq!(view.field("metadata.namespace"), Some("ns"));
        assert_eq!(view.label("a"), Some("b"));
        assert_eq!(view.field("data.k"), None);
    }

    #[test]
    fn a_bare_pod_reads_with_the_schemes_defaults_in_go_order() {
        let registry = registry();
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bare", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"volumes": [{"name": "scratch"}],
                     "containers": [{"name": "c", "image": "busybox"}]}
        });
        assert!(registry.default_stored("/registry/pods/ns/bare", &mut pod));
        let spec = &pod["spec"];
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(
            spec["containers"][0]["terminationMessagePath"],
            "/dev/termination-log"
        );
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(pod["metadata"]["resourceVersion"], "7", "kept");
        assert!(
            pod.get("status").is_none(),
            "defaults only: no status reset"
        );
        let keys: Vec<&str> = spec
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.first(), Some(&"volumes"), "Go order: {keys:?}");
        assert!(
            !registry.default_stored("/registry/pods/ns/bare", &mut pod),
            "an object already defaulted is left alone"
        );
    }

    #[test]
    fn objects_are_defaulted_in_the_form_they_are_stored_in() {
        let registry = registry();
        // A stored Service gets `SetDefaults_Service`, not the allocator's IP families.
        let mut svc = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"ports": [{"port": 80}], "clusterIP": "10.0.0.5"}});
        assert!(registry.default_stored("/registry/services/ns/s", &mut svc));
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert!(svc["spec"].get("ipFamilies").is_none());
        // An HPA is stored in the v2 form: `v2/defaults.go` applies (whichever version reads it).
        let mut hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3}});
        assert!(registry.default_stored("/registry/horizontalpodautoscalers/ns/h", &mut hpa));
        assert_eq!(hpa["spec"]["minReplicas"], 1, "{hpa}");
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80,
            "{hpa}"
        );
        // Status defaults of kinds whose status is a value in Go.
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}});
        assert!(registry.default_stored("/registry/namespaces/n", &mut ns));
        assert_eq!(ns["status"]["phase"], "Active", "{ns}");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "n",
            "{ns}"
        );
        let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"capacity": {"cpu": "2", "pods": "110"}}});
        assert!(registry.default_stored("/registry/nodes/n", &mut node));
        assert_eq!(
            node["status"]["allocatable"], node["status"]["capacity"],
            "{node}"
        );
        // Kinds without defaults, unknown segments and keys outside the registry: unchanged.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        for key in [
            "/registry/configmaps/ns/c",
            "/registry/nothing/ns/c",
            "/elsewhere",
        ] {
            let mut v = cm.clone();
            assert!(!registry.default_stored(key, &mut v), "{key}");
            assert_eq!(v, cm);
        }
    }
}
