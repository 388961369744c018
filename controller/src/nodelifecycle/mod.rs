//! The node lifecycle controller: stale leases → Ready=Unknown + unreachable taints → pod eviction;
//! node conditions → `NoSchedule` taints ([`no_schedule`]).

pub mod controller;
pub mod decide;
pub mod no_schedule;
