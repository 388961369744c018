//! The Job controller (kube-controller-manager's `job-controller`, alias `job`; upstream
//! `pkg/controller/job`, 1.33).
//!
//! Each Job is a key. A sync claims the Job's pods (adopting matching orphans with the
//! `batch.kubernetes.io/job-tracking` finalizer, releasing non-matching ones), works out whether
//! the Job is finishing (an earlier interim condition, a `FailJob` pod failure policy rule, the
//! back-off limit, `activeDeadlineSeconds`, failed indexes, the success policy, or all completions
//! done), then either deletes its active pods (finishing), deletes all of them (suspended) or
//! creates the missing ones (slow-start batches, after the pod-failure back-off: 10 s doubling up
//! to 10 min, measured on the injected clock), and finally counts finished pods:
//!
//! 1. their UIDs go into `status.uncountedTerminatedPods` (Indexed Jobs: their indexes into
//!    `completedIndexes`), with the interim `FailureTarget` / `SuccessCriteriaMet` condition,
//!    in one status write;
//! 2. their finalizers are removed;
//! 3. the UIDs move into `succeeded` / `failed`, and once nothing is uncounted and no pod is
//!    terminating, the terminal `Failed` / `Complete` condition (and `completionTime`) is added.
//!
//! So a pod is never counted twice nor lost, whatever crashes between the steps. Pods whose Job
//! is gone or finished lose their finalizer through a second queue (orphan pods).
//!
//! The decisions are pure functions, unit-tested without I/O: [`decide`] (conditions, pod
//! failure, back-off, the pod to create), [`indexed`] (Indexed Jobs, success policy),
//! [`counting`] (which finished pods are counted and unfinalized), on the interval sets of
//! [`indexes`]. [`controller`] holds the informers, queues and event handlers; the sync's steps
//! are `sync` (context, finishing decision, claiming pods), `manage` (creating and deleting pods)
//! and `tracking` (the counting protocol's writes).

pub mod controller;
pub mod counting;
pub mod decide;
pub mod indexed;
pub mod indexes;
mod manage;
mod sync;
mod tracking;

pub use controller::JobController;
