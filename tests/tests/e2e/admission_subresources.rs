//! Admission on subresources end to end, as upstream runs it: webhooks of `webhook_server/`
//! and ValidatingAdmissionPolicies see `kubectl scale` as an UPDATE of an `autoscaling/v1` Scale,
//! a bind as a CREATE of a `v1` Binding, `kubectl exec` as a CONNECT with its `PodExecOptions`;
//! and a policy's `authorizer` checks narrowed by `fieldSelector`/`labelSelector`; a custom
//! resource's scale in [`custom_resources`]; evictions in [`eviction`].
//!
//! Configurations are read from the watch cache, so each test waits (bounded) until its
//! configuration takes effect: webhooks through the probe of [`webhook_server::Hooks::install`],
//! policies until the first refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod custom_resources;
mod eviction;

use crate::webhook_server;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use webhook_server::Hooks;

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .start()
        .await
        .unwrap()
}

/// Runs kubectl off the runtime: (success, stdout, stderr).
async fn kubectl(sandbox: &minik8s::Sandbox, args: &[&str]) -> (bool, String, String) {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        k.output(&args)
    })
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A webhook named `name` calling `path` for `operation` of `group` `resource` (`a/b`).
fn hook_on(
    hooks: &Hooks,
    name: &str,
    path: &str,
    operation: &str,
    group: &str,
    resource: &str,
) -> Value {
    let mut hook = hooks.webhook(name, path);
    hook["rules"] = json!([{"operations": [operation], "apiGroups": [group],
        "apiVersions": ["v1"], "resources": [resource]}]);
    hook
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    typed(
        json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
}

async fn create_deployment(client: &kube::Client, name: &str, replicas: i32) -> Api<Deployment> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment(name, replicas))
        .await
        .unwrap();
    deployments
}

/// Creates the pod `name` (one container `c`, unscheduled: no nodes) in `default`.
async fn create_pod(client: &kube::Client, name: &str) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = typed(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods
}

async fn replicas(deployments: &Api<Deployment>, name: &str) -> Option<i32> {
    deployments
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.replicas)
}

/// The brief's first case: a validating webhook on `deployments/scale` refusing more than 5
/// replicas. `kubectl scale` to 3 passes and the webhook saw an UPDATE of Scales; to 6 it is
/// refused with the webhook's message and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_is_an_update_of_a_scale_a_webhook_may_refuse() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "scale-max.example.com",
        "scale-max-5",
        "UPDATE",
        "apps",
        "deployments/scale",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "scale-max",
            vec![hook],
        )
        .await;
    let deployments = create_deployment(&client, "web", 1).await;

    let (ok, out, err) = kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=3"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(replicas(&deployments, "web").await, Some(3));
    let review = hooks.last_call("scale-max-5", "web");
    let req = &review["request"];
    assert_eq!(req["operation"], "UPDATE");
    assert_eq!(
        req["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(req["subResource"], "scale");
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["object"]["kind"], "Scale");
    assert_eq!(req["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(req["object"]["spec"]["replicas"], 3);
    assert_eq!(req["oldObject"]["spec"]["replicas"], 1);
    assert_eq!(req["options"]["kind"], "UpdateOptions");

    let (ok, _, err) = kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=6"]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"admission webhook "scale-max.example.com" denied the request: replicas must be at most 5"#),
        "{err}"
    );
    assert_eq!(replicas(&deployments, "web").await, Some(3));
    // A write of the deployment itself is not a write of its scale.
    let calls = hooks.calls("scale-max-5").len();
    let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(hooks.calls("scale-max-5").len(), calls);
}

/// A mutating webhook's JSONPatch on the Scale takes effect: asked for 9, the deployment gets 4,
/// and the answer is the Scale as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhook_changes_the_scales_replicas() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "scale-cap.example.com",
        "scale-cap-4",
        "UPDATE",
        "apps",
        "deployments/scale",
    );
    hooks
        .install(
            &client,
            "MutatingWebhookConfiguration",
            "scale-cap",
            vec![hook],
        )
        .await;
    let deployments = create_deployment(&client, "capped", 1).await;
    let patch = json!({"spec": {"replicas": 9}});
    let scale = deployments
        .patch_scale("capped", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(4));
    assert_eq!(replicas(&deployments, "capped").await, Some(4));
    // Below the cap the webhook leaves it alone.
    let (ok, out, err) =
        kubectl(&sandbox, &["scale", "deployment", "capped", "--replicas=2"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(replicas(&deployments, "capped").await, Some(2));
    assert_eq!(
        hooks.last_call("scale-cap-4", "capped")["request"]["object"]["spec"]["replicas"],
        2
    );
}

/// `pods/binding` is a CREATE of a `v1` Binding named for the pod: a webhook refuses a binding
/// to a reserved node and lets another through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_pods_binding_sees_the_binding() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "binding.example.com",
        "deny-binding",
        "CREATE",
        "",
        "pods/binding",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "binding",
            vec![hook],
        )
        .await;
    let pods = create_pod(&client, "p").await;
    let bind = |node: &str| {
        let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        let pods = pods.clone();
        async move {
            pods.create_subresource::<Value, Value>("binding", "p", &PostParams::default(), &body)
                .await
        }
    };
    match bind("reserved").await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403);
            assert_eq!(
                e.message,
                r#"admission webhook "binding.example.com" denied the request: node reserved is reserved"#
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        pods.get("p").await.unwrap().spec.and_then(|s| s.node_name),
        None
    );
    bind("n1").await.unwrap();
    assert_eq!(
        pods.get("p").await.unwrap().spec.and_then(|s| s.node_name),
        Some("n1".to_string())
    );
    let review = hooks.last_call("deny-binding", "p");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "Binding"})
    );
    assert_eq!(req["resource"]["resource"], "pods");
    assert_eq!(req["subResource"], "binding");
    assert_eq!(req["object"]["target"]["name"], "n1");
    assert_eq!(req["oldObject"], Value::Null);
    assert_eq!(req["options"]["kind"], "CreateOptions");
}

