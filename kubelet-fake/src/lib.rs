//! kubelet-fake
pub mod backoff;
pub mod config;
pub mod error;

pub use config::LifecycleConfig;
pub use error::{Error, Result};
