//! The restricted checks of the Pod Security Standards (`policy/check_*.go` of
//! `k8s.io/pod-security-admission`, Kubernetes 1.33): what a pod must do on top of baseline.
//! Each check states its reason and detail in upstream's words. From `v1.25` the Linux-only
//! checks (privilege escalation, capabilities, seccomp) skip pods with `spec.os.name: windows`.
//! Three of them replace a baseline check while in force (`overrides`).

use serde_json::Value;

use super::baseline::{capability_list, valid_seccomp};
use super::checks::{
    container_sc, containers, containers_named, is_windows, join_quote, name, pluralize, pod_sc,
    sorted_set, Check, CheckPod, Versioned, Violation,
};
use super::policy::Level;

const fn v(min_minor: u32, check: CheckPod, overrides: &'static [&'static str]) -> Versioned {
    Versioned {
        min_minor,
        check,
        overrides,
    }
}

/// The restricted checks, by ID in byte order.
pub static CHECKS: &[Check] = &[
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[
            v(8, allow_privilege_escalation, &[]),
            v(25, allow_privilege_escalation_1_25, &[]),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            v(22, capabilities_restricted, &["capabilities_baseline"]),
            v(25, capabilities_restricted_1_25, &["capabilities_baseline"]),
        ],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[v(0, restricted_volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[v(0, run_as_non_root, &[])],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[v(23, run_as_user, &[])],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[
            v(19, seccomp_restricted, &["seccompProfile_baseline"]),
            v(25, seccomp_restricted_1_25, &["seccompProfile_baseline"]),
        ],
    },
];

/// `pod and containers "a"` (upstream's `badSetters`).
fn setters(pod: bool, bad: &[String]) -> String {
    let mut s = Vec::new();
    if pod {
        s.push("pod".to_string());
    }
    if !bad.is_empty() {
        s.push(containers_named(bad));
    }
    s.join(" and ")
}

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| {
            container_sc(c, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false)
        })
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                containers_named(&bad)
            ),
        )
    })
}

fn allow_privilege_escalation_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    allow_privilege_escalation(metadata, spec)
}

fn capabilities_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let (mut missing_drop_all, mut adding, mut forbidden) = (Vec::new(), Vec::new(), Vec::new());
    for c in containers(spec) {
        if !capability_list(c, "drop").contains(&"ALL") {
            missing_drop_all.push(name(c).to_string());
        }
        let extra: Vec<&str> = capability_list(c, "add")
            .into_iter()
            .filter(|cap| *cap != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(name(c).to_string());
            forbidden.extend(extra.into_iter().map(String::from));
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quote(&sorted_set(forbidden))
        ));
    }
    (!details.is_empty()).then(|| Violation::new("unrestricted capabilities", details.join("; ")))
}

fn capabilities_restricted_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    capabilities_restricted(metadata, spec)
}

/// The volume sources a restricted pod may use.
const ALLOWED_VOLUME_SOURCES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The sources upstream names; any other is `unknown`.
const NAMED_VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let (mut bad, mut types) = (Vec::new(), Vec::new());
    for vol in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let set = |k: &&str| vol.get(*k).is_some_and(|s| !s.is_null());
        if ALLOWED_VOLUME_SOURCES.iter().any(set) {
            continue;
        }
        bad.push(name(vol).to_string());
        let ty = NAMED_VOLUME_SOURCES.iter().find(|k| set(k)).copied();
        types.push(ty.unwrap_or("unknown").to_string());
    }
    if bad.is_empty() {
        return None;
    }
    let types = sorted_set(types);
    Some(Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    ))
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<Violation> {
    let pod = pod_sc(spec, "runAsNonRoot").and_then(Value::as_bool);
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match container_sc(c, "runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(name(c).to_string()),
            Some(true) => {}
            None if pod != Some(true) => implicit.push(name(c).to_string()),
            None => {}
        }
    }
    let pod_bad = pod == Some(false);
    if pod_bad || !explicit.is_empty() {
        return Some(Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters(pod_bad, &explicit)
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_named(&implicit)
            ),
        )
    })
}

fn run_as_user(_: &Value, spec: &Value) -> Option<Violation> {
    let root = |v: Option<&Value>| v.and_then(Value::as_i64) == Some(0);
    let pod = root(pod_sc(spec, "runAsUser"));
    let bad: Vec<String> = containers(spec)
        .filter(|c| root(container_sc(c, "runAsUser")))
        .map(|c| name(c).to_string())
        .collect();
    (pod || !bad.is_empty()).then(|| {
        Violation::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", setters(pod, &bad)),
        )
    })
}

fn seccomp_restricted(_: &Value, spec: &Value) -> Option<Violation> {
    let ty = |p: &Value| {
        p.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut bad_values = Vec::new();
    let pod_profile = pod_sc(spec, "seccompProfile");
    let pod_bad = pod_profile.is_some_and(|p| !valid_seccomp(p));
    if let Some(p) = pod_profile.filter(|_| pod_bad) {
        bad_values.push(ty(p));
    }
    let pod_set = pod_profile.is_some() && !pod_bad;
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match container_sc(c, "seccompProfile") {
            Some(p) if !valid_seccomp(p) => {
                explicit.push(name(c).to_string());
                bad_values.push(ty(p));
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c).to_string()),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters(pod_bad, &explicit),
                join_quote(&sorted_set(bad_values))
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_named(&implicit)
            ),
        )
    })
}

fn seccomp_restricted_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    seccomp_restricted(metadata, spec)
}
