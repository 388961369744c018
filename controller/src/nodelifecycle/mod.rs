//! The node lifecycle controller: stale leases → Ready=Unknown + unreachable taints → pod eviction.

pub mod controller;
pub mod decide;
