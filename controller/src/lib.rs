//! The minik8s controller manager: the replication controller (ReplicaSet and ReplicationController),
//! the garbage collector, the namespace lifecycle controller, the scheduler and the node lifecycle
//! controller, all consuming the API over HTTP through the `client` crate's informers.
//!
//! Every decision a controller makes is a pure function in its own module (tested with a fake clock);
//! the controller modules only read caches, call those functions and issue the resulting requests.

pub mod clock;
pub mod deployment;
pub mod error;
pub mod gc;
pub mod manager;
pub mod metrics;
pub mod namespace;
pub mod nodelifecycle;
pub mod pod_util;
pub mod replication;
pub mod scheduler;

pub use error::{Error, Result};

/// Run one unit of work, turning a panic into [`Error::Panicked`] so a worker survives it and the
/// work-queue key is still marked done (a panicking key would otherwise be stuck "processing").
pub(crate) async fn guarded<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(_) => Err(Error::Panicked),
    }
}
pub use manager::{run, ControllerManagerConfig, EnabledControllers};
