//! Unit tests of PodSecurity: each check at its level and version boundaries, the messages in
//! upstream's words, the namespace policy, and the plugin's modes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::checks::{evaluate, forbidden_detail};
use super::policy::{Level, LevelVersion, Policy, Version};
use super::PodSecurity;
use crate::admission::{Attributes, Operation, Plugin};
use crate::registry::{AuditAnnotations, Forbidden, Objects, Warnings};

fn lv(level: Level, version: Version) -> LevelVersion {
    LevelVersion { level, version }
}

const BASELINE: LevelVersion = LevelVersion {
    level: Level::Baseline,
    version: Version::Latest,
};
const RESTRICTED: LevelVersion = LevelVersion {
    level: Level::Restricted,
    version: Version::Latest,
};

/// A pod that passes restricted, with `patch` merged into its first container.
fn restricted_container(extra: Value) -> Value {
    let mut c = json!({
        "name": "c", "image": "i",
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
        }
    });
    merge(&mut c, extra);
    c
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

fn restricted_spec(container: Value) -> Value {
    json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    })
}

fn detail(level: LevelVersion, metadata: &Value, spec: &Value) -> String {
    forbidden_detail(&evaluate(level, metadata, spec))
}

#[test]
fn a_restricted_pod_passes_every_level() {
    let spec = restricted_spec(restricted_container(json!({})));
    for level in [
        BASELINE,
        RESTRICTED,
        lv(Level::Restricted, Version::Minor(10)),
    ] {
        assert_eq!(detail(level, &Value::Null, &spec), "");
    }
}

#[test]
fn a_privileged_pod_fails_restricted_with_upstreams_message() {
    let spec = json!({"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]});
    assert_eq!(
        detail(RESTRICTED, &Value::Null, &spec),
        "privileged (container \"c\" must not set securityContext.privileged=true), \
         allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
         unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
         runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
         seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    assert_eq!(
        detail(BASELINE, &Value::Null, &spec),
        "privileged (container \"c\" must not set securityContext.privileged=true)"
    );
    assert_eq!(
        detail(lv(Level::Privileged, Version::Latest), &Value::Null, &spec),
        ""
    );
}

#[test]
fn host_namespaces_ports_and_hostpath_are_baseline() {
    let spec = json!({
        "hostNetwork": true, "hostPID": true,
        "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]},
            {"name": "b", "ports": [{"containerPort": 81, "hostPort": 81}, {"containerPort": 82}]},
        ],
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}],
    });
    assert_eq!(
        detail(BASELINE, &Value::Null, &spec),
        "host namespaces (hostNetwork, hostPID), hostPath volumes (volume \"h\"), \
         hostPort (containers \"a\", \"b\" use hostPorts 8080, 81)"
    );
    // (Sorted as strings, as upstream's string set.)
    // restrictedVolumes replaces hostPathVolumes at the restricted level.
    let d = detail(RESTRICTED, &Value::Null, &spec);
    assert!(!d.contains("hostPath volumes"), "{d}");
    assert!(
        d.contains(
            "restricted volume types (volume \"h\" uses restricted volume type \"hostPath\")"
        ),
        "{d}"
    );
}

#[test]
fn capabilities_baseline_and_restricted() {
    let spec = json!({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}}}]});
    assert_eq!(
        detail(BASELINE, &Value::Null, &spec),
        "non-default capabilities (container \"c\" must not include \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add)"
    );
    let c = restricted_container(
        json!({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}}}),
    );
    assert_eq!(
        detail(RESTRICTED, &Value::Null, &restricted_spec(c)),
        "unrestricted capabilities (container \"c\" must not include \"CHOWN\" in securityContext.capabilities.add)"
    );
    // Before v1.22 the restricted level checks capabilities as baseline does: CHOWN is fine.
    let c = restricted_container(json!({"securityContext": {"capabilities": {"add": ["CHOWN"]}}}));
    assert_eq!(
        detail(
            lv(Level::Restricted, Version::Minor(21)),
            &Value::Null,
            &restricted_spec(c)
        ),
        ""
    );
}

