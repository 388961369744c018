//! The node lifecycle controller: stale leases → Ready=Unknown; Ready `False`/`Unknown` →
//! `not-ready`/`unreachable` `NoExecute` taints → pod eviction (by the taint eviction
//! controller); node conditions → `NoSchedule` taints ([`no_schedule`]).

pub mod controller;
pub mod decide;
pub mod no_schedule;
