//! The baseline checks of the Pod Security Standards (`policy/check_*.go` of
//! `k8s.io/pod-security-admission`, Kubernetes 1.33): what a pod may not do unless its namespace
//! is privileged. Each check states its reason and detail in upstream's words; lists of names are
//! in the pod's order, lists of values sorted (Go's string sets). Checks run from `v1.0` unless a
//! later version changed them (seccomp fields from 1.19, more safe sysctls in 1.27, 1.29 and 1.32,
//! `container_engine_t` from 1.31).

use serde_json::Value;

use super::checks::{
    container_sc, containers, containers_named, join_quote, name, pluralize, pod_sc, sorted_set,
    Check, Versioned, Violation,
};
use super::policy::Level;

const fn v(min_minor: u32, check: super::checks::CheckPod) -> Versioned {
    Versioned {
        min_minor,
        check,
        overrides: &[],
    }
}

/// The baseline checks, by ID in byte order.
pub static CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: &[v(0, app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        versions: &[v(0, capabilities_baseline)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: &[v(0, host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        versions: &[v(0, host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: &[v(0, host_ports)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: &[v(0, privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: &[v(0, proc_mount)],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[v(0, se_linux_options_1_0), v(31, se_linux_options_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[v(0, seccomp_baseline_1_0), v(19, seccomp_baseline_1_19)],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[
            v(0, sysctls_1_0),
            v(27, sysctls_1_27),
            v(29, sysctls_1_29),
            v(32, sysctls_1_32),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: &[v(0, windows_host_process)],
    },
];

fn is_true(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

fn str_of<'v>(v: Option<&'v Value>, field: &str) -> &'v str {
    v.and_then(|o| o.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `pod and containers "a", "b"`: the setters joined as upstream's `badSetters`.
fn setters(pod: bool, bad_containers: &[String]) -> String {
    let mut s = Vec::new();
    if pod {
        s.push("pod".to_string());
    }
    if !bad_containers.is_empty() {
        s.push(containers_named(bad_containers));
    }
    s.join(" and ")
}

fn annotations(metadata: &Value) -> Vec<(&str, &str)> {
    metadata
        .get("annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                .collect()
        })
        .unwrap_or_default()
}

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor_profile(metadata: &Value, spec: &Value) -> Option<Violation> {
    let allowed_type = |p: &Value| {
        matches!(
            p.get("type").and_then(Value::as_str),
            Some("RuntimeDefault" | "Localhost")
        )
    };
    let mut bad_values = Vec::new();
    let pod = pod_sc(spec, "appArmorProfile").filter(|p| !allowed_type(p));
    if let Some(p) = pod {
        bad_values.push(str_of(Some(p), "type").to_string());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(p) = container_sc(c, "appArmorProfile").filter(|p| !allowed_type(p)) {
            bad_containers.push(name(c).to_string());
            bad_values.push(str_of(Some(p), "type").to_string());
        }
    }
    let mut setter = setters(pod.is_some(), &bad_containers);
    let mut bad_values = sorted_set(bad_values);
    let mut forbidden_annotations: Vec<String> = annotations(metadata)
        .into_iter()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", join_quote(&[v])))
        .collect();
    if !forbidden_annotations.is_empty() {
        forbidden_annotations.sort();
        let n = forbidden_annotations.len();
        bad_values.extend(forbidden_annotations);
        let what = pluralize("annotation", "annotations", n);
        setter = match setter.is_empty() {
            true => what.to_string(),
            false => format!("{setter} and {what}"),
        };
    }
    if setter.is_empty() {
        return None;
    }
    Some(Violation::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            bad_values.len(),
        ),
        format!(
            "{setter} must not set appArmorProfile.type to {}",
            join_quote(&bad_values)
        ),
    ))
}

/// The capabilities a baseline container may add: the container runtimes' default set.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// A container's `securityContext.capabilities.<list>`.
pub fn capability_list<'v>(c: &'v Value, list: &str) -> Vec<&'v str> {
    container_sc(c, "capabilities")
        .and_then(|caps| caps.get(list))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn capabilities_baseline(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_containers = Vec::new();
    let mut bad_caps = Vec::new();
    for c in containers(spec) {
        let extra: Vec<&str> = capability_list(c, "add")
            .into_iter()
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(cap))
            .collect();
        if !extra.is_empty() {
            bad_containers.push(name(c).to_string());
            bad_caps.extend(extra.into_iter().map(String::from));
        }
    }
    (!bad_containers.is_empty()).then(|| {
        Violation::new(
            "non-default capabilities",
            format!(
                "{} must not include {} in securityContext.capabilities.add",
                containers_named(&bad_containers),
                join_quote(&sorted_set(bad_caps))
            ),
        )
    })
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<Violation> {
    // Sorted, as upstream's set: hostIPC, hostNetwork, hostPID.
    let set: Vec<&str> = ["hostIPC", "hostNetwork", "hostPID"]
        .into_iter()
        .filter(|f| is_true(spec.get(*f)))
        .collect();
    (!set.is_empty()).then(|| Violation::new("host namespaces", set.join(", ")))
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn host_path_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = volumes(spec)
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "hostPath volumes",
            format!(
                "{} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn host_ports(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_containers = Vec::new();
    let mut ports = Vec::new();
    for c in containers(spec) {
        let used: Vec<i64> = c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .collect();
        if !used.is_empty() {
            bad_containers.push(name(c).to_string());
            ports.extend(used.iter().map(i64::to_string));
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let ports = sorted_set(ports);
    Some(Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    ))
}

fn privileged(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| is_true(container_sc(c, "privileged")))
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                containers_named(&bad)
            ),
        )
    })
}

fn proc_mount(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for c in containers(spec) {
        if let Some(t) = container_sc(c, "procMount").and_then(Value::as_str) {
            if t != "Default" {
                bad.push(name(c).to_string());
                types.push(t.to_string());
            }
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "procMount",
            format!(
                "{} must not set securityContext.procMount to {}",
                containers_named(&bad),
                join_quote(&sorted_set(types))
            ),
        )
    })
}

fn se_linux_options(spec: &Value, allowed_types: &[&str]) -> Option<Violation> {
    let (mut bad_types, mut set_user, mut set_role) = (Vec::new(), false, false);
    let mut valid = |o: &Value| {
        let mut ok = true;
        let t = str_of(Some(o), "type");
        if !allowed_types.contains(&t) {
            ok = false;
            bad_types.push(t.to_string());
        }
        if !str_of(Some(o), "user").is_empty() {
            ok = false;
            set_user = true;
        }
        if !str_of(Some(o), "role").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod = pod_sc(spec, "seLinuxOptions").is_some_and(|o| !valid(o));
    let bad: Vec<String> = containers(spec)
        .filter(|c| container_sc(c, "seLinuxOptions").is_some_and(|o| !valid(o)))
        .map(|c| name(c).to_string())
        .collect();
    if !pod && bad.is_empty() {
        return None;
    }
    let bad_types = sorted_set(bad_types);
    let mut data = Vec::new();
    // As upstream: user and role are named only beside a bad type.
    if !bad_types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
        if set_user {
            data.push("user may not be set".to_string());
        }
        if set_role {
            data.push("role may not be set".to_string());
        }
    }
    Some(Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters(pod, &bad),
            data.join("; ")
        ),
    ))
}

fn se_linux_options_1_0(_: &Value, spec: &Value) -> Option<Violation> {
    se_linux_options(
        spec,
        &["", "container_t", "container_init_t", "container_kvm_t"],
    )
}

fn se_linux_options_1_31(_: &Value, spec: &Value) -> Option<Violation> {
    se_linux_options(
        spec,
        &[
            "",
            "container_t",
            "container_init_t",
            "container_kvm_t",
            "container_engine_t",
        ],
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

fn seccomp_baseline_1_0(metadata: &Value, spec: &Value) -> Option<Violation> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let annotations = annotations(metadata);
    let value = |key: &str| annotations.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let mut keys = vec![SECCOMP_POD_ANNOTATION.to_string()];
    keys.extend(
        containers(spec).map(|c| format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", name(c))),
    );
    let bad: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            value(k)
                .filter(|v| !valid(v))
                .map(|v| format!("{k}={}", join_quote(&[v])))
        })
        .collect();
    let bad = sorted_set(bad);
    (!bad.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                pluralize("annotation", "annotations", bad.len()),
                bad.join(", ")
            ),
        )
    })
}

