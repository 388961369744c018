use std::collections::HashSet;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, NodeCondition,
};

use super::*;

fn view<'a>(name: &'a str, image: &'a str, policy: &'a str, init: bool) -> ContainerView<'a> {
    ContainerView {
        name,
        image,
        init,
        pull_policy: policy,
        pull_error: None,
    }
}

fn started(n: i32, running: bool) -> ContainerMark {
    ContainerMark {
        started: Some(n),
        running,
        waiting: Waiting::None,
    }
}

fn reasons(evs: &[PodEvent]) -> Vec<&str> {
    evs.iter().map(|e| e.reason).collect()
}

/// An image store: `images` as present; pulls add to it.
fn store(images: &mut HashSet<String>) -> impl FnMut(&str, bool) -> bool + '_ {
    move |image, pulled| {
        if pulled {
            images.insert(image.to_string());
        }
        images.contains(image)
    }
}

#[test]
fn messages_are_the_kubelets() {
    assert_eq!(pulling_message("nginx"), "Pulling image \"nginx\"");
    let size = image_size("nginx");
    assert_eq!(
        pulled_message("nginx"),
        format!(
            "Successfully pulled image \"nginx\" in 0s (0s including waiting). Image size: {size} bytes."
        )
    );
    assert!((2_000_000..200_000_000).contains(&size));
    assert_eq!(size, image_size("docker.io/library/nginx:latest"));
    assert_ne!(size, image_size("busybox"));
    assert_eq!(
        present_message("nginx:1.27"),
        "Container image \"nginx:1.27\" already present on machine"
    );
    assert_eq!(created_message("web"), "Created container: web");
    assert_eq!(started_message("web"), "Started container web");
    assert_eq!(killing_message("web"), "Stopping container web");
    assert_eq!(
        back_off_message("web", &format_pod("web-0", "default", "u-1")),
        "Back-off restarting failed container web in pod web-0_default(u-1)"
    );
    assert_eq!(
        node_status_message("node-0", "NodeReady"),
        "Node node-0 status is now: NodeReady"
    );
    assert_eq!(STARTING_MESSAGE, "Starting kubelet.");
}

#[test]
fn references_are_the_kubelets() {
    let pod: KubeletPod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"}
    }))
    .unwrap_or_default();
    let r = pod_ref(&pod, Some(&field_path("app", false)));
    assert_eq!(r.kind.as_deref(), Some("Pod"));
    assert_eq!(r.api_version.as_deref(), Some("v1"));
    assert_eq!(r.field_path.as_deref(), Some("spec.containers{app}"));
    assert_eq!(r.resource_version.as_deref(), Some("7"));
    assert_eq!(field_path("setup", true), "spec.initContainers{setup}");
    let n = node_ref("node-3");
    assert_eq!(n.kind.as_deref(), Some("Node"));
    assert_eq!(n.uid.as_deref(), Some("node-3"));
    assert_eq!(n.namespace, None);
}

#[test]
fn pull_policy_defaults_like_the_api() {
    assert_eq!(pull_policy(None, "nginx"), "Always");
    assert_eq!(pull_policy(None, "nginx:latest"), "Always");
    assert_eq!(pull_policy(None, "nginx:1.27"), "IfNotPresent");
    assert_eq!(pull_policy(None, "nginx@sha256:abc"), "IfNotPresent");
    assert_eq!(pull_policy(Some("Never"), "nginx"), "Never");
}

#[test]
fn a_started_container_is_pulled_created_and_started() {
    let mut images = HashSet::new();
    let c = view("web", "nginx:1.27", "IfNotPresent", false);
    let evs = container_events(
        &c,
        ContainerMark::default(),
        started(0, true),
        "p",
        &mut store(&mut images),
    );
    assert_eq!(reasons(&evs), ["Pulling", "Pulled", "Created", "Started"]);
    assert!(evs.iter().all(|e| e.severity == Severity::Normal));
    assert!(evs
        .iter()
        .all(|e| e.field_path.as_deref() == Some("spec.containers{web}")));
    assert_eq!(evs[3].message, "Started container web");
    // The next pod on this node finds the image.
    let evs = container_events(
        &c,
        ContainerMark::default(),
        started(0, true),
        "q",
        &mut store(&mut images),
    );
    assert_eq!(reasons(&evs), ["Pulled", "Created", "Started"]);
    assert_eq!(
        evs[0].message,
        "Container image \"nginx:1.27\" already present on machine"
    );
    // `Always` pulls every time.
    let always = view("web", "nginx", "Always", true);
    let evs = container_events(
        &always,
        ContainerMark::default(),
        started(0, true),
        "q",
        &mut store(&mut images),
    );
    assert_eq!(reasons(&evs), ["Pulling", "Pulled", "Created", "Started"]);
    assert_eq!(
        evs[0].field_path.as_deref(),
        Some("spec.initContainers{web}")
    );
    // Nothing new: nothing recorded.
    let evs = container_events(
        &c,
        started(0, true),
        started(0, true),
        "q",
        &mut store(&mut images),
    );
    assert!(evs.is_empty());
}

