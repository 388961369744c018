//! Controller history (upstream `pkg/controller/history`): the ControllerRevisions through which
//! the StatefulSet and DaemonSet controllers remember every template they have run, roll
//! forward and back, and tell pods of one revision from another.
//!
//! A revision is an immutable snapshot (`data`) with a number (`revision`), controlled by its
//! parent and named `<parent>-<hash>` after the hash of its data and the parent's
//! `collisionCount` (label `controller.kubernetes.io/hash`). [`revision`] holds the values:
//! building, hashing, ordering, equality, the next number; [`client`] holds the requests: list
//! (from the informer cache), create (renaming on collisions), renumber, delete, adopt, release.

pub mod client;
pub mod revision;

pub use client::History;
pub use revision::{
    compare_revisions, equal_revision, find_equal_revisions, hash_revision,
    new_controller_revision, next_revision, revision_name, sort_revisions,
    CONTROLLER_REVISION_HASH_LABEL,
};

/// Errors of the history requests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An apiserver request failed.
    #[error("{op}")]
    Api {
        /// The operation that failed.
        op: &'static str,
        /// The client error.
        #[source]
        source: Box<::client::Error>,
    },
    /// Adoption of a revision another controller owns (upstream's message).
    #[error("attempt to adopt revision {name} owned by {owner}")]
    OwnedElsewhere {
        /// The revision.
        name: String,
        /// Its controller (kind/name uid).
        owner: String,
    },
    /// Every name tried was taken by a revision with other data.
    #[error("controller revision of {parent}: {attempts} hash collisions in a row")]
    Collisions {
        /// The parent's name.
        parent: String,
        /// How many names were tried.
        attempts: usize,
    },
}

impl Error {
    fn api(op: &'static str, source: ::client::Error) -> Self {
        Self::Api {
            op,
            source: Box::new(source),
        }
    }
}

impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Api { op, source } => crate::Error::Api { op, source },
            other => crate::Error::Claim(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
