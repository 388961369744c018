//! `policy/v1` PodDisruptionBudgets and Evictions from protobuf, `meta.k8s.io/v1` DeleteOptions
//! (the body of a DELETE, enveloped under any group-version as client-go sends it, and the options
//! inside an Eviction): what `kubectl create poddisruptionbudget` and `kubectl drain` send. Core
//! `v1` Bindings are decoded with the other core kinds, in `core_storage`.

use super::{int_or_string, label_selector, object_meta, Obj};
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

/// A decoded `policy/v1` PodDisruptionBudget (without `apiVersion`/`kind`; status dropped).
pub(super) fn pod_disruption_budget(p: policy::PodDisruptionBudget) -> Value {
    let spec = p.spec.map(|s| {
        Obj::default()
            .v("minAvailable", int_or_string(s.min_available))
            .v("selector", label_selector(s.selector))
            .v("maxUnavailable", int_or_string(s.max_unavailable))
            .s(
                "unhealthyPodEvictionPolicy",
                s.unhealthy_pod_eviction_policy,
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(p.metadata)))
        .v("spec", spec)
        .done()
}

/// `metav1.DeleteOptions` as JSON (without `apiVersion`/`kind`).
pub(super) fn delete_options(d: meta::DeleteOptions) -> Value {
    let preconditions = d.preconditions.map(|p| {
        Obj::default()
            .s("uid", p.uid)
            .s("resourceVersion", p.resource_version)
            .done()
    });
    Obj::default()
        .i("gracePeriodSeconds", d.grace_period_seconds)
        .v("preconditions", preconditions)
        .b("orphanDependents", d.orphan_dependents)
        .s("propagationPolicy", d.propagation_policy)
        .strs("dryRun", d.dry_run)
        .b_t(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            d.ignore_store_read_error_with_cluster_breaking_potential,
        )
        .done()
}

/// A decoded `policy/v1` Eviction (without `apiVersion`/`kind`).
pub(super) fn eviction(e: policy::Eviction) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(e.metadata)))
        .v("deleteOptions", e.delete_options.map(delete_options))
        .done()
}

#[cfg(test)]
mod tests {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    use prost::Message;
    use serde_json::json;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    #[test]
    fn decodes_pdbs_evictions_and_delete_options() {
        let p = policy::PodDisruptionBudget {
            metadata: Some(meta::ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            }),
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: Some(IntOrString {
                    r#type: Some(1),
                    int_val: Some(0),
                    str_val: Some("50%".into()),
                }),
                selector: Some(meta::LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![],
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope(
                "policy/v1",
                "PodDisruptionBudget",
                p.encode_to_vec()
            )),
            Ok(
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}})
            )
        );
        let opts = meta::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(meta::Preconditions {
                uid: Some("u1".into()),
                resource_version: None,
            }),
            propagation_policy: Some("Foreground".into()),
            dry_run: vec!["All".into()],
            ..Default::default()
        };
        let want_opts = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"},
            "propagationPolicy": "Foreground", "dryRun": ["All"]});
        let mut d = want_opts.clone();
        d["apiVersion"] = json!("v1");
        d["kind"] = json!("DeleteOptions");
        assert_eq!(
            decode_object(&envelope("v1", "DeleteOptions", opts.encode_to_vec())),
            Ok(d)
        );
        let e = policy::Eviction {
            metadata: Some(meta::ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            delete_options: Some(opts),
        };
        let b = k8s_pb::api::core::v1::Binding {
            metadata: Some(meta::ObjectMeta {
                name: Some("web-1".into()),
                ..Default::default()
            }),
            target: Some(k8s_pb::api::core::v1::ObjectReference {
                kind: Some("Node".into()),
                name: Some("n1".into()),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_object(&envelope("v1", "Binding", b.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web-1"},
                "target": {"kind": "Node", "name": "n1"}})
            )
        );
        assert_eq!(
            decode_object(&envelope("policy/v1", "Eviction", e.encode_to_vec())),
            Ok(json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-1", "namespace": "default"},
                "deleteOptions": want_opts}))
        );
    }
}
