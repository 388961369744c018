//! The audit log (kube-apiserver's `--audit-log-path` and `--audit-policy-file`): one JSON line
//! of `audit.k8s.io/v1` `Event` per request stage, at the level the [`policy`] gives the request.
//!
//! Layout: [`policy`] loads, validates and evaluates the `Policy`; [`filter`] is the serving
//! chain's part (the audit ID, the stages, the hooks authentication, authorization and the body
//! pre-read report to); [`event`] is the event and its JSON; [`sink`] the bounded queue to one
//! writer thread, the file and its rotation, and the `apiserver_audit_*` metrics.
//!
//! As upstream, auditing needs both a log path and a policy: a path without a policy records
//! nothing (and says so at start-up), and a policy that does not load or validate stops the
//! server with upstream's message (`loading audit policy file: rules[0].level: …`). Without
//! auditing the middleware is not installed and the other steps' hooks find no context in the
//! request (one extension look-up); the audit ID is still given to every request and returned
//! in its `Audit-ID` header ([`filter::init`], upstream's `WithAuditInit`).

pub mod event;
pub mod filter;
pub mod policy;
pub mod sink;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use filter::{
    acting_as, annotations_of, authenticated, authentication_failed, authorized, capture_body,
    AUDIT_ID_HEADER,
};
pub use policy::{Level, Policy, Stage};
pub use sink::LogTarget;

/// The audit flags of one apiserver.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// `--audit-log-path` (`-`: standard output).
    pub log_path: Option<PathBuf>,
    /// The loaded `--audit-policy-file`.
    pub policy: Option<Policy>,
    /// `--audit-log-maxsize`: megabytes before the file is rotated (0: lumberjack's 100).
    pub max_size_mb: u64,
    /// `--audit-log-maxbackup`: rotated files kept (0: all).
    pub max_backups: usize,
}

impl AuditOptions {
    /// Loads `--audit-policy-file` with upstream's error text.
    pub fn load_policy(path: &std::path::Path) -> Result<Policy, String> {
        Policy::load(path).map_err(|e| format!("loading audit policy file: {e}"))
    }
}

/// The audit policy and log of a running apiserver.
#[derive(Debug)]
pub struct Auditor {
    policy: Policy,
    sink: sink::Sink,
    /// Whether an authorizer runs (secure mode); without one every request is allowed and
    /// annotated so, as under upstream's `AlwaysAllow`.
    authorizes: bool,
}

impl Auditor {
    /// Opens the log and starts its writer, or `None` when the options do not enable auditing.
    pub fn start(options: &AuditOptions, authorizes: bool) -> std::io::Result<Option<Arc<Self>>> {
        let Some(path) = &options.log_path else {
            return Ok(None);
        };
        let Some(policy) = &options.policy else {
            tracing::info!(
                "No audit policy file provided, no events will be recorded for log backend"
            );
            return Ok(None);
        };
        let sink = sink::Sink::open(
            &LogTarget::from_flag(path),
            options.max_size_mb,
            options.max_backups,
        )?;
        Ok(Some(Arc::new(Auditor {
            policy: policy.clone(),
            sink,
            authorizes,
        })))
    }

    /// Appends the `apiserver_audit_*` metrics.
    pub fn render_metrics(&self, out: &mut String) {
        self.sink.metrics.render(out);
    }

    /// Writes what is queued and closes the log (at shutdown), waiting at most `deadline`.
    pub async fn close(&self, deadline: Duration) {
        self.sink.close(deadline).await;
    }
}
