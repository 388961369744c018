//! The core resources that are not stored: `componentstatuses` (get and list of objects computed
//! per request: the store, probed with a read, as upstream's `etcd-0`, and the in-process
//! components of [`crate::components`]) and `bindings` (a POST binds the pod the Binding names,
//! through the same storage as `pods/binding`). Every other verb on them is 405, as upstream's
//! REST storage implements only these.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;

use crate::error::{ApiError, Result};
use crate::http::body::decode_object;
use crate::http::query::ListOptions;
use crate::http::render::{respond_list, respond_object, ObjectResponse};
use crate::http::request::Ctx;
use crate::registry::Store;
use crate::registry::Unstored;
use crate::watch_cache::Listed;

/// Handles the request when it targets an unstored resource; `None` for every other resource.
pub async fn handle(
    ctx: &Ctx,
    method: &Method,
    body: &mut Option<Body>,
) -> Option<Result<Response>> {
    if ctx.target.subresource.is_some() {
        return None;
    }
    match ctx.target.resource.strategy.unstored()? {
        Unstored::ComponentStatuses => Some(component_statuses(ctx, method).await),
        Unstored::Bindings => Some(match (method, &ctx.target.name, body.take()) {
            (&Method::POST, None, Some(b)) => bind(ctx, b).await,
            _ => Err(ApiError::method_not_allowed()),
        }),
    }
}

fn condition(result: Result<(), String>) -> Value {
    match result {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(e) => json!({"type": "Healthy", "status": "False", "error": e}),
    }
}

/// The ComponentStatus objects, by name.
async fn statuses(ctx: &Ctx) -> Vec<Arc<Value>> {
    let state = &ctx.state;
    let store = match state.store.get("/registry/namespaces/default").await {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the store failed a read: {e}")),
    };
    let mut items = vec![("etcd-0".to_string(), store)];
    for c in crate::components::CONTROL_PLANE_COMPONENTS {
        items.push((c.to_string(), state.config.components.health(c)));
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    items
        .into_iter()
        .map(|(name, health)| {
            Arc::new(json!({
                "kind": "ComponentStatus",
                "apiVersion": "v1",
                "metadata": {"name": name},
                "conditions": [condition(health)],
            }))
        })
        .collect()
}

async fn component_statuses(ctx: &Ctx, method: &Method) -> Result<Response> {
    if method != Method::GET {
        return Err(ApiError::method_not_allowed());
    }
    let opts = ListOptions::from_query(&ctx.query)?;
    if opts.watch {
        return Err(ApiError::method_not_allowed());
    }
    let all = statuses(ctx).await;
    let resource = &ctx.target.resource;
    match &ctx.target.name {
        Some(name) => {
            let obj = all
                .into_iter()
                .find(|o| api::meta::name(o) == Some(name.as_str()))
                .ok_or_else(|| ApiError::from(api::status::not_found("componentstatuses", name)))?;
            respond_object(
                resource,
                ctx.accept(),
                opts.include_object,
                ObjectResponse {
                    object: obj,
                    json: None,
                    code: StatusCode::OK,
                },
            )
        }
        None => {
            let sel = ctx.store().filter(&opts)?;
            let items: Vec<Listed> = all
                .into_iter()
                .filter(|o| sel.matches(o))
                .map(Listed::object_of)
                .collect();
            respond_list(
                resource,
                ctx.accept(),
                opts.include_object,
                &items,
                json!({}),
            )
        }
    }
}

/// `POST bindings`: the Binding's `metadata.name` is the pod to bind.
async fn bind(ctx: &Ctx, body: Body) -> Result<Response> {
    let opts = ctx.write_options("CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let binding = decode_object(&ctx.headers, &bytes)?;
    let ns = ctx.target.namespace.as_deref().unwrap_or("");
    if api::meta::namespace(&binding).is_some_and(|n| !n.is_empty() && n != ns) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let name = api::meta::name(&binding).unwrap_or("").to_string();
    if name.is_empty() {
        return Err(ApiError::from(api::status::invalid(
            "Binding",
            "",
            &[api::validation::FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )],
        )));
    }
    let pods = ctx
        .state
        .resources
        .find("", "v1", "pods")
        .ok_or_else(ApiError::unknown_path)?;
    let pods = Store::new(&ctx.state, pods, ctx.target.namespace.as_deref());
    type Binding = k8s_openapi::api::core::v1::Binding;
    let body = crate::registry::store::Decoded::Body;
    pods.check_decodes_as::<Binding>(("Binding", "v1"), &binding, body)?;
    // Admitted as upstream's legacy `bindings` resource: a CREATE of `bindings` (no
    // subresource), not of `pods/binding`.
    let request = crate::registry::store::SubresourceRequest {
        operation: crate::admission::webhook::Operation::Create,
        subresource: "",
        kind: crate::registry::store::BINDING,
        name: &name,
        opts: &opts,
    };
    let mutated = ctx
        .store()
        .admit_subresource::<Binding>(request, &binding)
        .await?;
    let binding = mutated.as_ref().unwrap_or(&binding);
    pods.bind_admitted(&name, binding, &opts).await?;
    let body = api::status::to_json(&api::status::StatusObject {
        status: Some("Success".into()),
        code: Some(201),
        ..Default::default()
    });
    Ok(crate::http::render::json(StatusCode::CREATED, &body))
}
