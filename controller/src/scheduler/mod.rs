//! The scheduler: binds each pod without a node to a feasible node through `pods/binding`.

pub mod controller;
pub mod filter;
pub mod nodeaffinity;
pub mod resources;
pub mod score;
pub mod volumebinding;
