//! The REST client: configuration, transport, typed and dynamic per-resource access and watch
//! decoding.
//!
//! It speaks plain Kubernetes HTTP/JSON and knows nothing of this project's apiserver internals.

pub mod api;
pub mod client;
pub mod config;
pub mod resource;
pub mod strip;
pub mod token_source;
pub mod undecodable;
pub mod watch;

pub use api::{
    Api, ApiObject, DeleteParams, ListParams, ObjectList, Patch, Preconditions, PropagationPolicy,
    Resource,
};
pub use client::Client;
pub use config::Config;
pub use resource::{ApiResource, GroupVersionKind};
pub use watch::{WatchEvent, WatchStream};
