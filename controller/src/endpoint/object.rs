//! The Endpoints object a sync writes, or none (`syncService`'s comparison and object build).
//!
//! An existing Endpoints is left alone when its subsets (ignoring target resourceVersions), its
//! labels (but for the headless label) and its over-capacity annotation already say what they
//! should. Otherwise it gets the new subsets (truncated to 1,000 addresses, with
//! `endpoints.kubernetes.io/over-capacity: truncated`), the Service's labels plus
//! `service.kubernetes.io/headless` for a Service without a cluster IP, and the trigger time
//! annotation (removed when there is none). Upstream compares the untruncated subsets and so
//! rewrites a truncated Endpoints on every sync (the apiserver drops the no-op); here the
//! truncated subsets are compared, which saves those requests and stores the same object.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::subsets::{subsets_equal, total_addresses, truncate, MAX_CAPACITY};
use crate::endpointutil::pod::is_service_ip_set;
use crate::endpointutil::trigger_time::format_trigger_time;
use crate::endpointutil::{ANNOTATION_TRIGGER_TIME, LABEL_HEADLESS};

/// `v1.EndpointsOverCapacity`.
pub const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Its value on a truncated Endpoints.
pub const TRUNCATED: &str = "truncated";

fn non_empty(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

/// `capacityAnnotationSetCorrectly`, against what the object should hold.
fn capacity_annotation_correct(current: &Endpoints, truncated: bool) -> bool {
    let stored = current.subsets.as_deref().unwrap_or(&[]);
    if total_addresses(stored) > MAX_CAPACITY {
        return false;
    }
    let has = current
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_OVER_CAPACITY));
    has == truncated
}

/// The Endpoints to create (`current` is `None`) or update, or `None` if `current` is up to date.
pub fn desired_endpoints(
    current: Option<&Endpoints>,
    svc: &Service,
    mut subsets: Vec<EndpointSubset>,
    trigger: Option<Timestamp>,
) -> Option<Endpoints> {
    let truncated = truncate(&mut subsets);
    let svc_labels = svc.metadata.labels.clone().unwrap_or_default();
    if let Some(cur) = current {
        let mut labels = cur.metadata.labels.clone().unwrap_or_default();
        labels.remove(LABEL_HEADLESS);
        if subsets_equal(cur.subsets.as_ref(), &subsets)
            && labels == svc_labels
            && capacity_annotation_correct(cur, truncated)
        {
            return None;
        }
    }
    let mut ep = current.cloned().unwrap_or_else(|| Endpoints {
        metadata: ObjectMeta {
            name: svc.metadata.name.clone(),
            namespace: svc.metadata.namespace.clone(),
            ..Default::default()
        },
        subsets: None,
    });
    ep.subsets = (!subsets.is_empty()).then_some(subsets);
    let mut annotations = ep.metadata.annotations.take().unwrap_or_default();
    match trigger {
        Some(t) => annotations.insert(ANNOTATION_TRIGGER_TIME.into(), format_trigger_time(t)),
        None => annotations.remove(ANNOTATION_TRIGGER_TIME),
    };
    if truncated {
        annotations.insert(ANNOTATION_OVER_CAPACITY.into(), TRUNCATED.into());
    } else {
        annotations.remove(ANNOTATION_OVER_CAPACITY);
    }
    ep.metadata.annotations = non_empty(annotations);
    let mut labels = svc_labels;
    if is_service_ip_set(svc) {
        labels.remove(LABEL_HEADLESS);
    } else {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    ep.metadata.labels = non_empty(labels);
    Some(ep)
}
