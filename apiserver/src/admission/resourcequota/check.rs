//! `CheckRequest` of upstream's quota admission (`admission/plugin/resourcequota/controller.go`),
//! as a pure function: which quotas a write charges and their new `status.used`, or why it is
//! refused.
//!
//! For each quota of the namespace the object is in scope of and that tracks (in `status.hard`)
//! one of the resources its evaluator measures: the pod constraints must hold (`failed quota:
//! <q>: must specify …`), and the quota must already have usage for those resources (`status
//! unknown for quota: <q>, resources: …`, until the controller's first sync). The object's usage
//! (minus, on an update, the previous state's, never below zero, for quotas the old state
//! matched too) is then added to each such quota's `status.used`; a quota whose new usage
//! exceeds `status.hard` refuses the write: `exceeded quota: <q>, requested: …, used: …,
//! limited: …`. A `status` write records usage without that limit check, as upstream. Negative
//! usage is refused (`quota usage is negative for resource(s): …`).
//!
//! Not implemented: the plugin's `LimitedResources` configuration (kube-apiserver configures
//! none by default).

use api::quota::evaluator::{Evaluator, Operation};
use api::quota::scope::quota_scopes;
use api::quota::{self as q, ResourceList};
use std::borrow::Borrow;

use serde_json::Value;

/// The write being admitted.
pub struct Request<'a> {
    /// The evaluator of the written resource.
    pub evaluator: &'a Evaluator,
    /// Create or update.
    pub operation: Operation,
    /// `""` for the main resource, else the subresource written.
    pub subresource: &'a str,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object an update replaces.
    pub old: Option<&'a Value>,
    /// Now, for pods' deletion grace periods.
    pub now: jiff::Timestamp,
}

/// Why a write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A 403 with this reason.
    Forbidden(String),
    /// A failure evaluating quota (an invalid scope selector): a 500.
    Internal(String),
}

/// A quota the write charges: its index in the input and its new `status.used`.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    pub index: usize,
    pub used: ResourceList,
}

fn hard_of(quota: &Value) -> ResourceList {
    q::from_json(quota.pointer("/status/hard"))
}

fn used_of(quota: &Value) -> ResourceList {
    q::from_json(quota.pointer("/status/used"))
}

fn name_of(quota: &Value) -> &str {
    api::meta::name(quota).unwrap_or("")
}

/// `hasUsageStats`: `status.used` has an entry for every resource of `status.hard` in
/// `interesting`.
fn has_usage_stats(quota: &Value, interesting: &[String]) -> bool {
    let used = used_of(quota);
    hard_of(quota)
        .keys()
        .filter(|k| interesting.contains(k))
        .all(|k| used.contains_key(k))
}

/// The quotas among `quotas` that `req` charges, with their new usage; empty when it changes no
/// usage. See the module docs for the rules and messages.
pub fn check_request<V: Borrow<Value>>(
    quotas: &[V],
    req: &Request,
) -> Result<Vec<Charge>, Refusal> {
    let e = req.evaluator;
    if !e.handles(req.operation, req.subresource, req.object, req.old) {
        return Ok(Vec::new());
    }
    let mut interesting = Vec::new();
    for (i, quota) in quotas.iter().enumerate() {
        let quota: &Value = quota.borrow();
        let name = name_of(quota);
        e.matching_scopes(req.object, &quota_scopes(quota))
            .map_err(|err| {
                Refusal::Internal(format!("error matching scopes of quota {name}, err: {err}"))
            })?;
        if !e.matches(quota, req.object).map_err(Refusal::Internal)? {
            continue;
        }
        let hard = hard_of(quota);
        let restricted = e.matching_resources(hard.keys());
        if let Err(err) = e.constraints(&restricted, req.object) {
            return Err(Refusal::Forbidden(format!("failed quota: {name}: {err}")));
        }
        if !has_usage_stats(quota, &restricted) {
            return Err(Refusal::Forbidden(format!(
                "status unknown for quota: {name}, resources: {}",
                q::pretty_print_names(&restricted)
            )));
        }
        interesting.push(i);
    }
    if interesting.is_empty() {
        return Ok(Vec::new());
    }
    let input = e.usage(req.object, req.now);
    let negative = q::negative(&input);
    if !negative.is_empty() {
        return Err(Refusal::Forbidden(format!(
            "quota usage is negative for resource(s): {}",
            q::pretty_print_names(&negative)
        )));
    }
    // On an update (of an object that exists), charge only the growth, for quotas the old state
    // counted too.
    let previous = match (req.operation, req.old) {
        (Operation::Update, Some(old)) if api::meta::resource_version(old).is_some() => Some((
            old,
            q::subtract_non_negative(&input, &e.usage(old, req.now)),
        )),
        _ => None,
    };
    let mut charges = Vec::new();
    for i in interesting {
        let quota: &Value = quotas[i].borrow();
        let delta = match &previous {
            Some((old, delta)) if e.matches(quota, old).map_err(Refusal::Internal)? => delta,
            _ => &input,
        };
        let delta = q::remove_zeros(delta);
        if delta.is_empty() {
            continue;
        }
        let hard = hard_of(quota);
        let used = used_of(quota);
        let requested = q::mask(&delta, hard.keys().map(String::as_str));
        let new_used = q::add(&used, &requested);
        if req.subresource != "status" {
            let masked = q::mask(&new_used, requested.keys().map(String::as_str));
            let (allowed, exceeded) = q::less_than_or_equal(&masked, &hard);
            if !allowed {
                let only = |l: &ResourceList| {
                    q::pretty_print(&q::mask(l, exceeded.iter().map(String::as_str)))
                };
                return Err(Refusal::Forbidden(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    name_of(quota),
                    only(&requested),
                    only(&used),
                    only(&hard)
                )));
            }
        }
        if !q::equals(&new_used, &used) {
            charges.push(Charge {
                index: i,
                used: new_used,
            });
        }
    }
    Ok(charges)
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