/// Whether a `seccompProfile` is one of the allowed types.
pub fn valid_seccomp(profile: &Value) -> bool {
    matches!(
        profile.get("type").and_then(Value::as_str),
        Some("RuntimeDefault" | "Localhost")
    )
}

fn seccomp_baseline_1_19(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_values = Vec::new();
    let pod = pod_sc(spec, "seccompProfile").filter(|p| !valid_seccomp(p));
    if let Some(p) = pod {
        bad_values.push(str_of(Some(p), "type").to_string());
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(p) = container_sc(c, "seccompProfile").filter(|p| !valid_seccomp(p)) {
            bad.push(name(c).to_string());
            bad_values.push(str_of(Some(p), "type").to_string());
        }
    }
    if pod.is_none() && bad.is_empty() {
        return None;
    }
    Some(Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters(pod.is_some(), &bad),
            join_quote(&sorted_set(bad_values))
        ),
    ))
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls(spec: &Value, allowed: &[&[&str]]) -> Option<Violation> {
    let bad: Vec<&str> = pod_sc(spec, "sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(name)
        .filter(|n| !allowed.iter().any(|set| set.contains(n)))
        .collect();
    (!bad.is_empty()).then(|| Violation::new("forbidden sysctls", bad.join(", ")))
}

fn sysctls_1_0(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0])
}

fn sysctls_1_27(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

fn sysctls_1_29(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

fn sysctls_1_32(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(
        spec,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}

fn windows_host_process(_: &Value, spec: &Value) -> Option<Violation> {
    let host_process = |o: Option<&Value>| is_true(o.and_then(|w| w.get("hostProcess")));
    let pod = host_process(pod_sc(spec, "windowsOptions"));
    let bad: Vec<String> = containers(spec)
        .filter(|c| host_process(container_sc(c, "windowsOptions")))
        .map(|c| name(c).to_string())
        .collect();
    (pod || !bad.is_empty()).then(|| {
        Violation::new(
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                setters(pod, &bad)
            ),
        )
    })
}
