//! ValidatingAdmissionPolicy end to end: the Gateway API's `safe-upgrades` policy applied with the
//! real kubectl against the very CRDs it guards, and policies driven from Rust with kube-rs (as a
//! controller author's test suite does): params from ConfigMaps by name and by selector, missing
//! params under `Deny` and `Allow`, `Warn` and `Audit` actions (kubectl prints the warning),
//! `messageExpression`, `variables`, a policy that does not compile, and the type check written
//! to the policy's status.
//!
//! The apiserver follows policies and bindings in its watch cache, so a new policy takes effect
//! shortly after it is written: each step waits (bounded) for the first refusal it expects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

/// The Gateway API bundle of the shared folder (`/work/shared`, two or three levels above the
/// checkout's `tests/` depending on the worktree).
fn gateway_api_dir() -> PathBuf {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    ["../../shared", "../../../shared"]
        .iter()
        .map(|up| base.join(up).join("crds/gateway-api"))
        .find(|p| p.is_dir())
        .expect("the shared Gateway API CRDs")
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

const SECOND_RULE: &str = "Installing CRDs with version before v1.5.0 is prohibited by default. Uninstall ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install older versions.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_safe_upgrades_refuses_its_own_crds_until_deleted() {
    let sandbox = sandbox().await;
    let dir = gateway_api_dir();
    let policy = dir.join("gateway.networking.k8s.io_vap_safeupgrades.yaml");
    let (ok, _, err) = kubectl(&sandbox, &["apply", "-f", policy.to_str().unwrap()]).await;
    assert!(ok, "{err}");
    let crd = |name: &str| {
        dir.join(format!("gateway.networking.k8s.io_{name}.yaml"))
            .to_string_lossy()
            .into_owned()
    };
    // Refused once the apiserver follows the policy (a dry run probes without writing).
    let gatewayclasses = crd("gatewayclasses");
    let err = tests::eventually("the policy to refuse", || async {
        let (ok, _, err) = kubectl(
            &sandbox,
            &["apply", "--dry-run=server", "-f", &gatewayclasses],
        )
        .await;
        (!ok).then_some(err)
    })
    .await;
    assert!(err.contains(SECOND_RULE), "{err}");
    // Every CRD of the bundle is refused with the policy's message (its version is v0.0.0-dev).
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains("vap_"))
        .collect();
    assert!(files.len() >= 5);
    for f in &files {
        let (ok, _, err) = kubectl(&sandbox, &["apply", "-f", f.to_str().unwrap()]).await;
        assert!(!ok, "{f:?} was let in");
        assert!(
            err.contains("ValidatingAdmissionPolicy 'safe-upgrades.gateway.networking.k8s.io' with binding 'safe-upgrades.gateway.networking.k8s.io' denied request: ")
                && err.contains(SECOND_RULE),
            "{f:?}: {err}"
        );
    }
    // A CRD of another group is not its business.
    let other = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), other.to_string()).unwrap();
    let (ok, _, err) = kubectl(&sandbox, &["apply", "-f", file.path().to_str().unwrap()]).await;
    assert!(ok, "{err}");

    // Deleting the policy lets them in (the binding alone does nothing).
    let (ok, _, err) = kubectl(
        &sandbox,
        &[
            "delete",
            "validatingadmissionpolicy",
            "safe-upgrades.gateway.networking.k8s.io",
        ],
    )
    .await;
    assert!(ok, "{err}");
    tests::eventually("the policy to be gone", || async {
        let (ok, _, _) = kubectl(
            &sandbox,
            &["apply", "--dry-run=server", "-f", &gatewayclasses],
        )
        .await;
        ok.then_some(())
    })
    .await;
    for f in &files {
        let (ok, _, err) = kubectl(&sandbox, &["apply", "-f", f.to_str().unwrap()]).await;
        assert!(ok, "{f:?}: {err}");
    }
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The API error of a refused request: (code, message).
fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    typed(
        json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

async fn labelled_namespace(client: &kube::Client, name: &str, team: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &typed(json!({"metadata": {"name": name, "labels": {"team": team}}})),
    )
    .await
    .unwrap();
}

