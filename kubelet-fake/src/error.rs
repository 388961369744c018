//! The crate's one error type.
//!
//! Only failures are errors. Expected outcomes of API calls (a 409 on a status write, a 404 for a pod
//! that was deleted meanwhile) are matched where they happen and never reach this enum; what does
//! reach it is a configuration that cannot be used, or a startup step that failed against the API.

use std::path::PathBuf;

/// Everything that can make the fake kubelets refuse to start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lifecycle configuration file could not be read.
    #[error("reading lifecycle configuration {path}: {source}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The lifecycle configuration is not valid YAML for [`crate::LifecycleConfig`].
    #[error("parsing lifecycle configuration: {source}")]
    ParseConfig {
        #[source]
        source: serde_yaml::Error,
    },
    /// The configuration parsed but is not usable (for example a rule without an action).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A node could not be registered with the apiserver at startup.
    #[error("registering node {node}: {source}")]
    RegisterNode {
        node: String,
        #[source]
        source: Box<client::Error>,
    },
    /// A node's Node object could not be deleted ([`crate::FakeKubelets::remove_node`]).
    #[error("removing node {node}: {source}")]
    RemoveNode {
        node: String,
        #[source]
        source: Box<client::Error>,
    },
    /// A node's own client could not be made ([`crate::credentials::NodeCredentials`]).
    #[error("credentials of node {node}: {message}")]
    NodeCredentials { node: String, message: String },
    /// The shared pod or node informer did not sync before shutdown was requested.
    #[error("informer caches did not sync")]
    CacheSync,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
