//! `kubelet-fake`: any number of simulated nodes in one process, behaving towards the API like
//! real kubelets (the anchor is kwok).
//!
//! * [`config`]: the lifecycle configuration (YAML: delays with jitter, failure rules) — data, not
//!   code, like kwok's Stages. [`plan`] applies it to one pod.
//! * [`pod_status`]: the exact `PodStatus` of every stage as a pure function of time;
//!   [`backoff`] the kubelet's crash-loop and image-pull back-off; [`ipam`] pod IPs; [`ids`]
//!   deterministic container and image IDs.
//! * [`node`]: Node and Lease objects, the node status update rule, kubelet timing constants.
//! * [`runtime`]: [`FakeKubelets`] — one shared pod informer routed by `spec.nodeName`, one work
//!   queue with a bounded pool of status writers, one heartbeat wheel ([`heartbeat`]) for all
//!   nodes; [`metrics`] plain counters; [`events`] the kubelet's pod and node events;
//!   [`transform`] what its informer keeps of a pod.
//!
//! It talks to the apiserver only over HTTP, through the `client` crate.

pub mod backoff;
pub mod bench;
pub mod config;
pub mod container_status;
pub mod credentials;
pub mod error;
pub mod events;
pub mod heartbeat;
pub mod ids;
pub mod ipam;
pub mod kubelet_config;
pub mod metrics;
pub mod node;
pub mod plan;
pub mod pod_status;
mod recorder;
pub mod runtime;
pub mod transform;

pub use config::LifecycleConfig;
pub use credentials::NodeCredentials;
pub use error::{Error, Result};
pub use kubelet_config::KubeletConfig;
pub use metrics::KubeletMetrics;
pub use node::NodeTemplate;
pub use runtime::{FakeKubelets, NodeToggle};
