//! A custom resource's `*/scale` through admission: the Scale is built through the CRD's
//! `specReplicasPath`, `statusReplicasPath` and `labelSelectorPath`, and a webhook naming
//! `<plural>/scale` in the CRD's group sees `kubectl scale` as an UPDATE of `autoscaling/v1`
//! Scales; through another served version it matches as an equivalent; a mutating webhook's
//! patch of the Scale is applied through `specReplicasPath`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::webhook_server::Hooks;
use super::{hook_on, kubectl, typed};

/// A CRD whose `v1` (stored) and `v1beta1` serve a scale subresource (`.spec.replicas`,
/// `.status.replicas`, and a label selector at `.status.selector`).
fn gizmo_crd() -> CustomResourceDefinition {
    typed(json!({
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "versions": [gizmo_version("v1", true), gizmo_version("v1beta1", false)]
        }
    }))
}

fn gizmo_version(name: &str, storage: bool) -> Value {
    json!({
        "name": name, "served": true, "storage": storage,
        "subresources": {"status": {}, "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"
        }},
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"}, "selector": {"type": "string"}}}
        }}}
    })
}

fn gizmos_in(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "example.com".into(),
        version: version.into(),
        api_version: format!("example.com/{version}"),
        kind: "Gizmo".into(),
        plural: "gizmos".into(),
    };
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// The brief's case: `gizmos/scale`, named in a webhook's rules in the CRD's group. `kubectl
/// scale` is an UPDATE of an `autoscaling/v1` Scale built through the CRD's paths (with the
/// old Scale), refused above 5 with the webhook's message and let through below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_of_a_custom_resource_is_admitted_as_a_scale() {
    let hooks = Hooks::start().await;
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .crd(gizmo_crd())
        .start()
        .await
        .unwrap();
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "gizmo-scale.example.com",
        "scale-max-5",
        "UPDATE",
        "example.com",
        "gizmos/scale",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "gizmo-scale",
            vec![hook],
        )
        .await;
    let gizmos = gizmos_in(&client, "v1");
    let gizmo: DynamicObject = typed(json!({"apiVersion": "example.com/v1",
        "kind": "Gizmo", "metadata": {"name": "x"}, "spec": {"replicas": 1}}));
    gizmos.create(&PostParams::default(), &gizmo).await.unwrap();
    let status = json!({"status": {"replicas": 1, "selector": "app=x"}});
    gizmos
        .patch_status("x", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let gizmo_replicas =
        || async { gizmos.get("x").await.unwrap().data["spec"]["replicas"].as_i64() };

    let (ok, _, err) = kubectl(&sandbox, &["scale", "gizmo/x", "--replicas=9"]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"admission webhook "gizmo-scale.example.com" denied the request: replicas must be at most 5"#),
        "{err}"
    );
    assert_eq!(gizmo_replicas().await, Some(1));
    let refused = hooks.last_call("scale-max-5", "x");
    assert_eq!(refused["request"]["object"]["spec"]["replicas"], 9);

    let (ok, out, err) = kubectl(&sandbox, &["scale", "gizmo/x", "--replicas=3"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(gizmo_replicas().await, Some(3));
    let review = hooks.last_call("scale-max-5", "x");
    let req = &review["request"];
    assert_eq!(req["operation"], "UPDATE");
    assert_eq!(
        req["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "example.com", "version": "v1", "resource": "gizmos"})
    );
    assert_eq!(req["subResource"], "scale");
    assert_eq!(req["name"], "x");
    assert_eq!(req["namespace"], "default");
    let (object, old) = (&req["object"], &req["oldObject"]);
    assert_eq!(object["apiVersion"], "autoscaling/v1");
    assert_eq!(object["kind"], "Scale");
    assert_eq!(object["metadata"]["name"], "x");
    assert_eq!(object["spec"]["replicas"], 3);
    assert_eq!(
        object["status"],
        json!({"replicas": 1, "selector": "app=x"})
    );
    assert_eq!(old["kind"], "Scale");
    assert_eq!(old["spec"]["replicas"], 1);
    assert_eq!(old["status"]["selector"], "app=x");
    assert_eq!(req["options"]["kind"], "UpdateOptions");

    // Through `v1beta1` the rule on `v1` matches as an equivalent (matchPolicy Equivalent):
    // the review names the matched resource and the one requested.
    let patch = json!({"spec": {"replicas": 7}});
    let beta = gizmos_in(&client, "v1beta1")
        .patch_scale("x", &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    match beta {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403);
            assert_eq!(
                e.message,
                r#"admission webhook "gizmo-scale.example.com" denied the request: replicas must be at most 5"#
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(gizmo_replicas().await, Some(3));
    let review = hooks.last_call("scale-max-5", "x");
    let req = &review["request"];
    assert_eq!(req["object"]["spec"]["replicas"], 7);
    assert_eq!(
        req["resource"],
        json!({"group": "example.com", "version": "v1", "resource": "gizmos"})
    );
    assert_eq!(
        req["requestResource"],
        json!({"group": "example.com", "version": "v1beta1", "resource": "gizmos"})
    );
    assert_eq!(req["requestSubResource"], "scale");
    let scale = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
    assert_eq!(req["kind"], scale);
    assert_eq!(req["requestKind"], scale);
}

/// A mutating webhook's JSONPatch on a custom resource's Scale is applied through
/// `specReplicasPath`: asked for 9, the gizmo gets 4, and the answer is the Scale as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhook_changes_a_custom_resources_replicas() {
    let hooks = Hooks::start().await;
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .crd(gizmo_crd())
        .start()
        .await
        .unwrap();
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "gizmo-cap.example.com",
        "scale-cap-4",
        "UPDATE",
        "example.com",
        "gizmos/scale",
    );
    hooks
        .install(
            &client,
            "MutatingWebhookConfiguration",
            "gizmo-cap",
            vec![hook],
        )
        .await;
    let gizmos = gizmos_in(&client, "v1");
    let gizmo: DynamicObject = typed(json!({"apiVersion": "example.com/v1",
        "kind": "Gizmo", "metadata": {"name": "y"}, "spec": {"replicas": 1}}));
    gizmos.create(&PostParams::default(), &gizmo).await.unwrap();
    let patch = json!({"spec": {"replicas": 9}});
    let scale = gizmos
        .patch_scale("y", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(4));
    let stored = gizmos.get("y").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 4);
    let review = hooks.last_call("scale-cap-4", "y");
    assert_eq!(review["request"]["kind"]["kind"], "Scale");
    assert_eq!(review["request"]["object"]["spec"]["replicas"], 9);
}
