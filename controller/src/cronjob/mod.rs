//! The CronJob controller (kube-controller-manager's `cronjob-controller`, alias `cronjob`;
//! upstream `pkg/controller/cronjob/cronjob_controllerv2.go` and `utils.go`, 1.33).
//!
//! Each CronJob is a key; a sync reconciles its `status.active` with the Jobs it controls (finished
//! ones leave the list with a `SawCompletedJob` event and advance `lastSuccessfulTime`, vanished ones
//! with `MissingJob`), then, unless it is suspended or being deleted, starts the Job of the most
//! recent missed schedule time (named `<cronjob>-<minutes since the epoch>`, so a time is never
//! started twice) as `concurrencyPolicy` allows, trims the finished Jobs beyond the history limits,
//! writes the status and asks to be woken at the next schedule time.
//!
//! [`decide`] holds the time arithmetic and the Job built from the template as pure functions;
//! [`controller`] reads the caches, issues the requests and records upstream's events.

pub mod controller;
pub mod decide;

pub use controller::CronJobController;
