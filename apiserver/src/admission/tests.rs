//! The built-in plugins against fixed objects, with upstream's cases and messages
//! (`serviceaccount/admission_test.go`, `limitranger/admission_test.go`,
//! `defaulttolerationseconds/admission_test.go`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::registry::{Forbidden, Objects};

/// Objects by (plural, namespace, name).
#[derive(Default)]
struct Fixture(Vec<(&'static str, Value)>);

impl Fixture {
    fn with(mut self, plural: &'static str, obj: Value) -> Self {
        self.0.push((plural, obj));
        self
    }
}

impl Objects for Fixture {
    fn list(&self, _group: &str, plural: &str) -> Vec<Arc<Value>> {
        let mut all: Vec<_> = self.0.iter().filter(|(p, _)| *p == plural).collect();
        all.sort_by_key(|(_, o)| api::meta::name(o).map(String::from));
        all.into_iter().map(|(_, o)| Arc::new(o.clone())).collect()
    }

    fn get(&self, _group: &str, plural: &str, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.0
            .iter()
            .find(|(p, o)| {
                *p == plural && api::meta::name(o) == Some(name) && api::meta::namespace(o) == ns
            })
            .map(|(_, o)| Arc::new(o.clone()))
    }
}

fn create_pod() -> Attributes<'static> {
    Attributes {
        operation: Operation::Create,
        group: "",
        resource: "pods",
        namespace: Some("ns"),
        old: None,
        subresource: "",
        warnings: None,
        audit: None,
        user: None,
        authorizes: false,
    }
}

fn pod(spec: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": {"phase": "Pending", "qosClass": "BestEffort"}})
}

fn account(name: &str, extra: Value) -> Value {
    let mut sa = json!({"metadata": {"name": name, "namespace": "ns"}});
    if let (Some(sa), Some(extra)) = (sa.as_object_mut(), extra.as_object()) {
        sa.extend(extra.clone());
    }
    sa
}

fn fixed_name(prefix: &str) -> String {
    format!("{prefix}abcde")
}

/// Both phases of `plugin`, as the chain runs them.
fn run(
    plugin: &dyn Plugin,
    attrs: &Attributes<'_>,
    obj: &mut Value,
    objects: &Fixture,
) -> Result<(), Forbidden> {
    plugin.admit(attrs, obj, objects)?;
    plugin.validate(attrs, obj, objects)
}

// ---- ServiceAccount ----

#[test]
fn service_account_defaults_to_default_and_mounts_the_token_volume() {
    let objects = Fixture::default().with("serviceaccounts", account("default", json!({})));
    let sa = ServiceAccount::with_names(fixed_name);
    let mut p = pod(json!({
        "initContainers": [{"name": "init", "image": "i"}],
        "containers": [{"name": "c", "image": "i"}, {"name": "own", "image": "i",
            "volumeMounts": [{"name": "x", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]}],
    }));
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    assert_eq!(p["spec"]["serviceAccount"], "default");
    let mount = json!({"name": "kube-api-access-abcde", "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});
    assert_eq!(
        p["spec"]["initContainers"][0]["volumeMounts"],
        json!([mount])
    );
    assert_eq!(p["spec"]["containers"][0]["volumeMounts"], json!([mount]));
    // A container with its own mount at the path keeps it.
    assert_eq!(
        p["spec"]["containers"][1]["volumeMounts"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(
        p["spec"]["volumes"],
        json!([{"name": "kube-api-access-abcde", "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
            "defaultMode": 420,
        }}])
    );
}

#[test]
fn service_account_generated_volume_names_are_random() {
    let objects = Fixture::default().with("serviceaccounts", account("default", json!({})));
    let sa = ServiceAccount::new(DEFAULT_SERVICE_ACCOUNT_WAIT);
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(sa.admit(&create_pod(), &mut p, &objects), Ok(()));
    let name = p["spec"]["volumes"][0]["name"].as_str().unwrap_or("");
    assert!(
        name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5,
        "{name}"
    );
}

#[test]
fn service_account_reuses_an_existing_token_volume() {
    let objects = Fixture::default().with("serviceaccounts", account("default", json!({})));
    let sa = ServiceAccount::with_names(fixed_name);
    let mut p = pod(json!({
        "containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": "kube-api-access-zzzzz", "projected": token_volume_for_tests()}],
    }));
    assert_eq!(sa.admit(&create_pod(), &mut p, &objects), Ok(()));
    assert_eq!(p["spec"]["volumes"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        p["spec"]["containers"][0]["volumeMounts"][0]["name"],
        "kube-api-access-zzzzz"
    );
}

fn token_volume_for_tests() -> Value {
    service_account::token_volume_source()
}

#[test]
fn service_account_automount_false_on_the_pod_or_the_account() {
    let sa = ServiceAccount::with_names(fixed_name);
    // The pod's choice wins over the account's.
    let objects = Fixture::default()
        .with(
            "serviceaccounts",
            account("default", json!({"automountServiceAccountToken": false})),
        )
        .with("serviceaccounts", account("builder", json!({})));
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert!(p["spec"].get("volumes").is_none(), "{p}");
    let mut p = pod(
        json!({"automountServiceAccountToken": true, "containers": [{"name": "c", "image": "i"}]}),
    );
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert!(p["spec"]["volumes"].is_array(), "{p}");
    let mut p = pod(
        json!({"serviceAccountName": "builder", "automountServiceAccountToken": false,
                           "containers": [{"name": "c", "image": "i"}]}),
    );
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert!(p["spec"].get("volumes").is_none(), "{p}");
}

#[test]
fn service_account_missing_is_refused_with_upstreams_message() {
    let sa = ServiceAccount::with_names(fixed_name);
    let mut p =
        pod(json!({"serviceAccountName": "builder", "containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(
        run(&sa, &create_pod(), &mut p, &Fixture::default()),
        Err(Forbidden(
            "error looking up service account ns/builder: serviceaccount \"builder\" not found"
                .into()
        ))
    );
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(
        run(&sa, &create_pod(), &mut p, &Fixture::default()),
        Err(Forbidden(
            "error looking up service account ns/default: serviceaccount \"default\" not found"
                .into()
        ))
    );
}

#[test]
fn service_account_copies_the_accounts_pull_secrets_to_a_pod_without_any() {
    let sa = ServiceAccount::with_names(fixed_name);
    let objects = Fixture::default().with(
        "serviceaccounts",
        account("default", json!({"imagePullSecrets": [{"name": "reg"}]})),
    );
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "reg"}]));
    let mut p = pod(
        json!({"imagePullSecrets": [{"name": "mine"}], "containers": [{"name": "c", "image": "i"}]}),
    );
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
    assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));
}

