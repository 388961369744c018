//! Unit tests of [`super::evaluate`]: every field of every stage.

use super::*;
use crate::config::{Delay, LifecycleConfig};
use crate::Result;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

const S: fn(u64) -> Duration = Duration::from_secs;

fn pod(v: serde_json::Value) -> KubeletPod {
    match serde_json::from_value(v) {
        Ok(p) => p,
        Err(e) => panic!("bad pod: {e}"),
    }
}

fn t0() -> Timestamp {
    match Timestamp::from_second(1_700_000_000) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

fn at(off: Duration) -> Timestamp {
    add(t0(), off)
}

fn secs(off: u64) -> Option<Time> {
    Some(api_time(at(S(off))))
}

/// A config with fixed, whole-second delays so that expected times are exact.
fn cfg(extra: &str) -> LifecycleConfig {
    let yaml = format!(
        "podStartDelay: 1s\ninitContainerDuration: 2s\ncontainerReadyDelay: 1s\nterminationDelay: 1s\n{extra}"
    );
    match LifecycleConfig::from_yaml(&yaml) {
        Ok(c) => c,
        Err(e) => panic!("bad config: {e}"),
    }
}

fn facts() -> PodFacts {
    PodFacts {
        accepted: t0(),
        pod_ip: Some(Ipv4Addr::new(10, 244, 3, 7)),
        host_ip: Ipv4Addr::new(172, 16, 0, 5),
        deletion_seen: None,
        terminal_seen: None,
    }
}

fn web() -> KubeletPod {
    pod(json!({
        "metadata": {"name": "web-1", "namespace": "default", "uid": "uid-web-1", "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node-3",
            "containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "side", "image": "busybox"}]
        },
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:10Z"}
        ]}
    }))
}

fn eval(pod: &KubeletPod, cfg: &LifecycleConfig, facts: &PodFacts, off: Duration) -> Evaluation {
    let plan = PodPlan::resolve(cfg, pod);
    evaluate(pod, &plan, facts, at(off))
}

fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
    match s
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == t))
    {
        Some(c) => c,
        None => panic!("no condition {t} in {s:?}"),
    }
}

fn container<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
    let all = s
        .container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten());
    match all.into_iter().find(|c| c.name == name) {
        Some(c) => c,
        None => panic!("no container {name} in {s:?}"),
    }
}

