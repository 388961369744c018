//! The controller crate's error type.
//!
//! Expected outcomes (not found, conflict, already exists) are matched by callers and handled as
//! values; only failures that should requeue a key with backoff, or stop the manager, are `Error`s.

/// Errors of the controller manager and its controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A label selector could not be compiled.
    #[error("invalid selector: {0}")]
    InvalidSelector(#[from] api::labels::SelectorError),
    /// A pod template without labels cannot be owned by a selector.
    #[error("unable to create pods, no labels")]
    NoTemplateLabels,
    /// Claiming (adoption/release) failed for some pods.
    #[error("claiming pods: {0}")]
    Claim(String),
    /// An apiserver request failed.
    #[error("{op}")]
    Api {
        /// The operation that failed.
        op: &'static str,
        /// The client error (boxed: `client::Error` carries a whole `Status`).
        #[source]
        source: Box<client::Error>,
    },
    /// Leader election ended while the manager was not shutting down.
    #[error("leader election lost")]
    LostLeadership,
    /// The manager could not start.
    #[error("controller manager: {0}")]
    Start(String),
    /// A resource quota could not be recalculated or its status written.
    #[error("syncing resource quota {0}")]
    Quota(String),
}

impl Error {
    /// Wrap a client error with the operation that failed.
    pub fn api(op: &'static str, source: client::Error) -> Self {
        Self::Api {
            op,
            source: Box::new(source),
        }
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