#[test]
fn service_account_mirror_pods_are_left_alone_and_limited() {
    let sa = ServiceAccount::with_names(fixed_name);
    let mirror = |spec: Value| {
        let mut p = pod(spec);
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        p
    };
    let mut p = mirror(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert_eq!(run(&sa, &create_pod(), &mut p, &Fixture::default()), Ok(()));
    assert!(p["spec"].get("serviceAccountName").is_none());
    assert!(p["spec"].get("volumes").is_none());
    let cases = [
        (
            json!({"serviceAccountName": "default", "containers": []}),
            "a mirror pod may not reference service accounts",
        ),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "s"}}], "containers": []}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}], "containers": []}),
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ];
    for (spec, want) in cases {
        let mut p = mirror(spec);
        assert_eq!(
            run(&sa, &create_pod(), &mut p, &Fixture::default()),
            Err(Forbidden(want.into()))
        );
    }
}

#[test]
fn service_account_enforces_mountable_secrets_when_annotated() {
    let sa = ServiceAccount::with_names(fixed_name);
    let objects = Fixture::default().with(
        "serviceaccounts",
        account("default", json!({
            "metadata": {"name": "default", "namespace": "ns", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
            "secrets": [{"name": "ok"}],
            "imagePullSecrets": [{"name": "reg"}],
        })),
    );
    let cases = [
        (json!({"volumes": [{"name": "v", "secret": {"secretName": "other"}}], "containers": [{"name": "c"}]}),
         "volume with secret.secretName=\"other\" is not allowed because service account default does not reference that secret"),
        (json!({"containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]}),
         "container c with envVar E referencing secret.secretName=\"other\" is not allowed because service account default does not reference that secret"),
        (json!({"initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "other"}}]}], "containers": [{"name": "c"}]}),
         "init container i with envFrom referencing secret.secretName=\"other\" is not allowed because service account default does not reference that secret"),
        (json!({"imagePullSecrets": [{"name": "reg"}, {"name": "other"}], "containers": [{"name": "c"}]}),
         "imagePullSecrets[1].name=\"other\" is not allowed because service account default does not reference that imagePullSecret"),
    ];
    for (spec, want) in cases {
        let mut p = pod(spec);
        assert_eq!(
            run(&sa, &create_pod(), &mut p, &objects),
            Err(Forbidden(want.into()))
        );
    }
    let mut p = pod(
        json!({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}], "containers": [{"name": "c"}]}),
    );
    assert_eq!(run(&sa, &create_pod(), &mut p, &objects), Ok(()));
}

#[test]
fn service_account_waits_only_for_the_default_account_of_non_mirror_pod_creates() {
    let sa = ServiceAccount::new(DEFAULT_SERVICE_ACCOUNT_WAIT);
    let p = pod(json!({"containers": []}));
    let awaited = sa.awaited(&create_pod(), &p);
    assert_eq!(
        awaited.map(|a| (a.resource, a.namespace, a.name)),
        Some(("serviceaccounts", "ns".into(), "default".into()))
    );
    let named = pod(json!({"serviceAccountName": "builder", "containers": []}));
    assert_eq!(sa.awaited(&create_pod(), &named), None);
    let update = Attributes {
        operation: Operation::Update,
        old: Some(&p),
        ..create_pod()
    };
    assert_eq!(sa.awaited(&update, &p), None);
    // Updates are not this plugin's: nothing is defaulted or looked up.
    let mut q = p.clone();
    assert_eq!(run(&sa, &update, &mut q, &Fixture::default()), Ok(()));
    assert_eq!(q, p);
}

// ---- DefaultTolerationSeconds ----

fn toleration(key: &str, seconds: i64) -> Value {
    json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
}

#[test]
fn default_toleration_seconds_adds_both_tolerations_unless_tolerated() {
    let plugin = DefaultTolerationSeconds::new(300, 300);
    let not_ready = "node.kubernetes.io/not-ready";
    let unreachable = "node.kubernetes.io/unreachable";
    let admit = |tolerations: Value| {
        let mut p = pod(json!({"containers": [], "tolerations": tolerations}));
        let done = plugin.admit(&create_pod(), &mut p, &Fixture::default());
        assert_eq!(done, Ok(()));
        p["spec"]["tolerations"].clone()
    };
    assert_eq!(
        admit(Value::Null),
        json!([toleration(not_ready, 300), toleration(unreachable, 300)])
    );
    let other = json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"});
    assert_eq!(
        admit(json!([other])),
        json!([
            other,
            toleration(not_ready, 300),
            toleration(unreachable, 300)
        ])
    );
    // Tolerating one already: only the other is added.
    let own = json!({"key": not_ready, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60});
    assert_eq!(
        admit(json!([own])),
        json!([own, toleration(unreachable, 300)])
    );
    // An empty key or effect tolerates both.
    let all = json!({"operator": "Exists"});
    assert_eq!(admit(json!([all])), json!([all]));
    let any_effect = json!({"key": unreachable, "operator": "Exists"});
    assert_eq!(
        admit(json!([any_effect])),
        json!([any_effect, toleration(not_ready, 300)])
    );
    // A NoSchedule toleration of the taint does not count.
    let no_schedule = json!({"key": unreachable, "operator": "Exists", "effect": "NoSchedule"});
    assert_eq!(
        admit(json!([no_schedule])),
        json!([
            no_schedule,
            toleration(not_ready, 300),
            toleration(unreachable, 300)
        ])
    );
    let custom = DefaultTolerationSeconds::new(5, 7);
    let mut p = pod(json!({"containers": []}));
    assert_eq!(
        custom.admit(&create_pod(), &mut p, &Fixture::default()),
        Ok(())
    );
    assert_eq!(
        p["spec"]["tolerations"],
        json!([toleration(not_ready, 5), toleration(unreachable, 7)])
    );
}

#[test]
fn default_toleration_seconds_ignores_other_resources() {
    let plugin = DefaultTolerationSeconds::new(300, 300);
    let attrs = Attributes {
        resource: "podtemplates",
        ..create_pod()
    };
    let mut obj = json!({"spec": {}});
    assert_eq!(plugin.admit(&attrs, &mut obj, &Fixture::default()), Ok(()));
    assert_eq!(obj, json!({"spec": {}}));
}

// ---- the chain ----

#[test]
fn the_chain_follows_upstreams_order_and_the_configuration() {
    let names = |c: &Chain| c.plugins().map(|p| p.name()).collect::<Vec<_>>();
    assert_eq!(
        names(&Chain::new(&AdmissionConfig::default())),
        [
            "LimitRanger",
            "ServiceAccount",
            "TaintNodesByCondition",
            "PodSecurity",
            "DefaultTolerationSeconds",
            "StorageObjectInUseProtection",
            "PersistentVolumeClaimResize",
            "RuntimeClass",
            "CertificateApproval",
            "CertificateSigning",
            "CertificateSubjectRestriction"
        ]
    );
    assert!(Chain::new(&AdmissionConfig::default()).resource_quota());
    assert_eq!(
        names(&Chain::new(&AdmissionConfig::without_controllers())),
        [
            "LimitRanger",
            "TaintNodesByCondition",
            "PodSecurity",
            "DefaultTolerationSeconds",
            "StorageObjectInUseProtection",
            "PersistentVolumeClaimResize",
            "RuntimeClass",
            "CertificateApproval",
            "CertificateSigning",
            "CertificateSubjectRestriction"
        ]
    );
    let mut config = AdmissionConfig::default();
    assert_eq!(
        config.disable_list(
            "LimitRanger, PodSecurity, DefaultTolerationSeconds, PersistentVolumeClaimResize, ResourceQuota"
        ),
        Ok(())
    );
    assert_eq!(
        names(&Chain::new(&config)),
        [
            "ServiceAccount",
            "TaintNodesByCondition",
            "StorageObjectInUseProtection",
            "RuntimeClass",
            "CertificateApproval",
            "CertificateSigning",
            "CertificateSubjectRestriction"
        ]
    );
    assert!(!Chain::new(&config).resource_quota());
    assert_eq!(
        config.disable_list("Foo"),
        Err("disable-admission-plugins plugin \"Foo\" is unknown".to_string())
    );
    assert_eq!(
        config.apply_flags("Foo,PodSecurity", "Bar,PodSecurity"),
        Err("[enable-admission-plugins plugin \"Foo\" is unknown, \
             disable-admission-plugins plugin \"Bar\" is unknown, \
             [PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped]"
            .to_string())
    );
    // Enabling a plugin of the default set changes nothing.
    let before = names(&Chain::new(&config));
    assert_eq!(
        config.enable_list("LimitRanger"),
        Err(
            "[LimitRanger] in enable-admission-plugins and disable-admission-plugins overlapped"
                .to_string()
        )
    );
    assert_eq!(config.enable_list("ServiceAccount"), Ok(()));
    assert_eq!(names(&Chain::new(&config)), before);
    assert!(config.enabled("MutatingAdmissionWebhook"));
    assert_eq!(
        config.disable_list("MutatingAdmissionWebhook,ValidatingAdmissionWebhook"),
        Ok(())
    );
    assert!(!config.enabled("MutatingAdmissionWebhook"));
    assert!(!config.enabled("ValidatingAdmissionWebhook"));
}

#[test]
fn the_kind_admission_runs_between_service_account_and_default_toleration_seconds() {
    let chain = Chain::new(&AdmissionConfig::default());
    let objects = Fixture::default().with("serviceaccounts", account("default", json!({})));
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    let kind = |p: &mut Value| {
        // ServiceAccount ran before; DefaultTolerationSeconds has not run yet.
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        assert!(p["spec"].get("tolerations").is_none());
        Err(Forbidden("kind".into()))
    };
    assert_eq!(
        chain.admit(&create_pod(), &mut p, &objects, kind),
        Err(Forbidden("kind".into()))
    );
}
