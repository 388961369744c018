//! The exact `PodStatus` a kubelet would report, as a pure function of the pod, its plan and time.
//!
//! [`evaluate`] takes the pod (spec and current status), its [`PodPlan`], the node-side facts
//! ([`PodFacts`]: when the node accepted the pod, its IP, the node's IP, when the deletion was seen)
//! and an instant, and returns the status at that instant plus the next instant at which it will
//! change. The runtime writes the status if it differs and sets a timer for the next change, so the
//! number of writes per pod is the number of visible transitions, never a polling rate.
//!
//! The timeline (offsets from acceptance): sandbox ready at `sandbox_after` (podIP assigned,
//! `PodReadyToStartContainers`); init containers run in order (sidecars start and keep running);
//! then every regular container starts at once and becomes Ready after its `ready_after`; rules
//! replace that with image-pull failures, crash loops (kubelet back-off, [`crate::backoff`]),
//! not-ready turns or exits. Phases follow the kubelet's `getPhase`. A seen `deletionTimestamp`
//! terminates every container at `min(terminationDelay, remaining grace / 2)` after it was seen,
//! the pod becomes terminal (`Succeeded` if all exited 0, else `Failed`) and
//! [`Evaluation::delete_now`] tells the runtime to send the final `DELETE` (grace 0, UID
//! precondition).
//!
//! Guarantees: no panics for any input; every timestamp is whole seconds (what the API stores, so a
//! status read back compares equal); condition `lastTransitionTime`s change only when the
//! condition's status changes ([`merge_with_previous`]); conditions owned by others (readiness
//! gates, `DisruptionTarget`, the scheduler's `PodScheduled`) are carried over untouched.

use std::net::Ipv4Addr;
use std::time::Duration;

use api::qos;
use k8s_openapi::api::core::v1::{HostIP, PodCondition, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::container_status::{terminate_for_deletion, ContainerEval, Ctx, Kind, PodRef};
use crate::plan::{Behavior, PodPlan, RestartPolicy};
use crate::transform::{id_digest, KubeletPod, KubeletPodStatus};

/// Condition types the kubelet owns, in the order the kubelet reports them.
pub const KUBELET_CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
];

/// Node-side facts about a pod that are not in the API object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// When this node first saw the pod bound to it (becomes `startTime`).
    pub accepted: Timestamp,
    /// The pod's IP, once IPAM gave one (`None`: the CIDR is exhausted; the sandbox never gets
    /// ready, as with a real CNI failure).
    pub pod_ip: Option<Ipv4Addr>,
    /// The node's InternalIP.
    pub host_ip: Ipv4Addr,
    /// When this node first saw the pod's `deletionTimestamp`.
    pub deletion_seen: Option<Timestamp>,
    /// When this node first saw the API show the pod `Succeeded` or `Failed`.
    pub terminal_seen: Option<Timestamp>,
}

/// The result of [`evaluate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The status to report now.
    pub status: PodStatus,
    /// When the status will next change on its own (`None`: never, until something external happens).
    pub next_change: Option<Timestamp>,
    /// The pod was being deleted and its containers have exited: write the status, then delete the
    /// pod with grace period 0 and a UID precondition.
    pub delete_now: bool,
}