/// The legacy `bindings` resource is admitted as itself (a CREATE of `bindings`, no
/// subresource), so a webhook on `pods/binding` does not see it, as upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_bindings_resource_is_admitted_as_bindings() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let pod_binding = hook_on(
        &hooks,
        "binding.example.com",
        "deny-binding",
        "CREATE",
        "",
        "pods/binding",
    );
    let legacy = hook_on(
        &hooks,
        "bindings.example.com",
        "seen-bindings",
        "CREATE",
        "",
        "bindings",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "bindings",
            vec![pod_binding, legacy],
        )
        .await;
    let pods = create_pod(&client, "legacy").await;
    let bindings: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Binding".into(),
            plural: "bindings".into(),
        },
    );
    let body: kube::api::DynamicObject = typed(json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "legacy"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "reserved"}}));
    let _ = bindings.create(&PostParams::default(), &body).await;
    tests::eventually("the pod bound through bindings", || async {
        let node = pods.get("legacy").await.ok()?.spec?.node_name?;
        (node == "reserved").then_some(())
    })
    .await;
    assert!(hooks
        .calls("deny-binding")
        .iter()
        .all(|r| r["request"]["name"] != "legacy"));
    let review = hooks.last_call("seen-bindings", "legacy");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "Binding"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "bindings"})
    );
    assert_eq!(req.get("subResource"), None);
}

/// `kubectl exec` is a CONNECT of `pods/exec` whose object is the `PodExecOptions` of its
/// query: a webhook refusing it refuses the exec with its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_refuses_kubectl_exec_as_a_connect() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "exec.example.com",
        "deny-exec",
        "CONNECT",
        "",
        "pods/exec",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "exec",
            vec![hook],
        )
        .await;
    create_pod(&client, "sh").await;
    let (ok, _, err) = kubectl(&sandbox, &["exec", "sh", "--", "ls", "/"]).await;
    assert!(!ok);
    assert!(err.contains("no exec in this cluster"), "{err}");
    let review = hooks.last_call("deny-exec", "sh");
    let req = &review["request"];
    assert_eq!(req["operation"], "CONNECT");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "PodExecOptions"})
    );
    assert_eq!(req["subResource"], "exec");
    assert_eq!(req["object"]["command"], json!(["ls", "/"]));
    assert_eq!(req["object"]["container"], "c");
    assert_eq!(req["object"]["stdout"], true);
    assert_eq!(req["options"], Value::Null);
}