fn waiting_reason(c: &ContainerStatus) -> Option<&str> {
    c.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

fn terminated(c: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    c.state.as_ref()?.terminated.as_ref()
}

#[test]
fn pending_before_the_sandbox_is_ready() {
    let e = eval(&web(), &cfg(""), &facts(), Duration::from_millis(500));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(s.pod_ip, None);
    assert_eq!(s.host_ip.as_deref(), Some("172.16.0.5"));
    assert_eq!(s.start_time, secs(0));
    assert_eq!(cond(s, "PodReadyToStartContainers").status, "False");
    assert_eq!(cond(s, "Initialized").status, "True");
    assert_eq!(cond(s, "ContainersReady").status, "False");
    assert_eq!(
        cond(s, "Ready").message.as_deref(),
        Some("containers with unready status: [app side]")
    );
    let app = container(s, "app");
    assert_eq!(waiting_reason(app), Some("ContainerCreating"));
    assert_eq!(app.image, "nginx:1.25");
    assert_eq!(app.image_id, "");
    assert_eq!(app.container_id, None);
    assert!(!app.ready);
    assert_eq!(e.next_change, Some(at(S(1))));
    assert!(!e.delete_now);
}

#[test]
fn running_and_ready_with_every_field() {
    let e = eval(&web(), &cfg(""), &facts(), S(5));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.244.3.7"));
    assert_eq!(
        s.pod_ips.as_ref().map(|v| v[0].ip.as_str()),
        Some("10.244.3.7")
    );
    assert_eq!(s.host_ip.as_deref(), Some("172.16.0.5"));
    assert_eq!(
        s.host_ips.as_ref().map(|v| v[0].ip.as_str()),
        Some("172.16.0.5")
    );
    assert_eq!(s.start_time, secs(0));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    assert_eq!(s.init_container_statuses, None);
    let types: Vec<&str> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        vec![
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    for c in s.conditions.iter().flatten() {
        assert_eq!(c.status, "True", "{c:?}");
        assert!(c.last_transition_time.is_some());
    }
    assert_eq!(
        cond(s, "PodReadyToStartContainers").last_transition_time,
        secs(1)
    );
    assert_eq!(cond(s, "Initialized").last_transition_time, secs(0));
    assert_eq!(cond(s, "ContainersReady").last_transition_time, secs(2));
    assert_eq!(cond(s, "Ready").last_transition_time, secs(2));
    // The scheduler's condition is carried over unchanged.
    assert_eq!(
        cond(s, "PodScheduled")
            .last_transition_time
            .as_ref()
            .map(|t| t.0.as_second()),
        Some(1_699_999_990)
    );
    let app = container(s, "app");
    assert!(app.ready);
    assert_eq!(app.started, Some(true));
    assert_eq!(app.restart_count, 0);
    assert_eq!(app.image, "docker.io/library/nginx:1.25");
    assert!(app.image_id.starts_with("docker.io/library/nginx@sha256:"));
    assert_eq!(
        app.image_id.len(),
        "docker.io/library/nginx@sha256:".len() + 64
    );
    assert_eq!(
        app.container_id.as_deref(),
        Some(crate::ids::container_id("uid-web-1", "app", 0).as_str())
    );
    assert_eq!(
        app.state
            .as_ref()
            .and_then(|st| st.running.as_ref())
            .and_then(|r| r.started_at.clone()),
        secs(1)
    );
    assert_ne!(container(s, "side").container_id, app.container_id);
    assert_eq!(
        e.next_change, None,
        "a healthy pod never changes on its own"
    );
}

#[test]
fn ready_only_after_the_ready_delay() {
    let e = eval(&web(), &cfg(""), &facts(), Duration::from_millis(1500));
    assert_eq!(e.status.phase.as_deref(), Some("Running"));
    assert!(!container(&e.status, "app").ready);
    assert_eq!(container(&e.status, "app").started, Some(true));
    assert_eq!(cond(&e.status, "Ready").status, "False");
    assert_eq!(e.next_change, Some(at(S(2))));
}

#[test]
fn timestamps_are_whole_seconds() {
    let mut c = cfg("");
    c.pod_start_delay = Delay {
        delay: Duration::from_millis(333),
        jitter: Duration::from_millis(333),
    };
    let f = PodFacts {
        accepted: add(t0(), Duration::from_millis(700)),
        ..facts()
    };
    let e = eval(&web(), &c, &f, S(10));
    let text = serde_json::to_string(&e.status).unwrap_or_default();
    let v: PodStatus = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(v, e.status, "a status read back compares equal");
}

#[test]
fn init_containers_run_in_order() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u-init"},
        "spec": {
            "initContainers": [{"name": "one", "image": "busybox"}, {"name": "two", "image": "busybox"}],
            "containers": [{"name": "app", "image": "nginx"}]
        }
    }));
    let c = cfg("");
    // 0.5 s: sandbox not ready.
    let e = eval(&p, &c, &facts(), Duration::from_millis(500));
    assert_eq!(
        waiting_reason(container(&e.status, "one")),
        Some("PodInitializing")
    );
    assert_eq!(
        waiting_reason(container(&e.status, "app")),
        Some("PodInitializing")
    );
    // 2 s: "one" runs (1 s .. 3 s).
    let e = eval(&p, &c, &facts(), S(2));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert!(container(s, "one")
        .state
        .as_ref()
        .is_some_and(|st| st.running.is_some()));
    assert_eq!(waiting_reason(container(s, "two")), Some("PodInitializing"));
    assert_eq!(cond(s, "Initialized").status, "False");
    assert_eq!(
        cond(s, "Initialized").reason.as_deref(),
        Some("ContainersNotInitialized")
    );
    assert_eq!(
        cond(s, "Initialized").message.as_deref(),
        Some("containers with incomplete status: [one two]")
    );
    assert_eq!(e.next_change, Some(at(S(3))));
    // 4 s: "one" done (exit 0), "two" runs (3 s .. 5 s).
    let e = eval(&p, &c, &facts(), S(4));
    let one = terminated(container(&e.status, "one"));
    assert_eq!(one.map(|t| t.exit_code), Some(0));
    assert_eq!(one.and_then(|t| t.reason.as_deref()), Some("Completed"));
    assert_eq!(one.and_then(|t| t.finished_at.clone()), secs(3));
    // 7 s: all init done at 5 s, app started at 5 s, ready at 6 s.
    let e = eval(&p, &c, &facts(), S(7));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(cond(s, "Initialized").status, "True");
    assert_eq!(cond(s, "Initialized").last_transition_time, secs(5));
    assert_eq!(cond(s, "Ready").status, "True");
    assert_eq!(cond(s, "Ready").last_transition_time, secs(6));
    assert_eq!(s.init_container_statuses.as_ref().map(Vec::len), Some(2));
}