/// Adds a duration to an instant, saturating.
pub fn add(ts: Timestamp, d: Duration) -> Timestamp {
    ts.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// `later - earlier`, or zero if `later` is not later.
pub fn since(later: Timestamp, earlier: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or(Duration::ZERO)
}

/// An API `Time`, truncated to whole seconds as the API serializes it.
pub fn api_time(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

fn condition(
    type_: &str,
    ok: bool,
    since: Time,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        last_transition_time: Some(since),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// Go's `fmt` rendering of a `[]string`: `[a b c]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn is_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

/// The kubelet's `getPhase` over the regular containers (init handled by the caller).
fn phase_of(kinds: &[Kind], policy: RestartPolicy) -> &'static str {
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for k in kinds {
        match k {
            Kind::Running => running += 1,
            Kind::Waiting => waiting += 1,
            Kind::BackOff => stopped += 1,
            Kind::Terminated(code) => {
                stopped += 1;
                if *code == 0 {
                    succeeded += 1;
                }
            }
        }
    }
    if waiting > 0 {
        "Pending"
    } else if running > 0 {
        "Running"
    } else if stopped > 0 {
        match policy {
            RestartPolicy::Always => "Running",
            _ if stopped == succeeded => "Succeeded",
            RestartPolicy::Never => "Failed",
            RestartPolicy::OnFailure => "Running",
        }
    } else {
        "Pending"
    }
}

/// Computes the status of `pod` at `now`. See the module docs.
pub fn evaluate(pod: &KubeletPod, plan: &PodPlan, facts: &PodFacts, now: Timestamp) -> Evaluation {
    let ctx = Ctx {
        pod: PodRef {
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
            uid: pod.metadata.uid.as_deref().unwrap_or_default(),
        },
        accepted: facts.accepted,
        policy: plan.restart_policy,
    };
    let t = since(now, facts.accepted);
    let current = pod.status.as_ref();
    let sandbox_ready = facts.pod_ip.is_some() && t >= plan.sandbox_after;
    let mut next: Option<Duration> = None;
    if facts.pod_ip.is_some() && !sandbox_ready {
        next = Some(plan.sandbox_after);
    }
    let has_init = !plan.init_containers.is_empty();

    // Init containers, in order.
    let mut init: Vec<ContainerEval> = Vec::with_capacity(plan.init_containers.len());
    let mut init_done_at: Option<Duration> = if has_init { None } else { Some(Duration::ZERO) };
    let mut init_failed = false;
    if has_init {
        let mut blocked = !sandbox_ready;
        let mut cursor = plan.sandbox_after;
        for c in &plan.init_containers {
            if blocked {
                init.push(ctx.waiting(c, "PodInitializing", None));
                continue;
            }
            let e = ctx.container(c, cursor, t, true);
            next = min_opt(next, e.next);
            match e.kind {
                // A sidecar counts as done once started; it keeps running.
                Kind::Running if c.sidecar => {}
                Kind::Terminated(0) if !c.sidecar => {
                    // An init container that exits 0 never restarts: it ran exactly once.
                    cursor = match &c.behavior {
                        Behavior::Exit { run_for, .. } => cursor + *run_for,
                        _ => cursor,
                    };
                }
                Kind::Terminated(_) => {
                    init_failed = true;
                    blocked = true;
                }
                _ => blocked = true,
            }
            init.push(e);
        }
        if !blocked {
            init_done_at = Some(cursor);
        }
    }

    // Regular containers start together once init is done and the sandbox is ready.
    let mut regular: Vec<ContainerEval> = plan
        .containers
        .iter()
        .map(|c| match init_done_at {
            Some(start) if sandbox_ready => {
                let start = start.max(plan.sandbox_after);
                let e = ctx.container(c, start, t, false);
                next = min_opt(next, e.next);
                e
            }
            _ => ctx.waiting(
                c,
                if has_init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                None,
            ),
        })
        .collect();
    let containers_started = sandbox_ready && init_done_at.is_some();

    let mut phase = if init_failed {
        "Failed"
    } else if !containers_started {
        "Pending"
    } else {
        let kinds: Vec<Kind> = regular.iter().map(|e| e.kind).collect();
        phase_of(&kinds, plan.restart_policy)
    };

    // Graceful deletion.
    let mut delete_now = false;
    let mut terminal_at: Option<Duration> = None;
    let mut pending_exit: Option<Duration> = None;
    if let Some(seen) = facts.deletion_seen {
        let seen_off = since(seen, facts.accepted);
        let deadline = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|d| since(d.0, seen))
            .unwrap_or(Duration::ZERO);
        let exit_at = seen_off + plan.termination_delay.min(deadline / 2);
        if t >= exit_at {
            for e in init.iter_mut().chain(regular.iter_mut()) {
                terminate_for_deletion(&ctx, e, exit_at);
            }
            let all_zero = regular
                .iter()
                .all(|e| matches!(e.kind, Kind::Terminated(0)));
            phase = if all_zero && !init_failed {
                "Succeeded"
            } else {
                "Failed"
            };
            terminal_at = Some(exit_at);
            delete_now = true;
            next = None;
        } else {
            next = min_opt(next, Some(exit_at));
            pending_exit = Some(exit_at);
        }
    }
    // A terminal phase the API shows stays (`generateAPIPodStatus` forces it back: pods never
    // leave a terminal phase). Set by someone else (a user, a controller), it stops the containers
    // when this node saw it, as the pod worker does, and only a pending deletion changes more.
    let shown = match current.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => Some("Succeeded"),
        Some("Failed") => Some("Failed"),
        _ => None,
    };
    let mut forced = false;
    if let Some(shown) = shown.filter(|shown| phase != *shown) {
        if !is_terminal(phase) {
            let seen = facts
                .terminal_seen
                .map_or(t, |s| since(s, facts.accepted))
                .min(t);
            for e in init.iter_mut().chain(regular.iter_mut()) {
                terminate_for_deletion(&ctx, e, seen);
            }
            terminal_at = Some(seen);
            next = pending_exit;
        }
        phase = shown;
        forced = true;
    }
    let terminal = is_terminal(phase);
    if terminal && terminal_at.is_none() {
        terminal_at = Some(
            init.iter()
                .chain(regular.iter())
                .map(|e| e.ready_changed)
                .max()
                .unwrap_or(t),
        );
        if !delete_now {
            // Nothing changes on its own any more (a failed init container's restarts included).
            next = None;
        }
    }

    // Conditions.
    let at = |off: Duration| ctx.time(off);
    let sandbox_cond = match terminal_at {
        Some(off) => condition("PodReadyToStartContainers", false, at(off), None, None),
        None if sandbox_ready => condition(
            "PodReadyToStartContainers",
            true,
            at(plan.sandbox_after),
            None,
            None,
        ),
        None => condition(
            "PodReadyToStartContainers",
            false,
            at(Duration::ZERO),
            None,
            None,
        ),
    };
    let initialized_cond = match init_done_at {
        Some(off) => condition("Initialized", true, at(off), None, None),
        None => {
            let incomplete: Vec<&str> = plan
                .init_containers
                .iter()
                .zip(init.iter())
                .filter(|(c, e)| {
                    !(matches!(e.kind, Kind::Terminated(0)) && !c.sidecar
                        || matches!(e.kind, Kind::Running) && c.sidecar)
                })
                .map(|(c, _)| c.name.as_str())
                .collect();
            let changed = init
                .iter()
                .map(|e| e.ready_changed)
                .max()
                .unwrap_or_default();
            condition(
                "Initialized",
                false,
                at(changed),
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: {}",
                    go_list(&incomplete)
                )),
            )
        }
    };
    let sidecars = plan
        .init_containers
        .iter()
        .zip(init.iter())
        .filter(|(c, _)| c.sidecar);
    let mut unready: Vec<&str> = sidecars
        .clone()
        .filter(|(_, e)| !e.status.ready)
        .map(|(c, _)| c.name.as_str())
        .collect();
    unready.extend(
        plan.containers
            .iter()
            .zip(regular.iter())
            .filter(|(_, e)| !e.status.ready)
            .map(|(c, _)| c.name.as_str()),
    );
    let ready_changed = regular
        .iter()
        .chain(sidecars.map(|(_, e)| e))
        .map(|e| e.ready_changed)
        .max()
        .unwrap_or_default();
    let containers_ready = containers_started && unready.is_empty() && !terminal;
    let (cr_reason, cr_message) = if terminal {
        (Some("PodCompleted"), None)
    } else if containers_ready {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                go_list(&unready)
            )),
        )
    };
    let cr_since = terminal_at.unwrap_or(ready_changed);
    let containers_ready_cond = condition(
        "ContainersReady",
        containers_ready,
        at(cr_since),
        cr_reason,
        cr_message.clone(),
    );

    // Readiness gates: conditions owned by someone else, unless we are told to satisfy them.
    let gates: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .map(|g| g.iter().map(|g| g.condition_type.as_str()).collect())
        .unwrap_or_default();
    // The conditions others own, as shown (the kubelet's own are computed).
    let current_conditions: &[PodCondition] = current
        .map(|s| s.other_conditions.as_slice())
        .unwrap_or_default();
    let mut gate_conditions: Vec<PodCondition> = Vec::new();
    let mut gate_problems: Vec<String> = Vec::new();
    for gate in &gates {
        let existing = current_conditions.iter().find(|c| c.type_ == *gate);
        if plan.satisfy_readiness_gates && containers_ready {
            gate_conditions.push(condition(gate, true, at(ready_changed), None, None));
            continue;
        }
        match existing {
            None => gate_problems.push(format!(
                "corresponding condition of pod readiness gate \"{gate}\" does not exist."
            )),
            Some(c) if c.status != "True" => gate_problems.push(format!(
                "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    let ready_cond = if !containers_ready {
        condition("Ready", false, at(cr_since), cr_reason, cr_message)
    } else if !gate_problems.is_empty() {
        condition(
            "Ready",
            false,
            at(ready_changed),
            Some("ReadinessGatesNotReady"),
            Some(gate_problems.join(", ")),
        )
    } else {
        condition("Ready", true, at(ready_changed), None, None)
    };
    let scheduled_cond = current_conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .cloned()
        .unwrap_or_else(|| condition("PodScheduled", true, at(Duration::ZERO), None, None));

    let mut conditions = vec![
        sandbox_cond,
        initialized_cond,
        ready_cond,
        containers_ready_cond,
        scheduled_cond,
    ];
    let ours_gates: Vec<&str> = gate_conditions.iter().map(|c| c.type_.as_str()).collect();
    let foreign: Vec<PodCondition> = current_conditions
        .iter()
        .filter(|c| c.type_ != "PodScheduled" && !ours_gates.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    conditions.extend(gate_conditions);
    conditions.extend(foreign);

    let pod_ip = facts
        .pod_ip
        .filter(|_| sandbox_ready || terminal_at.is_some());
    // A forced phase keeps the reason and message whoever set it gave.
    let (reason, message) = match current.filter(|_| forced) {
        Some(s) => (s.reason.clone(), s.message.clone()),
        None => (None, None),
    };
    let status = PodStatus {
        phase: Some(phase.to_string()),
        reason,
        message,
        conditions: Some(conditions),
        host_ip: Some(facts.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: facts.host_ip.to_string(),
        }]),
        pod_ip: pod_ip.map(|ip| ip.to_string()),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip: ip.to_string() }]),
        start_time: Some(api_time(facts.accepted)),
        qos_class: Some(
            pod.spec
                .as_ref()
                .map_or(qos::BEST_EFFORT, qos::qos_class)
                .to_string(),
        ),
        init_container_statuses: has_init.then(|| init.into_iter().map(|e| e.status).collect()),
        container_statuses: Some(regular.into_iter().map(|e| e.status).collect()),
        nominated_node_name: current.and_then(|s| s.nominated_node_name.clone()),
        resource_claim_statuses: current.and_then(|s| s.resource_claim_statuses.clone()),
        ..Default::default()
    };
    Evaluation {
        status,
        next_change: next.map(|off| add(facts.accepted, off)),
        delete_now,
    }
}