/// The kube-rs example for controller authors: a params-driven policy installed from Rust.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_params_by_name_and_selector_with_missing_params() {
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    labelled_namespace(&client, "team-a", "a").await;
    labelled_namespace(&client, "team-b", "b").await;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "replica-limit"}, "spec": {
                "failurePolicy": "Fail",
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                    "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["deployments"]}]},
                "validations": [{
                    "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                    "messageExpression": "'replicas must be at most ' + params.data.maxReplicas"}]}})),
        )
        .await
        .unwrap();
    let binding = |name: &str, team: &str, param_ref: Value| -> ValidatingAdmissionPolicyBinding {
        typed(
            json!({"metadata": {"name": name}, "spec": {"policyName": "replica-limit",
            "validationActions": ["Deny"], "paramRef": param_ref,
            "matchResources": {"namespaceSelector": {"matchLabels": {"team": team}}}}}),
        )
    };
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "by-name",
                "a",
                json!({"name": "limits", "parameterNotFoundAction": "Deny"}),
            ),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "by-selector",
                "b",
                json!({"selector": {"matchLabels": {"limit": "yes"}},
                    "parameterNotFoundAction": "Allow"}),
            ),
        )
        .await
        .unwrap();

    // By name, missing, Deny: refused with upstream's configuration error.
    let team_a: Api<Deployment> = Api::namespaced(client.clone(), "team-a");
    let refused = tests::eventually("the binding to refuse without params", || async {
        team_a.create(&dry_run(), &deployment("web", 1)).await.err()
    })
    .await;
    assert_eq!(
        refusal::<()>(Err(refused)),
        (422, "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'by-name' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into())
    );
    // By selector, none found, Allow: let in.
    let team_b: Api<Deployment> = Api::namespaced(client.clone(), "team-b");
    team_b
        .create(&dry_run(), &deployment("web", 9))
        .await
        .unwrap();

    // The params appear: each binding checks against them.
    let cm = |name: &str, max: &str, labels: Value| -> ConfigMap {
        typed(json!({"metadata": {"name": name, "labels": labels}, "data": {"maxReplicas": max}}))
    };
    Api::<ConfigMap>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &cm("limits", "3", json!({})))
        .await
        .unwrap();
    let cms_b: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    for (name, max) in [("loose", "8"), ("strict", "2")] {
        cms_b
            .create(
                &PostParams::default(),
                &cm(name, max, json!({"limit": "yes"})),
            )
            .await
            .unwrap();
    }
    cms_b
        .create(&PostParams::default(), &cm("unlabelled", "0", json!({})))
        .await
        .unwrap();
    team_a
        .create(&PostParams::default(), &deployment("small", 3))
        .await
        .unwrap();
    assert_eq!(
        refusal(team_a.create(&dry_run(), &deployment("big", 4)).await),
        (422, "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'by-name' denied request: replicas must be at most 3".into())
    );
    // Every selected param must allow it: the strict one refuses 5, the unlabelled one is not
    // selected.
    assert_eq!(
        refusal(team_b.create(&dry_run(), &deployment("mid", 5)).await),
        (422, "deployments.apps \"mid\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'by-selector' denied request: replicas must be at most 2".into())
    );
    team_b
        .create(&dry_run(), &deployment("tiny", 2))
        .await
        .unwrap();
    // Deleting the binding ends its checks.
    bindings
        .delete("by-name", &DeleteParams::default())
        .await
        .unwrap();
    tests::eventually("the binding to be gone", || async {
        team_a.create(&dry_run(), &deployment("big", 4)).await.ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_messages_variables_and_type_checks() {
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let install = |name: &str, spec: Value, actions: Value| {
        let (policies, bindings) = (policies.clone(), bindings.clone());
        let name = name.to_string();
        async move {
            policies
                .create(
                    &PostParams::default(),
                    &typed(json!({"metadata": {"name": name}, "spec": spec})),
                )
                .await
                .unwrap();
            bindings
                .create(
                    &PostParams::default(),
                    &typed(
                        json!({"metadata": {"name": name}, "spec": {"policyName": name,
                        "validationActions": actions}}),
                    ),
                )
                .await
                .unwrap();
        }
    };
    let rules = |resource: &str| {
        json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": [resource]}]})
    };

    // Variables and messageExpression; Deny.
    install(
        "name-length",
        json!({"matchConstraints": rules("secrets"),
            "variables": [{"name": "name", "expression": "object.metadata.name"},
                {"name": "tooLong", "expression": "variables.name.size() > 10"}],
            "validations": [{"expression": "!variables.tooLong",
                "messageExpression": "'name ' + variables.name + ' is longer than 10'",
                "reason": "Forbidden"}]}),
        json!(["Deny"]),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let long: Secret = typed(json!({"metadata": {"name": "a-very-long-name"}}));
    let refused = tests::eventually("name-length to refuse", || async {
        secrets.create(&dry_run(), &long).await.err()
    })
    .await;
    assert_eq!(
        refusal::<()>(Err(refused)),
        (403, "secrets \"a-very-long-name\" is forbidden: ValidatingAdmissionPolicy 'name-length' with binding 'name-length' denied request: name a-very-long-name is longer than 10".into())
    );
    secrets
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "short"}})),
        )
        .await
        .unwrap();

    // Warn and Audit: let in, and kubectl prints the warning.
    install(
        "owner-label",
        json!({"matchConstraints": rules("configmaps"),
            "validations": [{"expression":
                "has(object.metadata.labels) && 'owner' in object.metadata.labels",
                "message": "configmaps need an owner label"}]}),
        json!(["Warn", "Audit"]),
    )
    .await;
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'owner-label' with binding 'owner-label': configmaps need an owner label";
    let mut n = 0;
    let stderr = tests::eventually("owner-label to warn", || {
        n += 1;
        let name = format!("unowned-{n}");
        let sandbox = &sandbox;
        async move {
            let (ok, _, err) = kubectl(
                sandbox,
                &["create", "configmap", &name, "--from-literal=a=b"],
            )
            .await;
            assert!(ok, "{err}");
            err.contains(warning).then_some(err)
        }
    })
    .await;
    assert!(stderr.contains(warning), "{stderr}");
    let (ok, _, err) = kubectl(
        &sandbox,
        &[
            "create",
            "configmap",
            "owned",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "name",
        ],
    )
    .await;
    assert!(ok, "{err}");

    // An expression that does not compile, under Fail: every matching request is refused.
    install(
        "broken",
        json!({"failurePolicy": "Fail", "matchConstraints": rules("serviceaccounts"),
            "validations": [{"expression": "object.metadata.name ==", "message": "unused"}]}),
        json!(["Deny"]),
    )
    .await;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "default");
    let refused = tests::eventually("broken to refuse", || async {
        accounts
            .create(&dry_run(), &typed(json!({"metadata": {"name": "sa"}})))
            .await
            .err()
    })
    .await;
    let (code, message) = refusal::<()>(Err(refused));
    assert_eq!(code, 422);
    assert!(
        message.starts_with("serviceaccounts \"sa\" is forbidden: ValidatingAdmissionPolicy 'broken' with binding 'broken' denied request: compilation error: compilation failed: ERROR: <input>:1:"),
        "{message}"
    );

    // Type checking: a field Deployments do not have is reported in the policy's status.
    policies
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "typo"}, "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                    "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["deployments"]}]},
                "validations": [
                    {"expression": "object.spec.replicas > 0"},
                    {"expression": "object.spec.replica > 1",
                     "messageExpression": "'replicas: ' + string(object.spec.replicas)"}]}})),
        )
        .await
        .unwrap();
    let status = tests::eventually("typo's status", || async {
        let p = policies.get("typo").await.unwrap();
        p.status.filter(|s| s.observed_generation == Some(1))
    })
    .await;
    let warnings = status
        .type_checking
        .and_then(|t| t.expression_warnings)
        .unwrap_or_default();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].field_ref, "spec.validations[1].expression");
    assert!(
        warnings[0].warning.starts_with(
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'"
        ),
        "{}",
        warnings[0].warning
    );
}

