//! The events a kubelet records, as values: reasons, types and messages of
//! `pkg/kubelet/events/event.go`, `kuberuntime_container.go`, `kuberuntime_manager.go`,
//! `images/image_manager.go`, `kubelet_node_status.go` and `nodestatus/setters.go` (1.33).
//!
//! The fake kubelet evaluates a pod's status as a pure function of time ([`crate::pod_status`]);
//! this module turns the *difference* between two evaluations into the events a kubelet would
//! have recorded in between ([`container_events`]): a container instance that started since the
//! last look was pulled (`Pulling`/`Pulled`, or `Pulled` "already present" per
//! `imagePullPolicy` and the node's images), created and started; a container that entered
//! `CrashLoopBackOff` gets `BackOff`; image-pull failures get `Failed` and `BackOff`; a pod seen
//! deleting gets `Killing` for each container that runs. What was last seen per container is a
//! [`ContainerMark`], derived from a `ContainerStatus`, so a kubelet restart (marks rebuilt from
//! the API status) repeats nothing.
//!
//! Node events: `Starting` and `NodeAllocatableEnforced` when a kubelet starts, and one event per
//! node condition that is new or changed status ([`node_condition_events`]), with the message
//! `Node <name> status is now: <reason>`. The involved object is the Node with `uid` = its name,
//! as the kubelet's `nodeRef`.
//!
//! Pure functions, no I/O; the runtime hands the results to its per-node recorder.

use k8s_openapi::api::core::v1::{ContainerStatus, NodeCondition, ObjectReference, PodStatus};

use crate::ids::{hex_digest, ImageRef};
use crate::transform::{KubeletContainer, KubeletPod};

/// `events.PullingImage`.
pub const PULLING: &str = "Pulling";
/// `events.PulledImage`.
pub const PULLED: &str = "Pulled";
/// `events.CreatedContainer`.
pub const CREATED: &str = "Created";
/// `events.StartedContainer`.
pub const STARTED: &str = "Started";
/// `events.KillingContainer`.
pub const KILLING: &str = "Killing";
/// `events.BackOffStartContainer` and `events.BackOffPullImage`.
pub const BACK_OFF: &str = "BackOff";
/// `events.FailedToPullImage` and the `Error: …` event of a container that cannot start.
pub const FAILED: &str = "Failed";
/// `events.StartingKubelet`.
pub const STARTING: &str = "Starting";
/// `events.NodeAllocatableEnforced`.
pub const NODE_ALLOCATABLE_ENFORCED: &str = "NodeAllocatableEnforced";

/// `v1.EventTypeNormal` / `v1.EventTypeWarning` of one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

/// One event to record about a pod's container (or the pod, `field_path: None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEvent {
    pub field_path: Option<String>,
    pub severity: Severity,
    pub reason: &'static str,
    pub message: String,
}

/// `kubecontainer.GenerateContainerRef`: the pod, with the container's field path.
pub fn pod_ref(pod: &KubeletPod, field_path: Option<&str>) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".to_string()),
        api_version: Some("v1".to_string()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: field_path.map(str::to_string),
    }
}

/// The kubelet's `nodeRef`: kind Node, the node's name as its UID, no namespace.
pub fn node_ref(node: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".to_string()),
        name: Some(node.to_string()),
        uid: Some(node.to_string()),
        ..Default::default()
    }
}

/// `spec.containers{web}` / `spec.initContainers{setup}`.
pub fn field_path(container: &str, init: bool) -> String {
    if init {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

/// `format.Pod`: `name_namespace(uid)`.
pub fn format_pod(name: &str, namespace: &str, uid: &str) -> String {
    format!("{name}_{namespace}({uid})")
}

/// `Pulling image "nginx"`.
pub fn pulling_message(image: &str) -> String {
    format!("Pulling image \"{image}\"")
}

/// `Successfully pulled image "nginx" in 0s (0s including waiting). Image size: N bytes.` The
/// simulated pull takes no time of the pod's timeline, so both durations are Go's zero `0s`.
pub fn pulled_message(image: &str) -> String {
    format!(
        "Successfully pulled image \"{image}\" in 0s (0s including waiting). Image size: {} bytes.",
        image_size(image)
    )
}

/// `Container image "nginx:1.27" already present on machine`.
pub fn present_message(image: &str) -> String {
    format!("Container image \"{image}\" already present on machine")
}

/// `Created container: web` (1.33's wording, with the colon).
pub fn created_message(container: &str) -> String {
    format!("Created container: {container}")
}

/// `Started container web`.
pub fn started_message(container: &str) -> String {
    format!("Started container {container}")
}

/// `Stopping container web`.
pub fn killing_message(container: &str) -> String {
    format!("Stopping container {container}")
}

/// `Back-off restarting failed container web in pod web-0_default(uid)`.
pub fn back_off_message(container: &str, pod: &str) -> String {
    format!("Back-off restarting failed container {container} in pod {pod}")
}

/// A stable, plausible image size (2–200 MB) per image reference.
pub fn image_size(image: &str) -> u64 {
    let normalized = ImageRef::parse(image).status_image();
    let digest = hex_digest(&[b"size", normalized.as_bytes()]);
    let bits = u64::from_str_radix(&digest[..12], 16).unwrap_or(0);
    2_000_000 + bits % 198_000_000
}

/// The effective `imagePullPolicy`: the spec's, else the API default (`Always` for `:latest` or
/// untagged images, `IfNotPresent` otherwise).
pub fn pull_policy<'a>(spec_policy: Option<&'a str>, image: &str) -> &'a str {
    match spec_policy {
        Some(p) if !p.is_empty() => p,
        _ => {
            let r = ImageRef::parse(image);
            if r.digest.is_none() && r.tag == "latest" {
                "Always"
            } else {
                "IfNotPresent"
            }
        }
    }
}

