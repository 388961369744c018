//! kubelet-fake
pub mod backoff;
pub mod config;
pub mod error;
pub mod ids;
pub mod ipam;
pub mod node;
pub mod plan;
pub mod pod_status;

pub use config::LifecycleConfig;
pub use error::{Error, Result};