#[test]
fn sidecars_keep_running_and_gate_readiness() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u-side"},
        "spec": {
            "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
            "containers": [{"name": "app", "image": "nginx"}]
        }
    }));
    let e = eval(&p, &cfg(""), &facts(), S(5));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let proxy = container(s, "proxy");
    assert!(proxy.ready);
    assert!(proxy.state.as_ref().is_some_and(|st| st.running.is_some()));
    assert_eq!(cond(s, "Initialized").status, "True");
    assert_eq!(cond(s, "Ready").status, "True");
}

#[test]
fn image_pull_errors_back_off() -> Result<()> {
    let c = cfg("rules: [{name: bad, match: {image: 'nginx*'}, imagePullError: {}}]");
    let e = eval(&web(), &c, &facts(), Duration::from_millis(1500));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let app = container(s, "app");
    assert_eq!(waiting_reason(app), Some("ErrImagePull"));
    assert!(app
        .state
        .as_ref()
        .and_then(|st| st.waiting.as_ref())
        .and_then(|w| w.message.as_deref())
        .is_some_and(|m| m.contains("docker.io/library/nginx:1.25") && m.contains("not found")));
    assert_eq!(app.image_id, "");
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(e.next_change, Some(at(S(2))));
    let e = eval(&web(), &c, &facts(), S(5));
    assert!(
        container(&e.status, "side").ready,
        "other containers are unaffected"
    );
    let app = container(&e.status, "app");
    assert_eq!(waiting_reason(app), Some("ImagePullBackOff"));
    assert_eq!(
        app.state
            .as_ref()
            .and_then(|st| st.waiting.as_ref())
            .and_then(|w| w.message.as_deref()),
        Some("Back-off pulling image \"nginx:1.25\"")
    );
    assert_eq!(
        e.next_change,
        Some(at(S(11))),
        "next pull 10 s after the first"
    );
    // Retries at 11 s (ErrImagePull again), then 20 s later.
    let e = eval(&web(), &c, &facts(), Duration::from_millis(11_500));
    assert_eq!(
        waiting_reason(container(&e.status, "app")),
        Some("ErrImagePull")
    );
    let e = eval(&web(), &c, &facts(), S(15));
    assert_eq!(e.next_change, Some(at(S(31))));
    Ok(())
}