/// What the kubelet last did with one container, as far as events go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerMark {
    /// The restart count of the newest instance that was started (`None`: never started).
    pub started: Option<i32>,
    /// That instance is running.
    pub running: bool,
    /// The container waits: in crash-loop back-off, or for its image.
    pub waiting: Waiting,
}

/// The waiting reasons that carry events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Waiting {
    #[default]
    None,
    CrashLoopBackOff,
    ErrImagePull,
    ImagePullBackOff,
}

impl ContainerMark {
    /// The mark of a reported container status.
    pub fn of(s: &ContainerStatus) -> Self {
        let state = s.state.as_ref();
        let running = state.is_some_and(|st| st.running.is_some());
        let waiting_reason = state
            .and_then(|st| st.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        let waiting = match waiting_reason {
            Some("CrashLoopBackOff") => Waiting::CrashLoopBackOff,
            Some("ErrImagePull") => Waiting::ErrImagePull,
            Some("ImagePullBackOff") => Waiting::ImagePullBackOff,
            _ => Waiting::None,
        };
        // An instance ran if it has an ID: running, terminated, or the last one before back-off.
        let started = s.container_id.as_ref().map(|_| s.restart_count);
        ContainerMark {
            started,
            running,
            waiting,
        }
    }
}

/// One container as the event diff sees it.
pub struct ContainerView<'a> {
    pub name: &'a str,
    pub image: &'a str,
    pub init: bool,
    /// Its effective `imagePullPolicy`.
    pub pull_policy: &'a str,
    /// The message of the current `ErrImagePull`, if that is its state.
    pub pull_error: Option<&'a str>,
}

/// The events for one container between two looks (`before`, `now`); `image_present` says
/// whether the node has the image (and is told when it pulled it). `pod` is [`format_pod`]'s.
pub fn container_events(
    c: &ContainerView<'_>,
    before: ContainerMark,
    now: ContainerMark,
    pod: &str,
    image_present: &mut dyn FnMut(&str, bool) -> bool,
) -> Vec<PodEvent> {
    let path = field_path(c.name, c.init);
    let ev = |severity, reason, message| PodEvent {
        field_path: Some(path.clone()),
        severity,
        reason,
        message,
    };
    let mut out = Vec::new();
    if now.started.is_some() && now.started > before.started {
        // `EnsureImageExists`, then create and start.
        let present = image_present(c.image, false);
        let pull = match c.pull_policy {
            "Always" => true,
            "Never" => false,
            _ => !present,
        };
        if pull {
            out.push(ev(Severity::Normal, PULLING, pulling_message(c.image)));
            out.push(ev(Severity::Normal, PULLED, pulled_message(c.image)));
            image_present(c.image, true);
        } else {
            out.push(ev(Severity::Normal, PULLED, present_message(c.image)));
        }
        out.push(ev(Severity::Normal, CREATED, created_message(c.name)));
        out.push(ev(Severity::Normal, STARTED, started_message(c.name)));
    }
    if now.waiting != before.waiting || now.started != before.started {
        match now.waiting {
            Waiting::CrashLoopBackOff => out.push(ev(
                Severity::Warning,
                BACK_OFF,
                back_off_message(c.name, pod),
            )),
            Waiting::ErrImagePull => {
                out.push(ev(Severity::Normal, PULLING, pulling_message(c.image)));
                out.push(ev(
                    Severity::Warning,
                    FAILED,
                    format!(
                        "Failed to pull image \"{}\": {}",
                        c.image,
                        c.pull_error.unwrap_or_default()
                    ),
                ));
                out.push(ev(
                    Severity::Warning,
                    FAILED,
                    "Error: ErrImagePull".to_string(),
                ));
            }
            Waiting::ImagePullBackOff => {
                out.push(ev(
                    Severity::Normal,
                    BACK_OFF,
                    format!("Back-off pulling image \"{}\"", c.image),
                ));
                out.push(ev(
                    Severity::Warning,
                    FAILED,
                    "Error: ImagePullBackOff".to_string(),
                ));
            }
            Waiting::None => {}
        }
    }
    out
}

