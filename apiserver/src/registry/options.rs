//! Request-independent options of the generic store's operations: what a write or a delete may
//! ask for, whoever asks (the HTTP handlers parse them from queries and bodies; bootstrap and
//! tests build them directly).

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    #[default]
    Ignore,
    /// Accept with a warning.
    Warn,
    /// Reject unknown fields.
    Strict,
}

/// Options of create, update and patch (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: everything but the store write (and allocations).
    pub dry_run: bool,
    /// The manager recorded in `managedFields` (the request's `fieldManager`, else its client's
    /// User-Agent product, as upstream).
    pub field_manager: String,
    /// How unknown fields are treated.
    pub field_validation: FieldValidation,
    /// Server-side apply's `force`: take over conflicting fields.
    pub force: bool,
}

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum Propagation {
    /// Delete dependents in the background (GC).
    Background,
    /// Delete dependents first (`foregroundDeletion` finalizer).
    Foreground,
    /// Keep dependents (`orphan` finalizer).
    Orphan,
}

/// Preconditions of a write or a delete: the object must still have this uid and
/// resourceVersion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// Required uid.
    pub uid: Option<String>,
    /// Required resourceVersion.
    pub resource_version: Option<String>,
}

/// Options of DELETE (`DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// Effective propagation policy (after `orphanDependents`).
    pub propagation: Option<Propagation>,
    /// `preconditions`.
    pub preconditions: Preconditions,
    /// `dryRun=All`.
    pub dry_run: bool,
}
