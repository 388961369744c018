//! Admission webhooks and ValidatingAdmissionPolicies on writes of subresources whose object is
//! not the resource's own (upstream's handlers call admission with the subresource's object and
//! its kind, `scope.Kind`):
//!
//! | subresource | operation | object / oldObject | kind |
//! |---|---|---|---|
//! | `*/scale` (PUT, PATCH) | UPDATE | the Scale of the new / stored object | `autoscaling/v1` `Scale` |
//! | `pods/binding`, `bindings` (POST) | CREATE | the Binding | `v1` `Binding` |
//! | `pods/eviction` (POST) | CREATE | the Eviction | `policy/v1` `Eviction` |
//! | `pods/exec`, `attach`, `portforward`, `*/proxy` | CONNECT | the connect options from the query | `v1` `PodExecOptions`, … |
//!
//! The resource (`resource`), `subResource` and `name` (the parent object's, from the URL) are
//! the request's. `*/status`, `pods/ephemeralcontainers` and `pods/resize` send the whole object
//! and take the update path of [`super::update`].
//!
//! Order, as upstream: mutating webhooks, then the object they left is decoded into its kind
//! (500 if it does not decode, as a patched object that does not decode upstream) and checked as
//! the client's would be (a Scale's replicas, 422 `Scale.autoscaling`); then the policies and the
//! validating webhooks. A scale runs inside the store's read-modify-write loop, on each attempt's
//! Scale ([`Store::admit_scale_by_webhooks`]); a create or connect runs once, before its write
//! ([`Store::admit_subresource`]).
//!
//! Cost: nothing is built unless a webhook's or a policy's rules admit the request's operation,
//! resource and subresource ([`crate::admission::webhook::Webhooks::any_rules_match`]); server
//! internal writes (no user) are never sent.

use k8s_openapi::api::autoscaling::v1::Scale;
use serde_json::Value;

use super::admission::{Phase, SubresourceKind, WebhookWrite};
use super::Store;
use crate::admission::webhook::{Operation, Request};
use crate::error::{ApiError, Result};
use crate::registry::WriteOptions;

/// `autoscaling/v1` `Scale`, the kind of every `*/scale` (built-in and custom resources).
pub(crate) const SCALE: SubresourceKind = SubresourceKind {
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
};
/// `v1` `Binding` of `pods/binding` and `bindings`.
pub(crate) const BINDING: SubresourceKind = SubresourceKind {
    group: "",
    version: "v1",
    kind: "Binding",
};
/// `policy/v1` `Eviction` of `pods/eviction` (a `v1beta1` body is sent as `v1`, as upstream
/// converts it to the endpoint's kind).
pub(crate) const EVICTION: SubresourceKind = SubresourceKind {
    group: "policy",
    version: "v1",
    kind: "Eviction",
};

/// The kind of the options of a connect subresource (`scope.Kind` of the connecter), by the
/// resource's plural and the subresource; `None` for what is not a connect.
pub(crate) fn connect_kind(plural: &str, subresource: &str) -> Option<SubresourceKind> {
    let kind = match (plural, subresource) {
        ("pods", "exec") => "PodExecOptions",
        ("pods", "attach") => "PodAttachOptions",
        ("pods", "portforward") => "PodPortForwardOptions",
        ("pods", "proxy") => "PodProxyOptions",
        ("nodes", "proxy") => "NodeProxyOptions",
        ("services", "proxy") => "ServiceProxyOptions",
        _ => return None,
    };
    Some(SubresourceKind {
        group: "",
        version: "v1",
        kind,
    })
}

/// A write of a subresource's own kind, as admission sees it.
pub(crate) struct SubresourceRequest<'r> {
    /// CREATE (binding, eviction) or CONNECT.
    pub operation: Operation,
    pub subresource: &'r str,
    pub kind: SubresourceKind,
    /// The parent object's name (the URL's).
    pub name: &'r str,
    pub opts: &'r WriteOptions,
}