/// The `authorizer` variable asks the server's own authorizer (RBAC here) about the requesting
/// user: a policy lets a user create ConfigMaps in `default` only if they may also list its
/// Secrets; alice is refused until a Role lets her, the admin (`system:masters`) never is, and
/// `authorizer.requestResource` is the request's own resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorizer_variable_asks_rbac_about_the_requesting_user() {
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
    let roles: Typed<Role> = admin.api(Some("default"));
    let bindings: Typed<RoleBinding> = admin.api(Some("default"));
    let grant = |name: &'static str, rules: Value| {
        let (roles, bindings) = (roles.clone(), bindings.clone());
        async move {
            let role: Role =
                serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules}))
                    .unwrap();
            roles.create(&role).await.unwrap();
            let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}))
        .unwrap();
            bindings.create(&binding).await.unwrap();
        }
    };
    grant(
        "configmap-writer",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
    )
    .await;
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": "secrets-readers-only"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "authorizer.requestResource.check('create').allowed()",
                 "message": "the request's own resource"},
                {"expression": "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('list').allowed()",
                 "messageExpression": "'only readers of the secrets of ' + object.metadata.namespace + ' may create configmaps'"},
            ],
        }
    }))
    .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "secrets-readers-only"},
        "spec": {"policyName": "secrets-readers-only", "validationActions": ["Deny"]}
    }))
    .unwrap();
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
    let configmap = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    let as_alice: Typed<ConfigMap> = alice.api(Some("default"));
    let mut n = 0;
    let refused = tests::eventually("the policy refuses alice", || {
        n += 1;
        let (as_alice, cm) = (as_alice.clone(), configmap(&format!("a{n}")));
        async move {
            let e = as_alice.create(&cm).await.err()?;
            e.api_message()
                .contains("ValidatingAdmissionPolicy")
                .then_some(e)
        }
    })
    .await;
    assert_eq!(refused.code(), Some(422));
    assert!(
        refused.api_message().ends_with("is forbidden: ValidatingAdmissionPolicy 'secrets-readers-only' with binding 'secrets-readers-only' denied request: only readers of the secrets of default may create configmaps"),
        "{}",
        refused.api_message()
    );
    // The admin may list secrets everywhere.
    admin
        .api::<ConfigMap>(Some("default"))
        .create(&configmap("by-admin"))
        .await
        .unwrap();
    // Once alice may list secrets, the same request passes.
    grant(
        "secret-lister",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]),
    )
    .await;
    tests::eventually("alice's configmap created", || {
        let as_alice = as_alice.clone();
        async move { as_alice.create(&configmap("by-alice")).await.ok() }
    })
    .await;
}
