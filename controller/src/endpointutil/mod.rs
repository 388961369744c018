//! What the endpoints, EndpointSlice and EndpointSlice-mirroring controllers share (upstream
//! `k8s.io/endpointslice/util`, `pkg/api/v1/pod.FindPort`, `pkg/controller/util/endpoint`).
//!
//! - [`pod`]: which pods belong in a Service's endpoints, their address for a family, named target
//!   ports resolved per pod, the hostname rule, and which Services a pod event concerns (the
//!   Service informer's selectors against the pod's labels, old and new).
//! - [`trigger_time`]: the `endpoints.kubernetes.io/last-change-trigger-time` bookkeeping.
//! - [`endpoint_set`]: EndpointSlice endpoints keyed as upstream hashes them (addresses, hostname,
//!   target pod), port groups keyed by their sorted ports, and the "equal beyond the key" check that
//!   lets a reconciler update a slice in place rather than move an endpoint.
//! - [`slice_tracker`]: the generations of the slices a controller wrote, so a sync never acts on
//!   a cache older than its own writes, and so its own writes' events do not trigger more syncs.
//!
//! Everything here is pure or guarded by one short-held lock; nothing does I/O.

pub mod endpoint_set;
pub mod pod;
pub mod slice_tracker;
pub mod trigger_time;

/// `discovery.LabelServiceName`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `discovery.LabelManagedBy`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `discovery.LabelSkipMirror`.
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// `v1.IsHeadlessService`: on the Endpoints and slices of a Service without a cluster IP.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// `v1.EndpointsLastChangeTriggerTime`.
pub const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// `resourcelock.LeaderElectionRecordAnnotationKey`: Endpoints used as a leader-election lock are
/// neither deleted nor mirrored.
pub const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
/// `v1.LastAppliedConfigAnnotation`, never mirrored.
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// `maxRetries` of the three controllers: a key failing this often is dropped until it changes.
pub const MAX_RETRIES: u32 = 15;

/// Whether a failed key is retried again (`queue.NumRequeues(key) < maxRetries`).
pub fn should_retry(requeues: u32) -> bool {
    requeues < MAX_RETRIES
}

/// Status cause type of a create refused in a terminating namespace (`v1.NamespaceTerminatingCause`).
pub fn is_namespace_terminating(e: &client::Error) -> bool {
    e.status()
        .and_then(|s| s.details.as_ref())
        .and_then(|d| d.causes.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.reason.as_deref() == Some("NamespaceTerminating"))
        })
}