/// The status of a pod the kubelet's admission rejected: exactly what `rejectPod` sets (phase
/// `Failed`, a reason such as `OutOfpods`, the message), nothing else.
pub fn rejected_status(reason: &str, message: &str) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_string()),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        ..Default::default()
    }
}

/// Keeps `lastTransitionTime` of conditions whose status did not change, and the timestamps of
/// container states that are the same container instance in the same state, as the kubelet does.
pub fn merge_with_previous(new: &mut PodStatus, previous: Option<&KubeletPodStatus>) {
    let Some(prev) = previous else { return };
    for c in new.conditions.iter_mut().flatten() {
        let shown = match prev.own_conditions.iter().find(|p| p.type_ == c.type_) {
            Some(p) => Some((&p.status, &p.last_transition_time)),
            None => prev
                .other_conditions
                .iter()
                .find(|p| p.type_ == c.type_)
                .map(|p| (&p.status, &p.last_transition_time)),
        };
        if let Some((status, Some(since))) = shown {
            if *status == c.status {
                c.last_transition_time = Some(since.clone());
            }
        }
    }
    let pairs = [
        (new.container_statuses.as_mut(), &prev.containers),
        (new.init_container_statuses.as_mut(), &prev.init_containers),
    ];
    for (news, prevs) in pairs {
        for c in news.into_iter().flatten() {
            let Some(p) = prevs.iter().find(|p| p.name == c.name) else {
                continue;
            };
            let Some(id) = c.container_id.as_deref() else {
                continue;
            };
            if p.id != Some(id_digest(id)) {
                continue;
            }
            let running = c.state.as_mut().and_then(|s| s.running.as_mut());
            if let (Some(r), Some(since)) = (running, p.running_since.as_ref()) {
                r.started_at = Some(since.clone());
            }
        }
    }
    if prev.start_time.is_some() {
        new.start_time = prev.start_time.clone();
    }
}

#[cfg(test)]
#[path = "pod_status_tests.rs"]
mod tests;
