//! The create-only APIs that answer instead of storing: `authentication.k8s.io` TokenReview and
//! SelfSubjectReview, and `authorization.k8s.io`
//! SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectRulesReview (upstream's `pkg/registry/authentication` and
//! `pkg/registry/authorization` REST storage; [`validation`] is
//! `pkg/apis/authorization/validation`). An access review's resource check carries its
//! `fieldSelector`/`labelSelector` to the authorizers, and says in `status.evaluationError`
//! when one was (partly) ignored for not being understood. The decisions are
//! [`crate::authn`]'s and [`crate::authz`]'s; this is the HTTP side.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Map, Value};

use crate::authn::identity::UserInfo;
use crate::authn::token;
use crate::authz::{self, selectors, Attributes};
use crate::error::{ApiError, Result};
use crate::http::body::decode_object;
use crate::http::render::{encode, output};
use crate::http::request::Ctx;
use crate::registry::store::CachedObjects;
use api::validation::FieldError;

mod validation;

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The body of a review or token request, checked against the endpoint's kind and pruned of
/// unknown fields as `fieldValidation` asks.
async fn read_request(ctx: &Ctx, body: Body) -> Result<Value> {
    let opts = ctx.write_options("CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let mut obj = decode_object(&ctx.headers, &bytes)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    let store = ctx.store();
    store.check_type_meta(&obj)?;
    store.validate_fields(&mut obj, &opts)?;
    Ok(crate::registry::with_type_meta(
        &ctx.target.resource.info,
        obj,
    ))
}

fn respond(ctx: &Ctx, mut obj: Value) -> Result<Response> {
    // Go writes a zero ObjectMeta as `{"creationTimestamp": null}`.
    if let Some(o) = obj.as_object_mut() {
        let meta = o
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = meta.as_object_mut() {
            m.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
    Ok(encode(&obj, output(ctx.accept())?, StatusCode::CREATED))
}

/// POST to a review resource (any other verb is 405).
pub async fn create(ctx: Ctx, method: Method, body: Body) -> Result<Response> {
    if method != Method::POST || ctx.target.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let obj = read_request(&ctx, body).await?;
    // The decisions read the watch cache: first let it catch up with every write acknowledged
    // before this request (a binding or pod created just before is seen).
    ctx.store().wait_consistent().await?;
    let info = &ctx.target.resource.info;
    let out = match info.plural.as_str() {
        "tokenreviews" => token_review(&ctx, obj)?,
        "selfsubjectreviews" => self_subject_review(&ctx, obj),
        "subjectaccessreviews" => subject_access_review(&ctx, obj)?,
        "selfsubjectaccessreviews" => self_subject_access_review(&ctx, obj)?,
        "localsubjectaccessreviews" => local_subject_access_review(&ctx, obj)?,
        "selfsubjectrulesreviews" => self_subject_rules_review(&ctx, obj)?,
        _ => return Err(ApiError::method_not_allowed()),
    };
    respond(&ctx, out)
}

fn token_review(ctx: &Ctx, mut obj: Value) -> Result<Value> {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let token_text = spec.get("token").and_then(Value::as_str).unwrap_or("");
    if token_text.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let lookup = crate::authn::authenticator::CacheLookup(CachedObjects::new(&ctx.state));
    let verdict = token::validate(
        &ctx.state.credentials,
        token_text,
        &audiences,
        now(),
        &lookup,
    );
    let mut status = Map::new();
    match verdict {
        Ok(Some(auth)) => {
            status.insert("authenticated".into(), json!(true));
            status.insert("user".into(), auth.user.to_json());
            status.insert("audiences".into(), json!(auth.audiences));
        }
        Ok(None) => {
            status.insert("user".into(), json!({}));
        }
        Err(e) => {
            status.insert("user".into(), json!({}));
            status.insert("error".into(), json!(e));
        }
    }
    obj["status"] = Value::Object(status);
    Ok(obj)
}

fn self_subject_review(ctx: &Ctx, _obj: Value) -> Value {
    let user = (*ctx.user).clone();
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": api::meta::now_rfc3339()},
        "status": {"userInfo": user.to_json()},
    })
}

fn reject(kind: &str, errs: &[FieldError]) -> ApiError {
    ApiError::from(api::status::invalid(
        &format!("{kind}.authorization.k8s.io"),
        "",
        errs,
    ))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `AuthorizationAttributesFrom`: a resource check carries its selectors
/// ([`authz::selectors`]).
fn attributes(user: UserInfo, spec: &Value) -> Attributes {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match validation::attr_value(spec, "resourceAttributes") {
        Some(r) => Attributes {
            user,
            verb: s(&r, "verb"),
            resource_request: true,
            namespace: s(&r, "namespace"),
            api_group: s(&r, "group"),
            resource: s(&r, "resource"),
            subresource: s(&r, "subresource"),
            name: s(&r, "name"),
            field_selector: selectors::field_selector_from_attributes(r.get("fieldSelector")),
            label_selector: selectors::label_selector_from_attributes(r.get("labelSelector")),
            ..Default::default()
        },
        None => {
            let n = validation::attr_value(spec, "nonResourceAttributes").unwrap_or(json!({}));
            Attributes {
                user,
                verb: s(&n, "verb"),
                path: s(&n, "path"),
                ..Default::default()
            }
        }
    }
}

fn decide(ctx: &Ctx, mut obj: Value, user: UserInfo) -> Value {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let attrs = attributes(user, &spec);
    let objects = CachedObjects::new(&ctx.state);
    let d = authz::authorize(&objects, &attrs);
    let mut status = Map::new();
    status.insert("allowed".into(), json!(d.allowed));
    if !d.reason.is_empty() {
        status.insert("reason".into(), json!(d.reason));
    }
    let error = selectors::evaluation_error(&attrs.field_selector, &attrs.label_selector);
    if !error.is_empty() {
        status.insert("evaluationError".into(), json!(error));
    }
    obj["status"] = Value::Object(status);
    obj
}

fn user_from_spec(spec: &Value) -> UserInfo {
    let extra = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), strings(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        username: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        uid: spec
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        groups: strings(spec.get("groups")),
        extra,
    }
}

fn subject_access_review(ctx: &Ctx, obj: Value) -> Result<Value> {
    let errs = validation::subject_access_review(&obj);
    if !errs.is_empty() {
        return Err(reject("SubjectAccessReview", &errs));
    }
    let user = user_from_spec(&obj.get("spec").cloned().unwrap_or(Value::Null));
    Ok(decide(ctx, obj, user))
}

fn self_subject_access_review(ctx: &Ctx, obj: Value) -> Result<Value> {
    let errs = validation::self_subject_access_review(&obj);
    if !errs.is_empty() {
        return Err(reject("SelfSubjectAccessReview", &errs));
    }
    let user = (*ctx.user).clone();
    Ok(decide(ctx, obj, user))
}

fn local_subject_access_review(ctx: &Ctx, mut obj: Value) -> Result<Value> {
    let Some(ns) = ctx.target.namespace.clone() else {
        return Err(ApiError::bad_request(
            "namespace is required on this type: ",
        ));
    };
    ctx.store().reconcile_namespace(&mut obj)?;
    let errs = validation::local_subject_access_review(&obj, &ns);
    if !errs.is_empty() {
        return Err(reject("LocalSubjectAccessReview", &errs));
    }
    let user = user_from_spec(&obj.get("spec").cloned().unwrap_or(Value::Null));
    Ok(decide(ctx, obj, user))
}

fn rule_json(r: &authz::Rule) -> Value {
    let mut m = Map::new();
    m.insert("verbs".into(), json!(r.verbs));
    if r.non_resource_urls.is_empty() || !r.resources.is_empty() {
        if !r.api_groups.is_empty() {
            m.insert("apiGroups".into(), json!(r.api_groups));
        }
        if !r.resources.is_empty() {
            m.insert("resources".into(), json!(r.resources));
        }
        if !r.resource_names.is_empty() {
            m.insert("resourceNames".into(), json!(r.resource_names));
        }
    } else {
        m.insert("nonResourceURLs".into(), json!(r.non_resource_urls));
    }
    Value::Object(m)
}

fn self_subject_rules_review(ctx: &Ctx, mut obj: Value) -> Result<Value> {
    let namespace = obj
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let user = (*ctx.user).clone();
    let objects = CachedObjects::new(&ctx.state);
    let (rules, errors) = authz::rules_for(&objects, &user, &namespace);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in &rules {
        // A rule with both kinds lists (never valid RBAC) counts as a resource rule.
        if !r.resources.is_empty() || r.non_resource_urls.is_empty() {
            resource_rules.push(rule_json(r));
        } else {
            non_resource_rules.push(rule_json(r));
        }
    }
    let mut status = Map::new();
    status.insert("resourceRules".into(), Value::Array(resource_rules));
    status.insert("nonResourceRules".into(), Value::Array(non_resource_rules));
    status.insert("incomplete".into(), json!(!errors.is_empty()));
    if !errors.is_empty() {
        status.insert("evaluationError".into(), json!(errors.join(", ")));
    }
    obj["status"] = Value::Object(status);
    Ok(obj)
}