/// A ValidatingAdmissionPolicy on `deployments/scale`: `object` is the Scale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_on_deployments_scale_limits_kubectl_scale() {
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let policy: ValidatingAdmissionPolicy = typed(json!({"metadata": {"name": "scale-limit"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": ["deployments/scale"]}]},
            "validations": [
                {"expression": "object.kind == 'Scale' && oldObject.kind == 'Scale'",
                 "message": "not a Scale"},
                {"expression": "object.spec.replicas <= 5", "message": "replicas must be at most 5"}]}}));
    let binding: ValidatingAdmissionPolicyBinding =
        typed(json!({"metadata": {"name": "scale-limit"},
        "spec": {"policyName": "scale-limit", "validationActions": ["Deny"]}}));
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let deployments = create_deployment(&client, "web", 1).await;
    let err = tests::eventually("the policy to refuse a scale to 6", || async {
        let (ok, _, err) = kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=6"]).await;
        (!ok && err.contains("ValidatingAdmissionPolicy")).then_some(err)
    })
    .await;
    assert!(
        err.contains("ValidatingAdmissionPolicy 'scale-limit' with binding 'scale-limit' denied request: replicas must be at most 5"),
        "{err}"
    );
    assert_eq!(replicas(&deployments, "web").await, Some(1));
    let (ok, out, err) = kubectl(&sandbox, &["scale", "deployment", "web", "--replicas=3"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(replicas(&deployments, "web").await, Some(3));
}

/// `authorizer…fieldSelector(…).labelSelector(…).check('list')` asks RBAC, which ignores the
/// selectors (as upstream's): alice may create a ConfigMap only once she may list pods; a
/// selector that does not parse does not make the check an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_checks_the_authorizer_with_selectors() {
    use minik8s::client::Api as Typed;
    use minik8s::k8s_openapi::api::rbac::v1::{Role, RoleBinding};

    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let admin = sandbox.client();
    let (alice, _) = sandbox.add_user("alice", &["devs"]).unwrap();
    let grant = |name: &'static str, rules: Value| {
        let (roles, bindings) = (
            admin.api::<Role>(Some("default")),
            admin.api::<RoleBinding>(Some("default")),
        );
        async move {
            roles
                .create(&typed(json!({"metadata": {"name": name}, "rules": rules})))
                .await
                .unwrap();
            bindings
                .create(&typed(json!({"metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})))
                .await
                .unwrap();
        }
    };
    grant(
        "configmap-writer",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
    )
    .await;
    let policy: ValidatingAdmissionPolicy = typed(json!({
        "metadata": {"name": "node-pod-listers"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "!authorizer.group('').resource('pods').namespace('default').fieldSelector('not a selector').labelSelector('a in (b').check('list').errored()",
                 "message": "a selector that does not parse is no error"},
                {"expression": "authorizer.group('').resource('pods').namespace('default').fieldSelector('spec.nodeName=' + object.metadata.name).labelSelector('app=web').check('list').allowed()",
                 "messageExpression": "'only those who may list the pods of node ' + object.metadata.name + ' may create its configmap'"},
            ],
        }
    }));
    let binding: ValidatingAdmissionPolicyBinding = typed(json!({
        "metadata": {"name": "node-pod-listers"},
        "spec": {"policyName": "node-pod-listers", "validationActions": ["Deny"]}
    }));
    admin
        .api::<ValidatingAdmissionPolicy>(None)
        .create(&policy)
        .await
        .unwrap();
    admin
        .api::<ValidatingAdmissionPolicyBinding>(None)
        .create(&binding)
        .await
        .unwrap();
    let configmap = |name: &str| -> ConfigMap { typed(json!({"metadata": {"name": name}})) };
    let as_alice: Typed<ConfigMap> = alice.api(Some("default"));
    let mut n = 0;
    let refused = tests::eventually("the policy refuses alice", || {
        n += 1;
        let (as_alice, cm) = (as_alice.clone(), configmap(&format!("n{n}")));
        async move {
            let e = as_alice.create(&cm).await.err()?;
            e.api_message()
                .contains("ValidatingAdmissionPolicy")
                .then_some(e)
        }
    })
    .await;
    assert_eq!(refused.code(), Some(422));
    let message = refused.api_message();
    assert!(
        message.ends_with(&format!("denied request: only those who may list the pods of node n{n} may create its configmap")),
        "{message}"
    );
    // The admin may list pods; alice too once a Role lets her, whatever the selectors.
    admin
        .api::<ConfigMap>(Some("default"))
        .create(&configmap("by-admin"))
        .await
        .unwrap();
    grant(
        "pod-lister",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
    )
    .await;
    tests::eventually("alice's configmap created", || {
        let as_alice = as_alice.clone();
        async move { as_alice.create(&configmap("by-alice")).await.ok() }
    })
    .await;
}
