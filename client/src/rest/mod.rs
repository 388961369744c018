//! The REST client: configuration, transport, typed per-resource access and watch decoding.
//!
//! It speaks plain Kubernetes HTTP/JSON and knows nothing of this project's apiserver internals.

pub mod api;
pub mod client;
pub mod config;
pub mod strip;
pub mod watch;

pub use api::{
    Api, DeleteParams, ListParams, ObjectList, Patch, Preconditions, PropagationPolicy, Resource,
};
pub use client::Client;
pub use config::Config;
pub use watch::{WatchEvent, WatchStream};
