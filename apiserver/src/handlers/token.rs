//! `serviceaccounts/<name>/token` (POST): a TokenRequest answered with a signed bound token, as
//! upstream's `pkg/registry/core/serviceaccount/storage/token.go`: the body's name and namespace
//! must match the URL's, `expirationSeconds` defaults to 3600 and is at least 600, the service
//! account must exist, and a bound object (Pod, Secret or Node) must exist, belong to the service
//! account (a pod) and have the uid given. Audiences default to the API audiences. The claims and
//! the signature are [`crate::authn::token`]'s.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use crate::authn::token::{self, Binding, Ref};
use crate::error::{ApiError, Result};
use crate::http::body::decode_object;
use crate::http::render::{encode, output};
use crate::http::request::Ctx;
use crate::registry::Store;
use api::validation::FieldError;

const GK: &str = "TokenRequest.authentication.k8s.io";

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

/// Gets `plural`/`name` (core group) the way a REST getter does: 404 `pods "x" not found`.
async fn get_core(ctx: &Ctx, plural: &str, namespace: Option<&str>, name: &str) -> Result<Value> {
    let resource = ctx
        .state
        .resources
        .find("", "v1", plural)
        .ok_or_else(ApiError::unknown_path)?;
    let store = Store::new(&ctx.state, resource, namespace);
    store.get(name).await.map(|o| Value::clone(&o))
}

fn uid(obj: &Value) -> String {
    api::meta::uid(obj).unwrap_or("").to_string()
}

/// The bound object `r` of a token for the service account `name`: it must exist (404 as its
/// getter answers), a pod must run as the service account, and a given uid must be the
/// object's (409). A pod's node is named in the token too.
async fn bind(ctx: &Ctx, name: &str, namespace: &str, r: &Value) -> Result<Binding> {
    let mut binding = Binding::default();
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let api_version = s("apiVersion");
    let (group, version) = api::resources::split_api_version(&api_version);
    let (ref_kind, ref_name, ref_uid) = (s("kind"), s("name"), s("uid"));
    let found = match (group, ref_kind.as_str()) {
        ("", "Pod") => {
            let pod = get_core(ctx, "pods", Some(namespace), &ref_name).await?;
            let pod_sa = pod
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if pod_sa != name {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {} to pod running with serviceaccount {}",
                    api::validation::go_quote(name),
                    api::validation::go_quote(pod_sa)
                )));
            }
            let node_name = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !node_name.is_empty() {
                if let Ok(node) = get_core(ctx, "nodes", None, &node_name).await {
                    binding.node = Some(Ref {
                        name: node_name,
                        uid: uid(&node),
                    });
                }
            }
            binding.pod = Some(Ref {
                name: ref_name.clone(),
                uid: uid(&pod),
            });
            uid(&pod)
        }
        ("", "Secret") => {
            let secret = get_core(ctx, "secrets", Some(namespace), &ref_name).await?;
            binding.secret = Some(Ref {
                name: ref_name.clone(),
                uid: uid(&secret),
            });
            uid(&secret)
        }
        ("", "Node") => {
            let node = get_core(ctx, "nodes", None, &ref_name).await?;
            binding.node = Some(Ref {
                name: ref_name.clone(),
                uid: uid(&node),
            });
            uid(&node)
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={ref_kind}"
            )))
        }
    };
    if !ref_uid.is_empty() && ref_uid != found {
        return Err(api::status::conflict(
            &ref_kind,
            &ref_name,
            &format!(
                "the UID in the bound object reference ({ref_uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        )
        .into());
    }
    Ok(binding)
}

/// POST `serviceaccounts/<name>/token`: a TokenRequest answered with a signed token.
pub async fn token_request(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    let namespace = ctx.target.namespace.clone().unwrap_or_default();
    let opts = ctx.write_options("CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let mut req = decode_object(&ctx.headers, &bytes)?;
    if !req.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    let av = req.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = req.get("kind").and_then(Value::as_str).unwrap_or("");
    if (!av.is_empty() && av != "authentication.k8s.io/v1")
        || (!kind.is_empty() && kind != "TokenRequest")
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({av}, Kind={kind}) does not match the expected kind (authentication.k8s.io/v1, Kind=TokenRequest)"
        )));
    }
    let body_name = api::meta::name(&req).unwrap_or("").to_string();
    if !body_name.is_empty() && body_name != name {
        return Err(api::status::invalid(
            GK,
            &name,
            &[FieldError::invalid(
                "metadata.name",
                &body_name,
                "must match the service account name if specified",
            )],
        )
        .into());
    }
    let body_ns = api::meta::namespace(&req).unwrap_or("").to_string();
    if !body_ns.is_empty() && body_ns != namespace {
        return Err(api::status::invalid(
            GK,
            &name,
            &[FieldError::invalid(
                "metadata.namespace",
                &body_ns,
                "must match the service account namespace if specified",
            )],
        )
        .into());
    }
    // Defaults (`SetDefaults_TokenRequestSpec`) and validation (`ValidateTokenRequest`).
    let expiration = match req.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => 3600,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    let mut errs = Vec::new();
    if expiration < 600 {
        errs.push(FieldError::invalid_value(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > 1 << 32 {
        errs.push(FieldError::invalid_value(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errs.is_empty() {
        return Err(api::status::invalid(GK, "", &errs).into());
    }
    // NodeRestriction: a kubelet's token is bound to a pod of its own.
    ctx.store().restrict_node(
        crate::admission::node_restriction::NodeOperation::Create,
        Some(&req),
        None,
        "token",
        &name,
        Some(&ctx.user),
    )?;
    let sa = get_core(&ctx, "serviceaccounts", Some(&namespace), &name).await?;
    let bound = req
        .pointer("/spec/boundObjectRef")
        .filter(|v| !v.is_null())
        .cloned();
    let binding = match &bound {
        Some(r) => bind(&ctx, &name, &namespace, r).await?,
        None => Binding::default(),
    };
    let mut audiences = strings(req.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences = ctx.state.credentials.api_audiences();
    }
    let issued_at = jiff::Timestamp::now().as_second();
    let claims = token::claims(
        &ctx.state.credentials,
        (&namespace, &name, &uid(&sa)),
        binding,
        expiration,
        audiences.clone(),
        issued_at,
    );
    let signed = if opts.dry_run {
        String::new()
    } else {
        token::sign(&ctx.state.credentials, &claims)
            .map_err(|e| ApiError::internal("signing a token", e))?
    };
    let expires = jiff::Timestamp::from_second(claims.exp)
        .map(api::meta::format_time)
        .unwrap_or_default();
    let mut meta = req
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    meta.entry("creationTimestamp").or_insert(Value::Null);
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    req["metadata"] = Value::Object(meta);
    req["spec"] = json!({
        "audiences": audiences,
        "expirationSeconds": expiration,
        "boundObjectRef": bound,
    });
    req["status"] = json!({"token": signed, "expirationTimestamp": expires});
    req["metadata"]
        .as_object_mut()
        .map(|m| m.entry("creationTimestamp").or_insert(Value::Null));
    Ok(encode(&req, output(ctx.accept())?, StatusCode::CREATED))
}
