//! The Kubernetes REST API over the `store` crate.

pub mod patch;
pub mod protobuf;
pub mod registry;
