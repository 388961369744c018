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
    /// Where the write leaves its warnings (`fieldValidation=Warn`'s unknown fields) for the
    /// response's `Warning` headers.
    pub warnings: Warnings,
    /// Who asks; `None` for the server's own writes, which admission webhooks do not see.
    pub user: Option<std::sync::Arc<crate::authn::UserInfo>>,
    /// What admission leaves for the request's audit event (admission webhooks'
    /// `auditAnnotations`).
    pub audit_annotations: AuditAnnotations,
}

/// The audit annotations of one request (`admission.Attributes.AddAnnotation`): a key keeps its
/// first value. Bounded by [`MAX_AUDIT_ANNOTATIONS`].
#[derive(Debug, Clone, Default)]
pub struct AuditAnnotations(
    std::sync::Arc<parking_lot::Mutex<std::collections::BTreeMap<String, String>>>,
);

/// Most audit annotations one request keeps.
pub const MAX_AUDIT_ANNOTATIONS: usize = 256;

impl AuditAnnotations {
    /// Adds `key` unless it is there already or the bound is reached.
    pub fn add(&self, key: String, value: String) {
        let mut a = self.0.lock();
        if a.len() < MAX_AUDIT_ANNOTATIONS {
            a.entry(key).or_insert(value);
        }
    }

    /// The annotations so far.
    pub fn all(&self) -> std::collections::BTreeMap<String, String> {
        self.0.lock().clone()
    }
}

/// The warnings of one request, in order, without repeats (a retried attempt finds the same
/// ones again). Bounded by [`MAX_WARNINGS`].
#[derive(Debug, Clone, Default)]
pub struct Warnings(std::sync::Arc<parking_lot::Mutex<Vec<String>>>);

/// Most warnings one response carries.
pub const MAX_WARNINGS: usize = 64;

impl Warnings {
    /// Adds `text` unless it is there already or the bound is reached.
    pub fn push(&self, text: String) {
        let mut w = self.0.lock();
        if w.len() < MAX_WARNINGS && !w.contains(&text) {
            w.push(text);
        }
    }

    /// The warnings so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().clone()
    }
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
    /// Who asks; `None` for the server's own deletes, which admission webhooks do not see.
    pub user: Option<std::sync::Arc<crate::authn::UserInfo>>,
}