/// `Killing` for a container of a pod being deleted, if it was running.
pub fn killing_event(
    name: &str,
    init: bool,
    before: ContainerMark,
    now: ContainerMark,
) -> Option<PodEvent> {
    (before.running || now.running).then(|| PodEvent {
        field_path: Some(field_path(name, init)),
        severity: Severity::Normal,
        reason: KILLING,
        message: killing_message(name),
    })
}

/// What was last seen of every container of a pod (init containers first, in spec order), and
/// whether its deletion was acted on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodMarks {
    containers: Vec<ContainerMark>,
    killed: bool,
}

fn spec_containers(pod: &KubeletPod) -> impl Iterator<Item = (&KubeletContainer, bool)> {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let regular = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    init.iter()
        .map(|c| (c, true))
        .chain(regular.iter().map(|c| (c, false)))
}

fn status_of<'a>(status: &'a PodStatus, name: &str, init: bool) -> Option<&'a ContainerStatus> {
    let list = if init {
        status.init_container_statuses.as_deref()
    } else {
        status.container_statuses.as_deref()
    };
    list.unwrap_or_default().iter().find(|s| s.name == name)
}

impl PodMarks {
    /// The marks of a pod as its status reports it (what an earlier run of this kubelet did).
    pub fn of(pod: &KubeletPod) -> Self {
        let shown = pod.status.as_ref();
        PodMarks {
            containers: spec_containers(pod)
                .map(|(c, init)| {
                    shown
                        .and_then(|s| s.container(&c.name, init))
                        .map(|c| c.mark)
                        .unwrap_or_default()
                })
                .collect(),
            killed: false,
        }
    }

    /// The events between the last look and `status` (the pod's status now), and the marks
    /// moved on. `deleting`: the pod is being stopped — its deletion was seen, or the API shows
    /// it terminal (its running containers are killed, once). `image_present` as for
    /// [`container_events`].
    pub fn advance(
        &mut self,
        pod: &KubeletPod,
        status: &PodStatus,
        deleting: bool,
        image_present: &mut dyn FnMut(&str, bool) -> bool,
    ) -> Vec<PodEvent> {
        let formatted = format_pod(
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.uid.as_deref().unwrap_or_default(),
        );
        let kill = deleting && !self.killed;
        let mut out = Vec::new();
        let mut killing = Vec::new();
        for (i, (c, init)) in spec_containers(pod).enumerate() {
            let cs = status_of(status, &c.name, init);
            let now = cs.map(ContainerMark::of).unwrap_or_default();
            let before = self.containers.get(i).copied().unwrap_or_default();
            let image = c.image.as_deref().unwrap_or_default();
            let view = ContainerView {
                name: &c.name,
                image,
                init,
                pull_policy: pull_policy(c.image_pull_policy.as_deref(), image),
                pull_error: cs
                    .and_then(|s| s.state.as_ref())
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.message.as_deref()),
            };
            out.extend(container_events(
                &view,
                before,
                now,
                &formatted,
                image_present,
            ));
            if kill {
                killing.extend(killing_event(&c.name, init, before, now));
            }
            match self.containers.get_mut(i) {
                Some(m) => *m = now,
                None => self.containers.push(now),
            }
        }
        self.killed |= deleting;
        out.extend(killing);
        out
    }
}

/// The setters' event reason for a node condition in a status (`None`: not a condition the
/// kubelet records events for, or an unknown status).
pub fn node_condition_reason(type_: &str, status: &str) -> Option<&'static str> {
    Some(match (type_, status) {
        ("MemoryPressure", "False") => "NodeHasSufficientMemory",
        ("MemoryPressure", "True") => "NodeHasInsufficientMemory",
        ("DiskPressure", "False") => "NodeHasNoDiskPressure",
        ("DiskPressure", "True") => "NodeHasDiskPressure",
        ("PIDPressure", "False") => "NodeHasSufficientPID",
        ("PIDPressure", "True") => "NodeHasInsufficientPID",
        ("Ready", "True") => "NodeReady",
        ("Ready", "False") => "NodeNotReady",
        _ => return None,
    })
}

/// `Node node-0 status is now: NodeReady` (`recordNodeStatusEvent`).
pub fn node_status_message(node: &str, reason: &str) -> String {
    format!("Node {node} status is now: {reason}")
}

/// The (reason, message) of every condition in `desired` that is new or changed status against
/// `previous`, in `desired`'s order (the setters': memory, disk, PID, ready).
pub fn node_condition_events(
    node: &str,
    previous: &[NodeCondition],
    desired: &[NodeCondition],
) -> Vec<(&'static str, String)> {
    desired
        .iter()
        .filter(|d| {
            !previous
                .iter()
                .any(|p| p.type_ == d.type_ && p.status == d.status)
        })
        .filter_map(|d| node_condition_reason(&d.type_, &d.status))
        .map(|reason| (reason, node_status_message(node, reason)))
        .collect()
}

/// `Starting kubelet.`
pub const STARTING_MESSAGE: &str = "Starting kubelet.";
/// The container manager's message once it enforced node allocatable.
pub const NODE_ALLOCATABLE_MESSAGE: &str = "Updated Node Allocatable limit across pods";

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