#[test]
fn crash_loops_grow_restart_counts() {
    let c = cfg(
        "rules: [{name: crash, match: {labels: {app: web}, image: 'nginx*'}, crashLoop: {runFor: 5s, exitCode: 2}}]",
    );
    // Container starts at 1 s, exits at 6 s, restarted at once, exits at 11 s, back-off 10 s.
    let e = eval(&web(), &c, &facts(), S(3));
    let app = container(&e.status, "app");
    assert!(app.ready, "ready between start+1 s and the crash");
    assert_eq!(app.restart_count, 0);
    let e = eval(&web(), &c, &facts(), S(8));
    let app = container(&e.status, "app");
    assert_eq!(app.restart_count, 1);
    let last = app.last_state.as_ref().and_then(|l| l.terminated.as_ref());
    assert_eq!(last.map(|t| t.exit_code), Some(2));
    assert_eq!(last.and_then(|t| t.reason.as_deref()), Some("Error"));
    assert_eq!(last.and_then(|t| t.finished_at.clone()), secs(6));
    assert_eq!(
        last.and_then(|t| t.container_id.clone()),
        Some(crate::ids::container_id("uid-web-1", "app", 0))
    );
    let e = eval(&web(), &c, &facts(), S(15));
    let s = &e.status;
    let app = container(s, "app");
    assert_eq!(waiting_reason(app), Some("CrashLoopBackOff"));
    assert_eq!(
        app.state
            .as_ref()
            .and_then(|st| st.waiting.as_ref())
            .and_then(|w| w.message.as_deref()),
        Some("back-off 10s restarting failed container=app pod=web-1_default(uid-web-1)")
    );
    assert_eq!(app.restart_count, 1);
    assert!(!app.ready);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(
        cond(s, "ContainersReady").message.as_deref(),
        Some("containers with unready status: [app]")
    );
    assert_eq!(e.next_change, Some(at(S(21))));
    // Much later the count keeps growing and the message shows the 5 min cap.
    let e = eval(&web(), &c, &facts(), S(3600));
    let app = container(&e.status, "app");
    assert!(app.restart_count >= 10, "{}", app.restart_count);
    let e2 = eval(&web(), &c, &facts(), S(7200));
    assert!(container(&e2.status, "app").restart_count > app.restart_count);
}

#[test]
fn pods_turn_not_ready() {
    let c = cfg("rules: [{name: flaky, match: {labels: {app: web}}, notReady: {after: 10s}}]");
    let e = eval(&web(), &c, &facts(), S(5));
    assert_eq!(cond(&e.status, "Ready").status, "True");
    assert_eq!(e.next_change, Some(at(S(11))));
    let e = eval(&web(), &c, &facts(), S(12));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(cond(s, "Ready").last_transition_time, secs(11));
    assert!(!container(s, "app").ready);
    assert!(container(s, "app")
        .state
        .as_ref()
        .is_some_and(|st| st.running.is_some()));
    assert_eq!(e.next_change, None);
}

fn job(policy: &str) -> KubeletPod {
    pod(json!({
        "metadata": {"name": "job-1", "namespace": "default", "uid": "u-job", "labels": {"job": "true"}},
        "spec": {"restartPolicy": policy, "containers": [{"name": "work", "image": "busybox"}]}
    }))
}

#[test]
fn never_pods_complete_succeeded() {
    let c = cfg("rules: [{name: job, match: {labels: {job: 'true'}}, complete: {after: 10s}}]");
    let e = eval(&job("Never"), &c, &facts(), S(5));
    assert_eq!(e.status.phase.as_deref(), Some("Running"));
    assert_eq!(e.next_change, Some(at(S(11))));
    let e = eval(&job("Never"), &c, &facts(), S(12));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let work = terminated(container(s, "work"));
    assert_eq!(work.map(|t| t.exit_code), Some(0));
    assert_eq!(work.and_then(|t| t.reason.as_deref()), Some("Completed"));
    assert_eq!(work.and_then(|t| t.started_at.clone()), secs(1));
    assert_eq!(work.and_then(|t| t.finished_at.clone()), secs(11));
    assert_eq!(cond(s, "Ready").reason.as_deref(), Some("PodCompleted"));
    assert_eq!(
        cond(s, "ContainersReady").reason.as_deref(),
        Some("PodCompleted")
    );
    assert_eq!(cond(s, "PodReadyToStartContainers").status, "False");
    assert_eq!(
        cond(s, "PodReadyToStartContainers").last_transition_time,
        secs(11)
    );
    assert_eq!(
        s.pod_ip.as_deref(),
        Some("10.244.3.7"),
        "a finished pod keeps its IP"
    );
    assert_eq!(e.next_change, None);
    assert!(!e.delete_now);
}

