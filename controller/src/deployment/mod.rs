//! Deployment controller (issue 8): Deployments own ReplicaSets named `<deployment>-<pod-template-hash>`
//! and roll pods from one template to the next (`RollingUpdate` within maxSurge/maxUnavailable, or
//! `Recreate`), as Kubernetes' `pkg/controller/deployment` does.
//!
//! - [`util`]: the pure arithmetic (template hash, fenceposts, revisions, rolling scale steps);
//! - [`progress`]: status counts and the `Progressing` / `Available` conditions (fake-clock tested);
//! - [`controller`]: informers, handlers, work queue, `syncDeployment` and ReplicaSet claiming;
//! - `sync`, `rolling`, `recreate`: the steps of a sync and the two strategies (upstream's
//!   `sync.go`, `rolling.go`, `recreate.go`), as `impl` blocks of the controller's state.
//!
//! Guarantees: a sync acts only on caches that synced; RS writes carry the cached resourceVersion so
//! a stale view ends in a conflict and a retry, never in more than `replicas + maxSurge` desired
//! replicas or fewer than `replicas - maxUnavailable` available ones (given up-to-date RS status).

pub mod controller;
pub mod progress;
mod recreate;
mod rolling;
mod sync;
pub mod util;

#[cfg(test)]
mod scale_tests;

pub use controller::DeploymentController;