#[test]
fn version_boundaries_of_restricted_checks() {
    // allowPrivilegeEscalation from v1.8, runAsUser from v1.23, seccomp from v1.19.
    let c = json!({"name": "c", "securityContext": {"capabilities": {"drop": ["ALL"]}, "runAsUser": 0}});
    let spec = json!({"securityContext": {"runAsNonRoot": true}, "containers": [c]});
    assert_eq!(
        detail(
            lv(Level::Restricted, Version::Minor(7)),
            &Value::Null,
            &spec
        ),
        ""
    );
    assert_eq!(
        detail(lv(Level::Restricted, Version::Minor(8)), &Value::Null, &spec),
        "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)"
    );
    let d = detail(
        lv(Level::Restricted, Version::Minor(23)),
        &Value::Null,
        &spec,
    );
    assert!(
        d.contains("runAsUser=0 (container \"c\" must not set runAsUser=0)"),
        "{d}"
    );
    assert!(d.contains("seccompProfile (pod or container \"c\""), "{d}");
    let d = detail(
        lv(Level::Restricted, Version::Minor(18)),
        &Value::Null,
        &spec,
    );
    assert!(
        !d.contains("seccompProfile") && !d.contains("runAsUser"),
        "{d}"
    );
    // A version newer than this server's is evaluated as the newest.
    assert_eq!(
        detail(
            lv(Level::Restricted, Version::Minor(99)),
            &Value::Null,
            &spec
        ),
        detail(RESTRICTED, &Value::Null, &spec)
    );
}

#[test]
fn windows_pods_skip_the_linux_only_checks_from_v1_25() {
    let spec = json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true}, "containers": [{"name": "c"}]});
    assert_eq!(detail(RESTRICTED, &Value::Null, &spec), "");
    let d = detail(
        lv(Level::Restricted, Version::Minor(24)),
        &Value::Null,
        &spec,
    );
    assert!(d.starts_with("allowPrivilegeEscalation != false"), "{d}");
}

#[test]
fn run_as_non_root_explicit_and_implicit() {
    let spec = json!({"securityContext": {"runAsNonRoot": false}, "containers": [
        {"name": "a", "securityContext": {"runAsNonRoot": false}}, {"name": "b"}]});
    let v = evaluate(RESTRICTED, &Value::Null, &spec);
    let r = v.iter().find(|v| v.reason == "runAsNonRoot != true");
    assert_eq!(
        r.map(|v| v.detail.as_str()),
        Some("pod and container \"a\" must not set securityContext.runAsNonRoot=false")
    );
    let spec = json!({"containers": [{"name": "a", "securityContext": {"runAsNonRoot": true}}, {"name": "b"}, {"name": "c"}]});
    let v = evaluate(RESTRICTED, &Value::Null, &spec);
    let r = v.iter().find(|v| v.reason == "runAsNonRoot != true");
    assert_eq!(
        r.map(|v| v.detail.as_str()),
        Some("pod or containers \"b\", \"c\" must set securityContext.runAsNonRoot=true")
    );
}

#[test]
fn seccomp_baseline_fields_and_annotations() {
    let spec = json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [
        {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]});
    assert_eq!(
        detail(BASELINE, &Value::Null, &spec),
        "seccompProfile (pod and container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
    let meta = json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}});
    let spec = json!({"containers": [{"name": "c"}]});
    assert_eq!(
        detail(lv(Level::Baseline, Version::Minor(18)), &meta, &spec),
        "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod=\"unconfined\")"
    );
    assert_eq!(detail(BASELINE, &meta, &spec), "");
}

