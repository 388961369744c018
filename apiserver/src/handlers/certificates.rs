//! `certificatesigningrequests/approval` (GET/PUT/PATCH: only `status.conditions` change, with
//! the approval validation) and the `kubernetes.io/kube-apiserver-client` signer.
//!
//! Upstream the signer is a controller of kube-controller-manager that watches CSRs and writes
//! `status.certificate` through `/status`. Here it runs synchronously right after an approval
//! is stored: a second write, through `/status`, by the field manager
//! `kube-controller-manager`, so watchers see the approval and then the issued certificate, as
//! they would upstream. (The controller crate has no access to the CA; see the report of issue 14.)

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::{json, Value};

use crate::authn::signer;
use crate::error::{ApiError, Result};
use crate::http::body::{decode_object, patch_type};
use crate::http::render::{respond_object, respond_outcome, ObjectResponse};
use crate::http::request::Ctx;
use crate::registry::store::{Attempt, Decoded, Outcome, PatchRequest, WriteScope};
use crate::registry::strategy::{approval_update, validate_approval_update};
use crate::registry::{Preconditions, Store};

/// The signer's field manager.
const SIGNER_MANAGER: &str = "kube-controller-manager";

/// Dispatches `/approval`.
pub async fn approval(ctx: Ctx, method: Method, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    match method {
        Method::GET => {
            let obj = ctx.store().get(&name).await?;
            respond_object(
                &ctx.target.resource,
                ctx.accept(),
                Default::default(),
                ObjectResponse {
                    object: obj,
                    json: None,
                    code: StatusCode::OK,
                },
            )
        }
        Method::PUT | Method::PATCH => {
            let kind = if method == Method::PUT {
                "UpdateOptions"
            } else {
                "PatchOptions"
            };
            let opts = ctx.write_options(kind)?;
            let ty = if method == Method::PATCH {
                Some(patch_type(&ctx.headers)?)
            } else {
                None
            };
            let bytes = ctx.read_body(body).await?;
            let put_body = match ty {
                None => Some(decode_object(&ctx.headers, &bytes)?),
                Some(_) => None,
            };
            let store = ctx.store();
            let info = &ctx.target.resource.info;
            let manager = opts.field_manager.clone();
            let outcome = store
                .guaranteed_update(
                    &name,
                    method.as_str(),
                    &Preconditions::default(),
                    &opts,
                    |current| {
                        let Some(current) = current else {
                            return Err(store.not_found(&name));
                        };
                        let mut new = match (&put_body, ty) {
                            (Some(b), _) => {
                                store.check_type_meta(b)?;
                                let wanted = store.body_precondition(b, &name)?;
                                if wanted.is_some_and(|w| w != current.revision) {
                                    return Err(store.conflict(&name));
                                }
                                b.clone()
                            }
                            (None, Some(ty)) => {
                                crate::patch::apply_patch(info, ty, &current.object, &bytes)
                                    .map_err(|e| {
                                        ApiError::from(e.to_status(&info.group_resource(), &name))
                                    })?
                            }
                            (None, None) => Value::clone(&current.object),
                        };
                        match (&put_body, ty) {
                            (Some(_), _) => store.check_decodes(&new, Decoded::Body)?,
                            (None, Some(ty)) => {
                                let patch = PatchRequest { ty, body: &bytes };
                                store.check_decodes(&new, Decoded::Patched(&patch))?
                            }
                            (None, None) => {}
                        }
                        let old = Value::clone(&current.object);
                        approval_update(&mut new, &old);
                        crate::patch::update_managed_fields(
                            info,
                            Some(&old),
                            &mut new,
                            &manager,
                            &api::meta::now_rfc3339(),
                            Some("approval"),
                        );
                        let errs = validate_approval_update(&new, &old);
                        if !errs.is_empty() {
                            return Err(store.invalid(&name, &errs));
                        }
                        // CertificateApproval, in the validating phase as upstream.
                        store.validate_admission(
                            &new,
                            Some(&old),
                            &name,
                            "approval",
                            Some(&opts),
                        )?;
                        Ok(Attempt::Write(new))
                    },
                )
                .await?;
            let outcome = match (&outcome, opts.dry_run) {
                (Outcome::Stored(w), false) => sign_if_approved(&ctx.state, &name, &w.object)
                    .await
                    .unwrap_or(outcome),
                _ => outcome,
            };
            respond_outcome(&ctx.target.resource, ctx.accept(), outcome)
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn has_condition(obj: &Value, ty: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        })
}

/// Whether the signer has something to do with `csr`: approved, not denied or failed, no
/// certificate yet, and its signer.
fn wants_signing(csr: &Value) -> bool {
    csr.pointer("/spec/signerName").and_then(Value::as_str) == Some(signer::KUBE_APISERVER_CLIENT)
        && has_condition(csr, "Approved")
        && !has_condition(csr, "Denied")
        && !has_condition(csr, "Failed")
        && csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// The signer's pass over the approved CSR `name`: issues its certificate, or fails it with
/// `SignerValidationFailure`. Returns the outcome of that write, `None` when there was nothing
/// to do or the write did not happen (the approval stands either way).
async fn sign_if_approved(
    state: &crate::state::AppState,
    name: &str,
    approved: &Value,
) -> Option<Outcome> {
    if !wants_signing(approved) {
        return None;
    }
    let resource =
        state
            .resources
            .find("certificates.k8s.io", "v1", "certificatesigningrequests")?;
    let store = Store::new(state, resource, None);
    let opts = crate::registry::WriteOptions {
        field_manager: SIGNER_MANAGER.to_string(),
        ..Default::default()
    };
    let creds = state.credentials.clone();
    let result = store
        .guaranteed_update(name, "PUT", &Preconditions::default(), &opts, |current| {
            let Some(current) = current else {
                return Err(store.not_found(name));
            };
            let csr = &current.object;
            if !wants_signing(csr) {
                return Ok(Attempt::Keep);
            }
            let mut new = Value::clone(csr);
            let usages: Vec<String> = csr
                .pointer("/spec/usages")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let now = api::meta::now_rfc3339();
            match signer::check_client_usages(&usages) {
                Err(message) => {
                    let failed = json!({
                        "type": "Failed",
                        "status": "True",
                        "reason": "SignerValidationFailure",
                        "message": message,
                        "lastUpdateTime": now,
                        "lastTransitionTime": now,
                    });
                    if let Some(cs) = new
                        .pointer_mut("/status/conditions")
                        .and_then(Value::as_array_mut)
                    {
                        cs.push(failed);
                    }
                }
                Ok(()) => {
                    let request = csr
                        .pointer("/spec/request")
                        .and_then(Value::as_str)
                        .and_then(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
                        .unwrap_or_default();
                    let expiration = csr
                        .pointer("/spec/expirationSeconds")
                        .and_then(Value::as_i64);
                    match signer::sign(
                        &creds,
                        &request,
                        &usages,
                        expiration,
                        time::OffsetDateTime::now_utc(),
                    ) {
                        Ok(pem) => {
                            new["status"]["certificate"] =
                                json!(base64::engine::general_purpose::STANDARD
                                    .encode(pem.as_bytes()));
                        }
                        Err(e) => {
                            tracing::warn!(csr = name, error = %e, "signing a CSR failed");
                            return Ok(Attempt::Keep);
                        }
                    }
                }
            }
            store.prepare_update(&mut new, csr, WriteScope::Status, SIGNER_MANAGER)?;
            Ok(Attempt::Write(new))
        })
        .await;
    match result {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(csr = name, error = ?e, "storing a signed certificate failed");
            None
        }
    }
}