#[test]
fn never_pods_complete_failed() {
    let c = cfg("rules: [{match: {labels: {job: 'true'}}, complete: {after: 3s, phase: Failed}}]");
    let e = eval(&job("Never"), &c, &facts(), S(10));
    assert_eq!(e.status.phase.as_deref(), Some("Failed"));
    let work = terminated(container(&e.status, "work"));
    assert_eq!(work.map(|t| t.exit_code), Some(1));
    assert_eq!(work.and_then(|t| t.reason.as_deref()), Some("Error"));
    assert_eq!(container(&e.status, "work").restart_count, 0);
}

#[test]
fn on_failure_restarts_only_failures() {
    let ok = cfg("rules: [{match: {labels: {job: 'true'}}, complete: {after: 3s}}]");
    assert_eq!(
        eval(&job("OnFailure"), &ok, &facts(), S(10))
            .status
            .phase
            .as_deref(),
        Some("Succeeded")
    );
    let bad =
        cfg("rules: [{match: {labels: {job: 'true'}}, complete: {after: 3s, phase: Failed}}]");
    let e = eval(&job("OnFailure"), &bad, &facts(), S(10));
    assert_eq!(e.status.phase.as_deref(), Some("Running"));
    assert!(container(&e.status, "work").restart_count >= 1);
    // Under Always even a clean exit is restarted.
    let e = eval(&job("Always"), &ok, &facts(), S(10));
    assert_eq!(e.status.phase.as_deref(), Some("Running"));
    assert!(container(&e.status, "work").restart_count >= 1);
}

#[test]
fn failing_init_container_under_never_fails_the_pod() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u-f"},
        "spec": {"restartPolicy": "Never",
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "nginx"}]}
    }));
    let c = cfg("rules: [{match: {image: busybox}, crashLoop: {runFor: 2s}}]");
    let e = eval(&p, &c, &facts(), S(10));
    assert_eq!(e.status.phase.as_deref(), Some("Failed"));
    assert_eq!(
        waiting_reason(container(&e.status, "app")),
        Some("PodInitializing")
    );
    assert_eq!(e.next_change, None);
    // Under Always the init container crash-loops and the pod stays Pending.
    let mut p2 = p.clone();
    if let Some(spec) = p2.spec.as_mut() {
        spec.restart_policy = Some("Always".into());
    }
    let e = eval(&p2, &c, &facts(), S(20));
    assert_eq!(e.status.phase.as_deref(), Some("Pending"));
    assert_eq!(
        waiting_reason(container(&e.status, "setup")),
        Some("CrashLoopBackOff")
    );
}

