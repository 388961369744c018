//! The controller crate's error type.
//!
//! Expected outcomes (not found, conflict, already exists) are matched by callers and handled as
//! values; only failures that should requeue a key with backoff, or stop the manager, are `Error`s.

/// Errors of the controller manager and its controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A label selector could not be compiled.
    #[error("invalid selector: {0}")]
    InvalidSelector(String),
    /// A pod template without labels cannot be owned by a selector.
    #[error("unable to create pods, no labels")]
    NoTemplateLabels,
    /// An object from the cache lacked a field every stored object has.
    #[error("object missing {0}")]
    MissingField(&'static str),
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
