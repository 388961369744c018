//! Protobuf bodies of the security APIs: TokenRequest (`kubectl create token`), TokenReview,
//! SelfSubjectReview (`kubectl auth whoami`), the access reviews (`kubectl auth can-i`), and
//! CertificateSigningRequest (`kubectl certificate approve|deny` write it back through
//! `/approval`, status included) and APIService. Every field of these kinds.

use std::collections::BTreeMap;

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::certificates::v1 as certs;
use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use serde_json::{json, Value};

use super::{b64, object_meta, time, Obj};

fn extra<T>(m: BTreeMap<String, T>, items: impl Fn(T) -> Vec<String>) -> Option<Value> {
    if m.is_empty() {
        return None;
    }
    Some(Value::Object(
        m.into_iter().map(|(k, v)| (k, json!(items(v)))).collect(),
    ))
}

pub(super) fn token_request(t: authn::TokenRequest) -> Value {
    let spec = t.spec.unwrap_or_default();
    let bound = spec.bound_object_ref.map(|b| {
        Obj::default()
            .s("kind", b.kind)
            .s("apiVersion", b.api_version)
            .s("name", b.name)
            .s("uid", b.u_id)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(t.metadata)))
        .v(
            "spec",
            Some(
                Obj::default()
                    .strs("audiences", spec.audiences)
                    .i("expirationSeconds", spec.expiration_seconds)
                    .v("boundObjectRef", bound)
                    .done(),
            ),
        )
        .done()
}

pub(super) fn token_review(t: authn::TokenReview) -> Value {
    let spec = t.spec.unwrap_or_default();
    Obj::default()
        .v("metadata", Some(object_meta(t.metadata)))
        .v(
            "spec",
            Some(
                Obj::default()
                    .s("token", spec.token)
                    .strs("audiences", spec.audiences)
                    .done(),
            ),
        )
        .done()
}

pub(super) fn self_subject_review(t: authn::SelfSubjectReview) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(t.metadata)))
        .done()
}

fn resource_attributes(r: Option<authz::ResourceAttributes>) -> Option<Value> {
    r.map(|r| {
        Obj::default()
            .s("namespace", r.namespace)
            .s("verb", r.verb)
            .s("group", r.group)
            .s("version", r.version)
            .s("resource", r.resource)
            .s("subresource", r.subresource)
            .s("name", r.name)
            .done()
    })
}

fn non_resource_attributes(n: Option<authz::NonResourceAttributes>) -> Option<Value> {
    n.map(|n| Obj::default().s("path", n.path).s("verb", n.verb).done())
}

fn sar_spec(s: Option<authz::SubjectAccessReviewSpec>) -> Value {
    let s = s.unwrap_or_default();
    Obj::default()
        .v(
            "resourceAttributes",
            resource_attributes(s.resource_attributes),
        )
        .v(
            "nonResourceAttributes",
            non_resource_attributes(s.non_resource_attributes),
        )
        .s("user", s.user)
        .strs("groups", s.groups)
        .v("extra", extra(s.extra, |e| e.items))
        .s("uid", s.uid)
        .done()
}

pub(super) fn subject_access_review(r: authz::SubjectAccessReview) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .v("spec", Some(sar_spec(r.spec)))
        .done()
}

pub(super) fn local_subject_access_review(r: authz::LocalSubjectAccessReview) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .v("spec", Some(sar_spec(r.spec)))
        .done()
}

pub(super) fn self_subject_access_review(r: authz::SelfSubjectAccessReview) -> Value {
    let s = r.spec.unwrap_or_default();
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .v(
            "spec",
            Some(
                Obj::default()
                    .v(
                        "resourceAttributes",
                        resource_attributes(s.resource_attributes),
                    )
                    .v(
                        "nonResourceAttributes",
                        non_resource_attributes(s.non_resource_attributes),
                    )
                    .done(),
            ),
        )
        .done()
}

pub(super) fn self_subject_rules_review(r: authz::SelfSubjectRulesReview) -> Value {
    let s = r.spec.unwrap_or_default();
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .v(
            "spec",
            Some(Obj::default().s("namespace", s.namespace).done()),
        )
        .done()
}

pub(super) fn certificate_signing_request(c: certs::CertificateSigningRequest) -> Value {
    let spec = c.spec.unwrap_or_default();
    let spec = Obj::default()
        .v("request", spec.request.map(b64))
        .s("signerName", spec.signer_name)
        .i("expirationSeconds", spec.expiration_seconds.map(i64::from))
        .strs("usages", spec.usages)
        .s("username", spec.username)
        .s("uid", spec.uid)
        .strs("groups", spec.groups)
        .v("extra", extra(spec.extra, |e| e.items))
        .done();
    let status = c.status.map(|st| {
        let conditions = st
            .conditions
            .into_iter()
            .map(|c| {
                Obj::default()
                    .s("type", c.r#type)
                    .s("status", c.status)
                    .s("reason", c.reason)
                    .s("message", c.message)
                    .v("lastUpdateTime", time(c.last_update_time))
                    .v("lastTransitionTime", time(c.last_transition_time))
                    .done()
            })
            .collect();
        Obj::default()
            .list("conditions", conditions)
            .v(
                "certificate",
                st.certificate.filter(|c| !c.is_empty()).map(b64),
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("spec", Some(spec))
        .v("status", status)
        .done()
}

pub(super) fn api_service(a: apireg::APIService) -> Value {
    let spec = a.spec.unwrap_or_default();
    let service = spec.service.map(|s| {
        Obj::default()
            .s("namespace", s.namespace)
            .s("name", s.name)
            .i("port", s.port.map(i64::from))
            .done()
    });
    let spec = Obj::default()
        .v("service", service)
        .s("group", spec.group)
        .s("version", spec.version)
        .b_t("insecureSkipTLSVerify", spec.insecure_skip_tls_verify)
        .v(
            "caBundle",
            spec.ca_bundle.filter(|c| !c.is_empty()).map(b64),
        )
        .i(
            "groupPriorityMinimum",
            spec.group_priority_minimum.map(i64::from),
        )
        .i("versionPriority", spec.version_priority.map(i64::from))
        .done();
    let status = a.status.map(|st| {
        let conditions = st
            .conditions
            .into_iter()
            .map(|c| {
                Obj::default()
                    .s("type", c.r#type)
                    .s("status", c.status)
                    .v("lastTransitionTime", time(c.last_transition_time))
                    .s("reason", c.reason)
                    .s("message", c.message)
                    .done()
            })
            .collect();
        Obj::default().list("conditions", conditions).done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(a.metadata)))
        .v("spec", Some(spec))
        .v("status", status)
        .done()
}
