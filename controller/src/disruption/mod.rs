//! The disruption controller (`disruption`, canonical name `disruption-controller`; upstream
//! `pkg/controller/disruption`, 1.33): keeps every PodDisruptionBudget's status
//! (`currentHealthy`, `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods`,
//! `observedGeneration` and the `DisruptionAllowed` condition) up to date with its pods, so that
//! the apiserver's eviction subresource (`kubectl drain`) can honour the budget.
//!
//! [`decide`] holds the pure status computation, [`finder`] the lookup of the pods' controllers
//! and their scale, [`controller`] the informer wiring and the writes.

pub mod controller;
pub mod decide;
pub mod finder;

pub use controller::{DisruptionController, DisruptionListers};
