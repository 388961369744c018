//! Scheduler.