#[test]
fn selinux_proc_mount_sysctls_apparmor_and_host_process() {
    let spec = json!({
        "securityContext": {
            "seLinuxOptions": {"type": "spc_t", "user": "u"},
            "sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_rmem", "value": "1"}],
            "appArmorProfile": {"type": "Unconfined"},
            "windowsOptions": {"hostProcess": true},
        },
        "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}],
    });
    assert_eq!(
        detail(BASELINE, &Value::Null, &spec),
        "forbidden AppArmor profile (pod must not set appArmorProfile.type to \"Unconfined\"), \
         procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), \
         seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set), \
         forbidden sysctls (kernel.msgmax), \
         hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)"
    );
    // tcp_rmem is safe from v1.32 only; container_engine_t from v1.31.
    let d = detail(lv(Level::Baseline, Version::Minor(31)), &Value::Null, &spec);
    assert!(
        d.contains("forbidden sysctls (kernel.msgmax, net.ipv4.tcp_rmem)"),
        "{d}"
    );
    let engine = json!({"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}, "containers": []});
    assert_eq!(
        detail(
            lv(Level::Baseline, Version::Minor(31)),
            &Value::Null,
            &engine
        ),
        ""
    );
    assert!(detail(
        lv(Level::Baseline, Version::Minor(30)),
        &Value::Null,
        &engine
    )
    .starts_with("seLinuxOptions"));
}

#[test]
fn labels_parse_into_a_policy_and_invalid_ones_fail_closed_for_enforce() {
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (p, errs) = Policy::from_labels(
        &labels(&[
            ("pod-security.kubernetes.io/enforce", "baseline"),
            ("pod-security.kubernetes.io/enforce-version", "v1.25"),
            ("pod-security.kubernetes.io/warn", "restricted"),
        ]),
        Policy::default(),
    );
    assert!(errs.is_empty());
    assert_eq!(p.enforce.to_string(), "baseline:v1.25");
    assert_eq!(p.warn.to_string(), "restricted:latest");
    assert_eq!(p.audit.to_string(), "privileged:latest");
    let (p, errs) = Policy::from_labels(
        &labels(&[
            ("pod-security.kubernetes.io/enforce", "strict"),
            ("pod-security.kubernetes.io/warn", "x"),
            ("pod-security.kubernetes.io/audit-version", "v1.05"),
        ]),
        Policy::default(),
    );
    assert_eq!(p.enforce.level, Level::Restricted);
    assert_eq!(p.warn.level, Level::Privileged);
    assert_eq!(p.audit.version, Version::Latest);
    let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(msgs.len(), 3);
    assert!(msgs[0].contains("metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"), "{msgs:?}");
    assert!(
        msgs.iter()
            .any(|m| m.contains("must be \"latest\" or \"v1.x\"")),
        "{msgs:?}"
    );
}

/// Objects: one namespace with `labels`, and `pods`.
struct Cluster {
    namespace: Value,
    pods: Vec<Arc<Value>>,
}

impl Objects for Cluster {
    fn list(&self, _group: &str, plural: &str) -> Vec<Arc<Value>> {
        match plural {
            "pods" => self.pods.clone(),
            _ => Vec::new(),
        }
    }
    fn get(&self, _g: &str, plural: &str, _ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        (plural == "namespaces" && api::meta::name(&self.namespace) == Some(name))
            .then(|| Arc::new(self.namespace.clone()))
    }
}

fn namespace(labels: Value) -> Value {
    json!({"metadata": {"name": "ns", "labels": labels}})
}

fn privileged_pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [
        {"name": "c", "image": "i", "securityContext": {"privileged": true}}]}})
}

struct Request {
    warnings: Warnings,
    audit: AuditAnnotations,
}

impl Request {
    fn new() -> Self {
        Request {
            warnings: Warnings::default(),
            audit: AuditAnnotations::default(),
        }
    }
    fn attrs<'a>(
        &'a self,
        resource: &'a str,
        group: &'a str,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        Attributes {
            operation: if old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            group,
            resource,
            namespace: Some("ns"),
            old,
            subresource: "",
            warnings: Some(&self.warnings),
            audit: Some(&self.audit),
            user: None,
            authorizes: false,
        }
    }
}

#[test]
fn enforce_refuses_warn_warns_audit_annotates() {
    let plugin = PodSecurity::default();
    let cluster = Cluster {
        namespace: namespace(json!({
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/audit": "baseline",
        })),
        pods: Vec::new(),
    };
    let req = Request::new();
    let refused = plugin.validate(&req.attrs("pods", "", None), &privileged_pod("p"), &cluster);
    assert_eq!(
        refused,
        Err(Forbidden(
            "violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)".into()
        ))
    );
    assert!(req.warnings.all().is_empty());
    let audit = req.audit.all();
    assert_eq!(
        audit
            .get("pod-security.kubernetes.io/enforce-policy")
            .map(String::as_str),
        Some("baseline:latest")
    );
    assert!(audit["pod-security.kubernetes.io/audit-violations"]
        .starts_with("would violate PodSecurity \"baseline:latest\": privileged"));

    let cluster = Cluster {
        namespace: namespace(json!({"pod-security.kubernetes.io/warn": "baseline"})),
        pods: Vec::new(),
    };
    let req = Request::new();
    assert_eq!(
        plugin.validate(&req.attrs("pods", "", None), &privileged_pod("p"), &cluster),
        Ok(())
    );
    assert_eq!(
        req.warnings.all(),
        ["would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"]
    );
}

