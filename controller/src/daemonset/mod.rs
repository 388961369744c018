//! The DaemonSet controller (kube-controller-manager's `daemonset-controller`, alias
//! `daemonset`; upstream `pkg/controller/daemon`, 1.33).
//!
//! Each DaemonSet is a key. A sync:
//!
//! 1. constructs the history ([`history`]): the ControllerRevision holding the current template
//!    (created, renumbered or deduplicated as needed) gives the hash new pods are labelled with
//!    (`controller-revision-hash`, next to `pod-template-generation`);
//! 2. once the creates and deletes of the previous sync have been observed (expectations),
//!    manages the pods: one on every node that should run it ([`placement`]: the template's
//!    node name, node selector and required node affinity, taints against its tolerations plus
//!    the automatic DaemonSet ones), none elsewhere; failed pods are deleted (and so replaced)
//!    after a per-node back-off of 1 s doubling to 15 min ([`backoff`]); new pods are pinned to
//!    their node with a required node affinity `matchFields metadata.name In [node]` and bound
//!    by the scheduler;
//! 3. with `RollingUpdate`, deletes old pods within `maxUnavailable`, or with `maxSurge` creates
//!    new pods beside old ones and deletes the old once the new are available; `OnDelete`
//!    leaves old pods until someone deletes them;
//! 4. deletes old revisions beyond `revisionHistoryLimit` that no pod uses;
//! 5. writes the status (desired/current/misscheduled/ready/updated/available/unavailable,
//!    observedGeneration; collisionCount on a hash collision).
//!
//! The decisions are pure and unit-tested: [`placement`], [`decide`] (per-node pods, rolling
//! update, status counts), [`revisions`] and [`backoff`]. [`controller`] holds the informers,
//! the queue and the event handlers; the sync's steps are `sync` and `history`.

pub mod backoff;
pub mod controller;
pub mod decide;
#[cfg(test)]
mod decide_tests;
mod history;
pub mod placement;
pub mod revisions;
mod sync;

pub use controller::DaemonSetsController;
