//! The minik8s controller manager: the replication controller (ReplicaSet and ReplicationController),
//! the deployment controller, the garbage collector, the pod garbage collector, the namespace
//! lifecycle controller, the CronJob controller, the Job controller, the TTL-after-finished controller, the service account controller, the root CA certificate publisher, the
//! scheduler and the node lifecycle controller, all consuming the API over HTTP through the `client` crate's informers, each run by the `client` crate's [`client::Runner`]
//! (wait for the caches, N workers or a periodic pass, drain on shutdown).
//!
//! Every decision a controller makes is a pure function in its own module (tested with a fake clock);
//! the controller modules only read caches, call those functions and issue the resulting requests.

pub mod cached_pod;
pub mod clientbuilder;
pub mod clock;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod endpointutil;
pub mod error;
pub mod gc;
pub mod history;
pub mod interned;
pub mod job;
pub mod manager;
pub mod metrics;
pub mod namespace;
pub mod nodelifecycle;

pub mod pod_util;
pub mod podgc;
pub mod replication;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod scheduler;
pub mod serviceaccount;
pub mod servicecidrs;
pub mod statefulset;
pub mod tainteviction;
pub mod ttlafterfinished;
pub mod volume;
pub mod volume_protection;

pub use error::{Error, Result};

pub use manager::{run, ControllerManagerConfig, EnabledControllers};