fn gated(conditions: serde_json::Value) -> KubeletPod {
    pod(json!({
        "metadata": {"name": "g", "namespace": "default", "uid": "u-g"},
        "spec": {"readinessGates": [{"conditionType": "example.com/lb"}],
                 "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"conditions": conditions}
    }))
}

#[test]
fn readiness_gates_hold_ready_back() {
    let e = eval(&gated(json!([])), &cfg(""), &facts(), S(5));
    let s = &e.status;
    assert_eq!(cond(s, "ContainersReady").status, "True");
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(
        cond(s, "Ready").reason.as_deref(),
        Some("ReadinessGatesNotReady")
    );
    assert_eq!(
        cond(s, "Ready").message.as_deref(),
        Some("corresponding condition of pod readiness gate \"example.com/lb\" does not exist.")
    );
    let e = eval(
        &gated(json!([{"type": "example.com/lb", "status": "False"}])),
        &cfg(""),
        &facts(),
        S(5),
    );
    assert_eq!(
        cond(&e.status, "Ready").message.as_deref(),
        Some("the status of pod readiness gate \"example.com/lb\" is not \"True\", but False")
    );
    assert_eq!(
        cond(&e.status, "example.com/lb").status,
        "False",
        "kept as is"
    );
    let e = eval(
        &gated(json!([{"type": "example.com/lb", "status": "True"}])),
        &cfg(""),
        &facts(),
        S(5),
    );
    assert_eq!(cond(&e.status, "Ready").status, "True");
    // Told to satisfy gates, the fake kubelet sets them itself.
    let e = eval(
        &gated(json!([])),
        &cfg("satisfyReadinessGates: true"),
        &facts(),
        S(5),
    );
    assert_eq!(cond(&e.status, "example.com/lb").status, "True");
    assert_eq!(cond(&e.status, "Ready").status, "True");
}

#[test]
fn foreign_conditions_survive() {
    let p = gated(json!([{"type": "DisruptionTarget", "status": "True", "reason": "X"}]));
    let e = eval(&p, &cfg(""), &facts(), S(5));
    assert_eq!(
        cond(&e.status, "DisruptionTarget").reason.as_deref(),
        Some("X")
    );
}

fn deleting(grace: u64) -> (KubeletPod, PodFacts) {
    let mut p = web();
    p.metadata.deletion_timestamp = Some(api_time(at(S(100 + grace))));
    p.metadata.deletion_grace_period_seconds = Some(grace as i64);
    let f = PodFacts {
        deletion_seen: Some(at(S(100))),
        ..facts()
    };
    (p, f)
}

#[test]
fn graceful_deletion_terminates_then_deletes_within_grace() {
    let (p, f) = deleting(30);
    let c = cfg("");
    let before = eval(&p, &c, &f, Duration::from_millis(100_500));
    assert_eq!(before.status.phase.as_deref(), Some("Running"));
    assert!(!before.delete_now);
    assert_eq!(before.next_change, Some(at(S(101))));
    let e = eval(&p, &c, &f, S(101));
    let s = &e.status;
    assert!(e.delete_now);
    assert_eq!(e.next_change, None);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    for name in ["app", "side"] {
        let cs = container(s, name);
        let term = terminated(cs);
        assert_eq!(term.map(|t| t.exit_code), Some(0));
        assert_eq!(term.and_then(|t| t.started_at.clone()), secs(1));
        assert_eq!(term.and_then(|t| t.finished_at.clone()), secs(101));
        assert_eq!(
            term.and_then(|t| t.container_id.clone()),
            cs.container_id.clone()
        );
        assert!(!cs.ready);
    }
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(cond(s, "Ready").last_transition_time, secs(101));
}

#[test]
fn termination_is_capped_to_half_the_grace_period() {
    let (p, f) = deleting(2);
    let c = LifecycleConfig {
        termination_delay: Delay::fixed(S(60)),
        ..cfg("")
    };
    let e = eval(&p, &c, &f, S(101));
    assert!(e.delete_now, "exit at 100 + min(60, 2/2) = 101");
    let (p, f) = deleting(0);
    let e = eval(&p, &c, &f, S(100));
    assert!(e.delete_now);
}

#[test]
fn deleting_a_pending_pod_fails_it() {
    let (p, f) = deleting(30);
    let c = cfg("rules: [{match: {image: 'nginx*'}, imagePullError: {}}]");
    let e = eval(&p, &c, &f, S(102));
    assert!(e.delete_now);
    assert_eq!(e.status.phase.as_deref(), Some("Failed"));
    let app = terminated(container(&e.status, "app"));
    assert_eq!(app.map(|t| t.exit_code), Some(137));
    assert_eq!(
        app.and_then(|t| t.reason.as_deref()),
        Some("ContainerStatusUnknown")
    );
}

#[test]
fn no_ip_means_the_sandbox_never_becomes_ready() {
    let f = PodFacts {
        pod_ip: None,
        ..facts()
    };
    let e = eval(&web(), &cfg(""), &f, S(60));
    assert_eq!(e.status.phase.as_deref(), Some("Pending"));
    assert_eq!(e.status.pod_ip, None);
    assert_eq!(e.next_change, None);
}

#[test]
fn merge_keeps_transition_times_of_unchanged_conditions() {
    let c = cfg("");
    let first = eval(&web(), &c, &facts(), S(5)).status;
    // Re-evaluated by a restarted kubelet that accepted the pod later.
    let later = PodFacts {
        accepted: at(S(50)),
        ..facts()
    };
    let mut second = eval(&web(), &c, &later, S(60)).status;
    assert_ne!(second, first);
    merge_with_previous(&mut second, Some(&KubeletPodStatus::of(&first)));
    assert_eq!(second.start_time, first.start_time);
    assert_eq!(
        cond(&second, "Ready").last_transition_time,
        cond(&first, "Ready").last_transition_time
    );
    // Same container instance: same startedAt.
    assert_eq!(
        container(&second, "app").state,
        container(&first, "app").state
    );
    // A changed condition gets a new time.
    let mut third = eval(
        &web(),
        &cfg("rules: [{match: {labels: {app: web}}, notReady: {after: 20s}}]"),
        &facts(),
        S(30),
    )
    .status;
    merge_with_previous(&mut third, Some(&KubeletPodStatus::of(&first)));
    assert_eq!(cond(&third, "Ready").last_transition_time, secs(21));
}

#[test]
fn status_carries_the_api_qos_class() {
    // The classification itself is tested in `api::qos`; this checks the status reports it.
    let mut p = web();
    if let Some(spec) = p.spec.as_mut() {
        spec.containers.truncate(1);
        let resources = serde_json::from_value(json!({
            "requests": {"cpu": "1000m", "memory": "1024Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"}
        }))
        .ok();
        spec.containers[0].resources = api::qos::ContainerResources::of(resources.as_ref());
    }
    let e = eval(&p, &cfg(""), &facts(), S(5));
    assert_eq!(e.status.qos_class.as_deref(), Some("Guaranteed"));
    p.spec = None;
    let e = eval(&p, &cfg(""), &facts(), S(5));
    assert_eq!(e.status.qos_class.as_deref(), Some("BestEffort"));
}

/// A pod someone else set `Failed` (the API shows it) stays `Failed`: the containers stop when the
/// node saw it, the pod is not Ready, the setter's reason stays, and nothing changes afterwards; a
/// later deletion still ends with the final delete, in the same phase.
#[test]
fn a_terminal_phase_set_by_someone_else_is_kept() {
    let mut p = web();
    let c = cfg("");
    let running = eval(&p, &c, &facts(), S(50));
    assert_eq!(running.status.phase.as_deref(), Some("Running"));
    let mut shown = running.status.clone();
    shown.phase = Some("Failed".into());
    shown.reason = Some("Evicted".into());
    p.status = Some(KubeletPodStatus::of(&shown));
    let f = PodFacts {
        terminal_seen: Some(at(S(60))),
        ..facts()
    };
    let e = eval(&p, &c, &f, S(70));
    let s = &e.status;
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    assert_eq!(e.next_change, None);
    assert!(!e.delete_now);
    for name in ["app", "side"] {
        let cs = container(s, name);
        assert_eq!(terminated(cs).and_then(|t| t.finished_at.clone()), secs(60));
        assert!(!cs.ready);
    }
    assert_eq!(cond(s, "Ready").status, "False");
    assert_eq!(cond(s, "Ready").reason.as_deref(), Some("PodCompleted"));
    assert_eq!(cond(s, "Ready").last_transition_time, secs(60));
    assert_eq!(eval(&p, &c, &f, S(500)).status, e.status);

    // Deleted afterwards: the pod waits out the termination, then is deleted, still Failed.
    p.metadata.deletion_timestamp = Some(api_time(at(S(130))));
    let f = PodFacts {
        deletion_seen: Some(at(S(100))),
        ..f
    };
    let waiting = eval(&p, &c, &f, S(100));
    assert_eq!(waiting.status.phase.as_deref(), Some("Failed"));
    assert_eq!(waiting.next_change, Some(at(S(101))));
    let done = eval(&p, &c, &f, S(101));
    assert!(done.delete_now);
    assert_eq!(done.status.phase.as_deref(), Some("Failed"));
}