#[test]
fn workload_templates_get_warnings_never_refusals() {
    let plugin = PodSecurity::default();
    let cluster = Cluster {
        namespace: namespace(
            json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "baseline"}),
        ),
        pods: Vec::new(),
    };
    let pod = privileged_pod("p");
    let deployment = json!({"metadata": {"name": "d"}, "spec": {"template": {"metadata": pod["metadata"], "spec": pod["spec"]}}});
    let req = Request::new();
    assert_eq!(
        plugin.validate(
            &req.attrs("deployments", "apps", None),
            &deployment,
            &cluster
        ),
        Ok(())
    );
    assert_eq!(req.warnings.all().len(), 1);
    let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": pod["spec"]}}}}});
    let req = Request::new();
    assert_eq!(
        plugin.validate(&req.attrs("cronjobs", "batch", None), &cron, &cluster),
        Ok(())
    );
    assert!(req.warnings.all()[0]
        .starts_with("would violate PodSecurity \"baseline:latest\": privileged"));
}

#[test]
fn pod_updates_are_checked_only_when_significant() {
    let plugin = PodSecurity::default();
    let cluster = Cluster {
        namespace: namespace(json!({"pod-security.kubernetes.io/enforce": "baseline"})),
        pods: Vec::new(),
    };
    let old = privileged_pod("p");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    let req = Request::new();
    assert_eq!(
        plugin.validate(&req.attrs("pods", "", Some(&old)), &relabelled, &cluster),
        Ok(())
    );
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("j");
    assert!(plugin
        .validate(&req.attrs("pods", "", Some(&old)), &new_image, &cluster)
        .is_err());
    let mut debug = old.clone();
    debug["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "busybox"}]);
    let attrs = Attributes {
        subresource: "ephemeralcontainers",
        ..req.attrs("pods", "", Some(&old))
    };
    assert!(plugin.validate(&attrs, &debug, &cluster).is_err());
    // Status writes are ignored.
    let attrs = Attributes {
        subresource: "status",
        ..req.attrs("pods", "", None)
    };
    assert_eq!(plugin.validate(&attrs, &old, &cluster), Ok(()));
}

#[test]
fn tightening_enforce_warns_about_existing_pods() {
    let plugin = PodSecurity::default();
    let pods = ["b", "a", "c"]
        .map(|n| Arc::new(privileged_pod(n)))
        .to_vec();
    let cluster = Cluster {
        namespace: namespace(json!({})),
        pods,
    };
    let old = namespace(json!({}));
    let new = namespace(json!({"pod-security.kubernetes.io/enforce": "baseline"}));
    let req = Request::new();
    assert_eq!(
        plugin.validate(&req.attrs("namespaces", "", Some(&old)), &new, &cluster),
        Ok(())
    );
    assert_eq!(
        req.warnings.all(),
        [
            "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"baseline:latest\"",
            "a (and 2 other pods): privileged",
        ]
    );
    // Relaxing (same version, lower level) warns about nothing.
    let req = Request::new();
    assert_eq!(
        plugin.validate(&req.attrs("namespaces", "", Some(&new)), &old, &cluster),
        Ok(())
    );
    assert!(req.warnings.all().is_empty());
}

#[test]
fn invalid_namespace_labels_are_refused_when_they_change() {
    let plugin = PodSecurity::default();
    let bad = namespace(json!({"pod-security.kubernetes.io/enforce": "strict"}));
    let req = Request::new();
    assert_eq!(
        plugin
            .invalid(&req.attrs("namespaces", "", None), &bad)
            .len(),
        1
    );
    // An update leaving the same invalid label is let through, as upstream.
    let mut relabelled = bad.clone();
    relabelled["metadata"]["labels"]["x"] = json!("y");
    assert!(plugin
        .invalid(&req.attrs("namespaces", "", Some(&bad)), &relabelled)
        .is_empty());
    assert_eq!(
        plugin
            .invalid(
                &req.attrs("namespaces", "", Some(&namespace(json!({})))),
                &bad
            )
            .len(),
        1
    );
}

#[test]
fn an_invalid_enforce_label_enforces_restricted_and_is_annotated() {
    let plugin = PodSecurity::default();
    let cluster = Cluster {
        namespace: namespace(json!({"pod-security.kubernetes.io/enforce": "strict"})),
        pods: Vec::new(),
    };
    let req = Request::new();
    let refused = plugin.validate(&req.attrs("pods", "", None), &privileged_pod("p"), &cluster);
    assert!(
        matches!(&refused, Err(Forbidden(m)) if m.starts_with("violates PodSecurity \"restricted:latest\": privileged")),
        "{refused:?}"
    );
    let audit = req.audit.all();
    assert!(
        audit["pod-security.kubernetes.io/error"].starts_with(
            "Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\""
        ),
        "{audit:?}"
    );
}
