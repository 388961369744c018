//! The garbage collector: ownerReference-based cascading deletion (Background, Foreground, Orphan).

pub mod collector;
pub mod graph;
