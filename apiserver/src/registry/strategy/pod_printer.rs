//! kubectl's pod printer (`printPod` in Kubernetes' `pkg/printers/internalversion/printers.go`):
//! READY counts, the STATUS reason rules (init containers, waiting/terminated reasons, Completed vs
//! Running, Terminating), RESTARTS with the last restart's age, READINESS GATES.

use serde_json::Value;

pub(super) fn readiness_gates(obj: &Value) -> String {
    let gates = obj
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let true_count = gates
        .iter()
        .filter(|g| {
            let ty = g.get("conditionType");
            conditions
                .iter()
                .find(|c| c.get("type") == ty)
                .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        })
        .count();
    format!("{}/{}", true_count, gates.len())
}

pub(super) struct PodPrint {
    pub ready: usize,
    pub total: usize,
    pub reason: String,
    pub restarts: String,
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = s(t, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = t.get("signal").and_then(Value::as_i64).unwrap_or(0);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!(
            "{prefix}ExitCode:{}",
            t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
        )
    }
}

fn condition_true(obj: &Value, ty: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| s(c, "/type") == ty && s(c, "/status") == "True")
        })
}

/// The STATUS column of `kubectl get pods` (printers.go `printPod`).
pub fn pod_status_reason(obj: &Value) -> String {
    print_pod(obj, jiff::Timestamp::now()).reason
}

pub(super) fn print_pod(obj: &Value, now: jiff::Timestamp) -> PodPrint {
    let empty = Vec::new();
    let arr = |ptr: &str| obj.pointer(ptr).and_then(Value::as_array).unwrap_or(&empty);
    let init_specs = arr("/spec/initContainers");
    let restartable = |name: &str| {
        init_specs
            .iter()
            .any(|c| s(c, "/name") == name && s(c, "/restartPolicy") == "Always")
    };
    let total = arr("/spec/containers").len()
        + init_specs
            .iter()
            .filter(|c| s(c, "/restartPolicy") == "Always")
            .count();
    let phase = s(obj, "/status/phase").to_string();
    let mut reason = phase.clone();
    let status_reason = s(obj, "/status/reason").to_string();
    if !status_reason.is_empty() {
        reason = status_reason.clone();
    }
    for c in arr("/status/conditions") {
        if s(c, "/type") == "PodScheduled" && s(c, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }
    let mut restarts: i64 = 0;
    let mut restartable_restarts: i64 = 0;
    let mut last_restart: Option<jiff::Timestamp> = None;
    let mut last_restartable_restart: Option<jiff::Timestamp> = None;
    let mut ready = 0usize;
    let finished = |c: &Value| {
        c.pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(api::meta::parse_time)
    };
    let later = |a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>| match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let init_statuses = arr("/status/initContainerStatuses");
    let n_init = init_specs.len();
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let rc = c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        restarts += rc;
        last_restart = later(last_restart, finished(c));
        let name = s(c, "/name");
        if restartable(name) {
            restartable_restarts += rc;
            last_restartable_restart = later(last_restartable_restart, finished(c));
        }
        let terminated = c.pointer("/state/terminated");
        let waiting_reason = s(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64).unwrap_or(0) == 0) {
            continue;
        }
        if restartable(name) && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = terminated_reason(t, "Init:");
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{n_init}");
        }
        initializing = true;
        break;
    }
    if !initializing || condition_true(obj, "Initialized") {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in arr("/status/containerStatuses").iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            last_restart = later(last_restart, finished(c));
            let waiting = s(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(obj, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if api::meta::deletion_timestamp(obj).is_some() {
        if status_reason == "NodeLost" {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }
    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => {
            format!("{restarts} ({} ago)", api::human_duration_since(t, now))
        }
        _ => restarts.to_string(),
    };
    PodPrint {
        ready,
        total,
        reason,
        restarts: restarts_text,
    }
}
