//! The replication controller: one implementation serving ReplicaSets and ReplicationControllers.

pub mod adapter;
pub mod claim;
pub mod controller;
pub mod expectations;
pub mod manage;
pub mod ranking;
pub mod status;