impl Store<'_> {
    /// Whether some webhook of `phase` (or, validating, some policy) has rules that admit a
    /// request of `operation` on `subresource` of `name`; reads only the rules.
    fn subresource_rules_match(
        &self,
        phase: Phase,
        operation: Operation,
        subresource: &str,
        name: &str,
        user: &crate::authn::UserInfo,
    ) -> bool {
        if !self.any_webhooks(phase) {
            return false;
        }
        let info = &self.resource.info;
        let options = Value::Null;
        let equivalents = self.equivalents();
        let req = Request {
            operation,
            group: &info.group,
            version: &info.version,
            resource: &info.plural,
            // Rules do not read the kind.
            kind_group: "",
            kind_version: "",
            kind: "",
            subresource,
            name,
            namespace: self.namespace.as_deref(),
            object: None,
            old: None,
            user,
            dry_run: false,
            options: &options,
            equivalents: &equivalents,
            requested: None,
        };
        match phase {
            Phase::Mutating => self.state.webhooks.any_rules_match(true, &req),
            Phase::Validating => {
                self.state.webhooks.any_rules_match(false, &req)
                    || self.state.policies.any_rules_match(&req)
            }
        }
    }

    /// Mutating webhooks, then policies and validating webhooks, on `object` of `req` (a create
    /// or a connect); `Some` with the object as mutating webhooks changed it (it decodes as `T`).
    /// The object is sent as decoded into `T` (fields `T` does not define dropped, as upstream
    /// sends the decoded object).
    pub(crate) async fn admit_subresource<T>(
        &self,
        req: SubresourceRequest<'_>,
        object: &Value,
    ) -> Result<Option<Value>>
    where
        T: serde::de::DeserializeOwned + serde::Serialize,
    {
        let Some(user) = req.opts.user.as_deref() else {
            return Ok(None);
        };
        let matches = |phase| {
            self.subresource_rules_match(phase, req.operation, req.subresource, req.name, user)
        };
        if !matches(Phase::Mutating) && !matches(Phase::Validating) {
            return Ok(None);
        }
        let decoded = serde_json::from_value::<T>(object.clone())
            .ok()
            .and_then(|t| serde_json::to_value(t).ok());
        let object = decoded.as_ref().unwrap_or(object);
        let options = match req.operation {
            Operation::Connect => Value::Null,
            _ => Self::webhook_options(req.opts),
        };
        let write = |object| WebhookWrite {
            operation: req.operation,
            name: req.name,
            kind: Some(req.kind),
            object: Some(object),
            old: None,
            subresource: req.subresource,
            user: Some(user),
            dry_run: req.opts.dry_run,
            options: options.clone(),
            warnings: &req.opts.warnings,
            audit: &req.opts.audit_annotations,
        };
        let mut mutated = None;
        if matches(Phase::Mutating) {
            mutated = self.run_webhooks(Phase::Mutating, write(object)).await?;
            if let Some(m) = &mutated {
                undecodable::<T>(req.kind, m)?;
            }
        }
        if matches(Phase::Validating) {
            let object = mutated.as_ref().unwrap_or(object);
            self.run_webhooks(Phase::Validating, write(object)).await?;
        }
        Ok(mutated)
    }

    /// Admission of a `*/scale` write of `old` to `new` (the resource's objects, as the Scale
    /// was applied): mutating webhooks on the Scale of `new`, whose replicas, when changed,
    /// are applied and checked again ([`revalidate_mutated`](Self::revalidate_mutated)); then
    /// policies and validating webhooks on the Scales of the result and of `old`.
    pub(crate) async fn admit_scale_by_webhooks(
        &self,
        mut new: Value,
        old: &Value,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let (Some(user), Some(access)) = (opts.user.as_deref(), self.resource.strategy.scale())
        else {
            return Ok(new);
        };
        let name = api::meta::name(old).unwrap_or("").to_string();
        let old_scale = access.to_scale(old);
        let matches =
            |phase| self.subresource_rules_match(phase, Operation::Update, "scale", &name, user);
        if matches(Phase::Mutating) {
            let scale = access.to_scale(&new);
            let write = scale_write(&name, &scale, &old_scale, user, opts);
            if let Some(mutated) = self.run_webhooks(Phase::Mutating, write).await? {
                undecodable::<Scale>(SCALE, &mutated)?;
                access.apply_scale(&mut new, &mutated).map_err(|errs| {
                    ApiError::from(api::status::invalid("Scale.autoscaling", &name, &errs))
                })?;
                self.revalidate_mutated(&mut new, old, "scale", opts)?;
            }
        }
        if matches(Phase::Validating) {
            let scale = access.to_scale(&new);
            let write = scale_write(&name, &scale, &old_scale, user, opts);
            self.run_webhooks(Phase::Validating, write).await?;
        }
        Ok(new)
    }
}

/// A scale's update of `old_scale` to `scale`, as webhooks see it.
fn scale_write<'w>(
    name: &'w str,
    scale: &'w Value,
    old_scale: &'w Value,
    user: &'w crate::authn::UserInfo,
    opts: &'w WriteOptions,
) -> WebhookWrite<'w> {
    WebhookWrite {
        operation: Operation::Update,
        name,
        kind: Some(SCALE),
        object: Some(scale),
        old: Some(old_scale),
        subresource: "scale",
        user: Some(user),
        dry_run: opts.dry_run,
        options: Store::webhook_options(opts),
        warnings: &opts.warnings,
        audit: &opts.audit_annotations,
    }
}

/// A mutated object that does not decode into its kind: upstream's decoding of the patched
/// object fails the request with a 500 naming the decoding error.
fn undecodable<T: serde::de::DeserializeOwned>(kind: SubresourceKind, obj: &Value) -> Result<()> {
    crate::registry::typed::decode::<T>(obj).map_err(|e| {
        ApiError::from(api::status::internal(&format!(
            "decoding the {} returned by mutating admission webhooks: {}",
            kind.kind, e.reason
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_kinds_are_the_connecters_options() {
        let kind = |plural, sub| connect_kind(plural, sub).map(|k| k.kind);
        assert_eq!(kind("pods", "exec"), Some("PodExecOptions"));
        assert_eq!(kind("pods", "attach"), Some("PodAttachOptions"));
        assert_eq!(kind("pods", "portforward"), Some("PodPortForwardOptions"));
        assert_eq!(kind("pods", "proxy"), Some("PodProxyOptions"));
        assert_eq!(kind("nodes", "proxy"), Some("NodeProxyOptions"));
        assert_eq!(kind("services", "proxy"), Some("ServiceProxyOptions"));
        // `log` is a read, not a connect.
        assert_eq!(kind("pods", "log"), None);
        assert_eq!(kind("deployments", "scale"), None);
    }

    #[test]
    fn a_mutated_object_must_decode_as_its_kind() {
        let good = serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web"}, "spec": {"replicas": 2}});
        assert!(undecodable::<Scale>(SCALE, &good).is_ok());
        let bad = serde_json::json!({"spec": {"replicas": "two"}});
        let err = undecodable::<Scale>(SCALE, &bad)
            .err()
            .map(|e| e.to_status());
        let err = err.unwrap_or_default();
        assert_eq!(err["code"], 500);
        let message = err["message"].as_str().unwrap_or("");
        assert!(
            message.contains("decoding the Scale returned by mutating admission webhooks"),
            "{message}"
        );
    }
}
