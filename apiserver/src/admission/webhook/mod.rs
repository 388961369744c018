//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook (upstream's
//! `k8s.io/apiserver/pkg/admission/plugin/webhook`): the webhooks of
//! `Mutating/ValidatingWebhookConfiguration` objects called with an `admission.k8s.io`
//! `AdmissionReview` over HTTPS.
//!
//! - [`source`]: the configurations, followed in the watch cache and compiled once per change;
//!   a request reads a snapshot and pays nothing more when it matches no webhook.
//! - [`matching`]: rules, `matchPolicy`, namespace and object selectors; [`conditions`]: CEL
//!   `matchConditions`.
//! - [`request`]: the review sent and the answer's verification.
//! - [`dispatch`]: calling them, `failurePolicy`, dry run and `sideEffects`, reinvocation,
//!   refusals and errors with upstream's texts.
//!
//! Where they run (the store calls [`Webhooks::mutate`] and [`Webhooks::validate`]): mutating
//! webhooks after the built-in mutating plugins and before validation, whose checks the result
//! must pass again; validating webhooks after the built-in validating plugins and before
//! ResourceQuota, as upstream's plugin order has them. Requests for the webhook configurations
//! themselves are never sent to webhooks (upstream's rule: a broken webhook must not lock out
//! its own repair).

pub mod conditions;
pub mod dispatch;
pub mod matching;
pub mod request;
pub mod source;

use std::sync::Arc;

use serde_json::Value;

pub use dispatch::Effects;
pub use request::{Operation, Request};
pub use source::Source;

use crate::error::Result;

/// `MutatingAdmissionWebhook`.
pub const MUTATING_ADMISSION_WEBHOOK: &str = "MutatingAdmissionWebhook";
/// `ValidatingAdmissionWebhook`.
pub const VALIDATING_ADMISSION_WEBHOOK: &str = "ValidatingAdmissionWebhook";

/// Both webhook plugins over one [`Source`].
#[derive(Debug, Default)]
pub struct Webhooks {
    pub source: Arc<Source>,
    mutating: bool,
    validating: bool,
}

/// Whether requests for `group`/`resource` are never sent to webhooks
/// (`IsExemptAdmissionConfigurationResource`: the admission configuration kinds).
pub(crate) fn exempt(group: &str, resource: &str) -> bool {
    group == "admissionregistration.k8s.io"
        && matches!(
            resource,
            "mutatingwebhookconfigurations"
                | "validatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
        )
}

impl Webhooks {
    /// The plugins, each enabled or not.
    pub fn new(mutating: bool, validating: bool) -> Self {
        Webhooks {
            source: Arc::default(),
            mutating,
            validating,
        }
    }

    /// Whether any mutating webhook could apply to a request for `group`/`resource`.
    pub fn any_mutating(&self, group: &str, resource: &str) -> bool {
        self.mutating && !exempt(group, resource) && !self.source.hooks().mutating.is_empty()
    }

    /// Whether any validating webhook could apply to a request for `group`/`resource`.
    pub fn any_validating(&self, group: &str, resource: &str) -> bool {
        self.validating && !exempt(group, resource) && !self.source.hooks().validating.is_empty()
    }

    /// Whether the rules of some webhook of the phase (`mutating` or validating) admit `req`
    /// (its operation, resource, subresource and scope; not its objects): a subresource's write
    /// builds the object webhooks would see (a Scale) only then.
    pub fn any_rules_match(&self, mutating: bool, req: &Request<'_>) -> bool {
        let enabled = if mutating {
            self.mutating
        } else {
            self.validating
        };
        if !enabled || exempt(req.group, req.resource) {
            return false;
        }
        let hooks = self.source.hooks();
        let hooks = if mutating {
            &hooks.mutating
        } else {
            &hooks.validating
        };
        hooks.iter().any(|h| h.matches_rules(req))
    }

    /// The mutating webhooks: `Some` with the object they changed.
    pub async fn mutate(
        &self,
        req: &Request<'_>,
        fx: &Effects<'_>,
        gr: &str,
    ) -> Result<Option<Value>> {
        if !self.any_mutating(req.group, req.resource) {
            return Ok(None);
        }
        let hooks = self.source.hooks();
        dispatch::mutate(&hooks.mutating, req, fx, gr).await
    }

    /// The validating webhooks.
    pub async fn validate(&self, req: &Request<'_>, fx: &Effects<'_>, gr: &str) -> Result<()> {
        if !self.any_validating(req.group, req.resource) {
            return Ok(());
        }
        let hooks = self.source.hooks();
        dispatch::validate(&hooks.validating, req, fx, gr).await
    }
}