#[test]
fn a_crash_loop_restarts_and_backs_off() {
    let mut images: HashSet<String> = ["app:1".to_string()].into();
    let c = view("app", "app:1", "IfNotPresent", false);
    let pod = format_pod("p", "d", "u");
    // Immediate first restart: a new instance, no back-off.
    let evs = container_events(
        &c,
        started(0, true),
        started(1, true),
        &pod,
        &mut store(&mut images),
    );
    assert_eq!(reasons(&evs), ["Pulled", "Created", "Started"]);
    // Exited into back-off.
    let backoff = ContainerMark {
        started: Some(1),
        running: false,
        waiting: Waiting::CrashLoopBackOff,
    };
    let evs = container_events(&c, started(1, true), backoff, &pod, &mut store(&mut images));
    assert_eq!(reasons(&evs), ["BackOff"]);
    assert_eq!(evs[0].severity, Severity::Warning);
    assert_eq!(
        evs[0].message,
        "Back-off restarting failed container app in pod p_d(u)"
    );
    // Still in the same back-off: nothing; the next back-off after another run: again.
    assert!(container_events(&c, backoff, backoff, &pod, &mut store(&mut images)).is_empty());
    let next = ContainerMark {
        started: Some(2),
        ..backoff
    };
    assert_eq!(
        reasons(&container_events(
            &c,
            backoff,
            next,
            &pod,
            &mut store(&mut images)
        )),
        ["Pulled", "Created", "Started", "BackOff"]
    );
}

#[test]
fn image_pull_failures_fail_and_back_off() {
    let mut images = HashSet::new();
    let mut c = view("app", "nope:1", "IfNotPresent", false);
    c.pull_error = Some("not found");
    let err = ContainerMark {
        waiting: Waiting::ErrImagePull,
        ..Default::default()
    };
    let evs = container_events(
        &c,
        ContainerMark::default(),
        err,
        "p",
        &mut store(&mut images),
    );
    assert_eq!(reasons(&evs), ["Pulling", "Failed", "Failed"]);
    assert_eq!(evs[1].message, "Failed to pull image \"nope:1\": not found");
    assert_eq!(evs[2].message, "Error: ErrImagePull");
    let back = ContainerMark {
        waiting: Waiting::ImagePullBackOff,
        ..Default::default()
    };
    let evs = container_events(&c, err, back, "p", &mut store(&mut images));
    assert_eq!(reasons(&evs), ["BackOff", "Failed"]);
    assert_eq!(evs[0].severity, Severity::Normal);
    assert_eq!(evs[0].message, "Back-off pulling image \"nope:1\"");
    assert_eq!(evs[1].message, "Error: ImagePullBackOff");
    assert!(images.is_empty());
}

#[test]
fn killing_only_for_running_containers() {
    let k = killing_event("web", false, started(0, true), started(0, false));
    assert_eq!(k.map(|e| e.message), Some("Stopping container web".into()));
    assert!(killing_event(
        "web",
        false,
        ContainerMark::default(),
        ContainerMark::default()
    )
    .is_none());
}

#[test]
fn marks_follow_container_statuses() {
    let running = ContainerStatus {
        name: "c".into(),
        container_id: Some("containerd://x".into()),
        restart_count: 2,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(ContainerMark::of(&running), started(2, true));
    let creating = ContainerStatus {
        name: "c".into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                message: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(ContainerMark::of(&creating), ContainerMark::default());
}

fn cond(type_: &str, status: &str) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        ..Default::default()
    }
}

#[test]
fn node_events_for_new_and_changed_conditions() {
    let desired = [
        cond("MemoryPressure", "False"),
        cond("DiskPressure", "False"),
        cond("PIDPressure", "False"),
        cond("Ready", "True"),
    ];
    let all = node_condition_events("n", &[], &desired);
    assert_eq!(
        all.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        [
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID",
            "NodeReady"
        ]
    );
    assert_eq!(all[3].1, "Node n status is now: NodeReady");
    assert!(node_condition_events("n", &desired, &desired).is_empty());
    // The node controller marked it Unknown while the kubelet was gone.
    let unknown = [cond("MemoryPressure", "False"), cond("Ready", "Unknown")];
    let back = node_condition_events("n", &unknown, &desired);
    assert_eq!(
        back.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        ["NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"]
    );
    assert_eq!(
        node_condition_reason("Ready", "False"),
        Some("NodeNotReady")
    );
    assert_eq!(node_condition_reason("NetworkUnavailable", "False"), None);
}

/// Walks a pod's simulated timeline the way the runtime does (evaluate, then look again at the
/// next change) and returns `(offset secs, reason, field path)` of every event.
fn walk(
    pod: &KubeletPod,
    cfg: &crate::LifecycleConfig,
    until: u64,
    delete_at: Option<u64>,
) -> Vec<(u64, &'static str, String)> {
    use crate::pod_status::{add, evaluate, PodFacts};
    use std::time::Duration;
    let t0 = k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap_or_default();
    let plan = crate::plan::PodPlan::resolve(cfg, pod);
    let mut marks = PodMarks::of(pod);
    let mut images = HashSet::new();
    let mut out = Vec::new();
    let mut now = Duration::ZERO;
    let mut pod = pod.clone();
    while now <= Duration::from_secs(until) {
        let deleting = delete_at.is_some_and(|d| now >= Duration::from_secs(d));
        if deleting && pod.metadata.deletion_timestamp.is_none() {
            pod.metadata.deletion_timestamp = Some(crate::pod_status::api_time(add(
                t0,
                now + Duration::from_secs(30),
            )));
        }
        let facts = PodFacts {
            accepted: t0,
            pod_ip: Some(std::net::Ipv4Addr::new(10, 0, 0, 2)),
            host_ip: std::net::Ipv4Addr::new(10, 1, 0, 1),
            deletion_seen: deleting
                .then(|| add(t0, Duration::from_secs(delete_at.unwrap_or_default()))),
            terminal_seen: None,
        };
        let e = evaluate(&pod, &plan, &facts, add(t0, now));
        for ev in marks.advance(&pod, &e.status, deleting, &mut store(&mut images)) {
            out.push((now.as_secs(), ev.reason, ev.field_path.unwrap_or_default()));
        }
        let next = match e.next_change {
            Some(t) => crate::pod_status::since(t, t0),
            None if delete_at.is_some_and(|d| Duration::from_secs(d) > now) => {
                Duration::from_secs(delete_at.unwrap_or_default())
            }
            None => break,
        };
        now = next.max(now + Duration::from_millis(1));
    }
    out
}

fn crash_pod() -> KubeletPod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "d", "uid": "u"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox:1"}],
            "containers": [{"name": "app", "image": "app:1"}]
        }
    }))
    .unwrap_or_default()
}

#[test]
fn a_crash_loop_timeline_records_the_kubelets_sequence() -> crate::Result<()> {
    let cfg = crate::LifecycleConfig::from_yaml(
        "podStartDelay: 1s\ninitContainerDuration: 2s\nrules: [{name: c, match: {image: 'app*'}, crashLoop: {runFor: 5s}}]",
    )?;
    let evs = walk(&crash_pod(), &cfg, 40, None);
    let seq: Vec<(u64, &str, &str)> = evs.iter().map(|(t, r, p)| (*t, *r, p.as_str())).collect();
    let init = "spec.initContainers{init}";
    let app = "spec.containers{app}";
    assert_eq!(
        seq,
        [
            // Init container at the sandbox (1 s), the app once it is done (3 s).
            (1, "Pulling", init),
            (1, "Pulled", init),
            (1, "Created", init),
            (1, "Started", init),
            (3, "Pulling", app),
            (3, "Pulled", app),
            (3, "Created", app),
            (3, "Started", app),
            // Exits at 8 s, restarted at once; exits at 13 s into a 10 s back-off.
            (8, "Pulled", app),
            (8, "Created", app),
            (8, "Started", app),
            (13, "BackOff", app),
            (23, "Pulled", app),
            (23, "Created", app),
            (23, "Started", app),
            (28, "BackOff", app),
        ]
    );
    Ok(())
}

#[test]
fn deleting_a_running_pod_kills_its_containers_once() -> crate::Result<()> {
    let cfg = crate::LifecycleConfig::from_yaml("podStartDelay: 1s\ninitContainerDuration: 2s")?;
    let evs = walk(&crash_pod(), &cfg, 60, Some(10));
    let killing: Vec<&(u64, &str, String)> =
        evs.iter().filter(|(_, r, _)| *r == "Killing").collect();
    assert_eq!(killing.len(), 1, "{evs:?}");
    assert_eq!(killing[0].0, 10);
    assert_eq!(killing[0].2, "spec.containers{app}");
    Ok(())
}
