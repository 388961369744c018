//! The security APIs over HTTP (router with `oneshot`, no sockets): TokenRequest claims and
//! their signature against the served JWKS, TokenReview accepting and rejecting tokens (expired,
//! wrong audience, deleted or recreated service account, deleted bound pod), SelfSubjectReview,
//! the access reviews for the admin and for a service account against the bootstrap RBAC
//! policy (narrowed by selectors: [`review_selectors`]), CSR approval with a certificate that
//! chains to the sandbox CA, and the Local APIServices.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use base64::Engine;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router_and_state as app;
mod review_selectors;

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn call_with(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if !headers.iter().any(|(k, _)| *k == "accept") {
        req = req.header("accept", "application/json");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = if body.is_null() {
        Body::empty()
    } else {
        Body::from(body.to_string())
    };
    let resp = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn send(app: &Router, method: &str, uri: &str, body: Value) -> (u16, Value) {
    call_with(app, method, uri, &[], body).await
}

fn payload(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn service_account(app: &Router, ns: &str, name: &str) -> String {
    let (code, sa) = send(
        app,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"metadata": {"name": name}}),
    )
    .await;
    assert_eq!(code, 201, "{sa}");
    sa["metadata"]["uid"].as_str().unwrap().to_string()
}

async fn token_for(app: &Router, name: &str, spec: Value) -> (u16, Value) {
    send(
        app,
        "POST",
        &format!("/api/v1/namespaces/default/serviceaccounts/{name}/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
    )
    .await
}

async fn review(app: &Router, token: &str, audiences: Value) -> Value {
    let (code, r) = send(
        app,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "spec": {"token": token, "audiences": audiences}}),
    )
    .await;
    assert_eq!(code, 201, "{r}");
    r["status"].clone()
}

#[tokio::test]
async fn token_requests_carry_upstreams_claims_and_verify_against_the_jwks() {
    let (app, _) = app().await;
    let uid = service_account(&app, "default", "builder").await;
    let (code, tr) = token_for(&app, "builder", json!({})).await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["metadata"]["name"], "builder");
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert_eq!(tr["spec"]["audiences"], json!([ISSUER]));
    let token = tr["status"]["token"].as_str().unwrap();
    let claims = payload(token);
    assert_eq!(claims["iss"], ISSUER);
    assert_eq!(claims["sub"], "system:serviceaccount:default:builder");
    assert_eq!(claims["aud"], json!([ISSUER]));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    assert_eq!(claims["nbf"], claims["iat"]);
    assert!(!claims["jti"].as_str().unwrap().is_empty());
    assert_eq!(
        claims["kubernetes.io"],
        json!({"namespace": "default", "serviceaccount": {"name": "builder", "uid": uid}})
    );
    let expires: jiff::Timestamp = tr["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(expires.as_second(), claims["exp"].as_i64().unwrap());

    // The signature verifies with the key the server publishes.
    let (code, config) = send(
        &app,
        "GET",
        "/.well-known/openid-configuration",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(config["issuer"], ISSUER);
    assert_eq!(config["response_types_supported"], json!(["id_token"]));
    assert_eq!(config["subject_types_supported"], json!(["public"]));
    assert_eq!(
        config["id_token_signing_alg_values_supported"],
        json!(["ES256"])
    );
    assert!(config["jwks_uri"]
        .as_str()
        .unwrap()
        .ends_with("/openid/v1/jwks"));
    let (code, jwks) = send(&app, "GET", "/openid/v1/jwks", Value::Null).await;
    assert_eq!(code, 200);
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "EC");
    let header = jsonwebtoken::decode_header(token).unwrap();
    assert_eq!(header.kid.as_deref(), key["kid"].as_str());
    let decoding = jsonwebtoken::DecodingKey::from_ec_components(
        key["x"].as_str().unwrap(),
        key["y"].as_str().unwrap(),
    )
    .unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[ISSUER]);
    validation.set_issuer(&[ISSUER]);
    assert!(jsonwebtoken::decode::<Value>(token, &decoding, &validation).is_ok());

    // Audiences and duration as asked.
    let (_, tr) = token_for(
        &app,
        "builder",
        json!({"audiences": ["vault"], "expirationSeconds": 7200}),
    )
    .await;
    let claims = payload(tr["status"]["token"].as_str().unwrap());
    assert_eq!(claims["aud"], json!(["vault"]));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        7200
    );
}

#[tokio::test]
async fn token_requests_are_validated_as_upstream() {
    let (app, _) = app().await;
    service_account(&app, "default", "builder").await;
    let (code, st) = token_for(&app, "builder", json!({"expirationSeconds": 100})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 10 minutes"
    );
    let (code, st) = token_for(&app, "nobody", json!({})).await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "serviceaccounts \"nobody\" not found");

    // Bound objects: the pod must exist, run as the service account and have the uid given.
    let (code, pod) = send(
        &app,
        "POST",
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "web"},
               "spec": {"serviceAccountName": "builder", "containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    assert_eq!(code, 201, "{pod}");
    let pod_uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let bound = |name: &str, uid: &str| json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}});
    let (code, tr) = token_for(&app, "builder", bound("web", &pod_uid)).await;
    assert_eq!(code, 201, "{tr}");
    let claims = payload(tr["status"]["token"].as_str().unwrap());
    assert_eq!(
        claims["kubernetes.io"]["pod"],
        json!({"name": "web", "uid": pod_uid})
    );
    let (code, st) = token_for(&app, "builder", bound("web", "other-uid")).await;
    assert_eq!(code, 409);
    assert_eq!(
        st["message"],
        "Operation cannot be fulfilled on Pod \"web\": the UID in the bound object reference (other-uid) does not match the UID in record. The object might have been deleted and then recreated"
    );
    let (code, st) = token_for(&app, "builder", bound("missing", "")).await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "pods \"missing\" not found");
    service_account(&app, "default", "other").await;
    let (code, st) = token_for(&app, "other", bound("web", "")).await;
    assert_eq!(code, 400);
    assert_eq!(
        st["message"],
        "cannot bind token for serviceaccount \"other\" to pod running with serviceaccount \"builder\""
    );
    let (code, st) = token_for(
        &app,
        "builder",
        json!({"boundObjectRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        st["message"],
        "cannot bind token to object of type apps/v1, Kind=Deployment"
    );
}

#[tokio::test]
async fn token_reviews_accept_valid_tokens_and_reject_the_rest() {
    let (app, state) = app().await;
    let uid = service_account(&app, "default", "builder").await;
    send(
        &app,
        "POST",
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "web"},
               "spec": {"serviceAccountName": "builder", "containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    let (_, tr) = token_for(
        &app,
        "builder",
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web"}}),
    )
    .await;
    let token = tr["status"]["token"].as_str().unwrap().to_string();
    let jti = payload(&token)["jti"].as_str().unwrap().to_string();
    let pod_uid = payload(&token)["kubernetes.io"]["pod"]["uid"].clone();

    let st = review(&app, &token, json!([])).await;
    assert_eq!(st["authenticated"], true, "{st}");
    assert_eq!(st["audiences"], json!([ISSUER]));
    assert_eq!(
        st["user"],
        json!({
            "username": "system:serviceaccount:default:builder",
            "uid": uid,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
            "extra": {
                "authentication.kubernetes.io/credential-id": [format!("JTI={jti}")],
                "authentication.kubernetes.io/pod-name": ["web"],
                "authentication.kubernetes.io/pod-uid": [pod_uid],
            },
        })
    );

    // Wrong audience.
    let st = review(&app, &token, json!(["vault"])).await;
    assert_eq!(st["authenticated"], Value::Null);
    assert_eq!(
        st["error"],
        format!("token audiences [\"{ISSUER}\"] is invalid for the target audiences [\"vault\"]")
    );

    // Expired (signed by the server's key an hour and more ago).
    let now = jiff::Timestamp::now().as_second();
    let old = apiserver::authn::token::claims(
        &state.credentials,
        ("default", "builder", &uid),
        Default::default(),
        3600,
        vec![ISSUER.to_string()],
        now - 3600 - 120,
    );
    let expired = apiserver::authn::token::sign(&state.credentials, &old).unwrap();
    let st = review(&app, &expired, json!([])).await;
    assert_eq!(st["error"], "service account token has expired");

    // Tampered signature, and something that is not a token of this issuer.
    let mut tampered = token.clone();
    tampered.pop();
    tampered.push(if token.ends_with('A') { 'B' } else { 'A' });
    let st = review(&app, &tampered, json!([])).await;
    assert_eq!(st["authenticated"], Value::Null);
    assert!(st["error"].is_string(), "{st}");
    let st = review(&app, "not-a-jwt", json!([])).await;
    assert_eq!(st, json!({"user": {}}));

    // An empty token is a bad request.
    let (code, st) = send(
        &app,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"spec": {}}),
    )
    .await;
    assert_eq!(code, 400, "{st}");

    // The bound pod deleted: the token is invalidated.
    let (code, _) = send(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let st = review(&app, &token, json!([])).await;
    assert_eq!(st["error"], "service account token has been invalidated");

    // The service account deleted, then recreated with a new uid.
    let (_, tr) = token_for(&app, "builder", json!({})).await;
    let plain = tr["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(review(&app, &plain, json!([])).await["authenticated"], true);
    let (code, _) = send(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/builder",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let st = review(&app, &plain, json!([])).await;
    assert_eq!(st["error"], "serviceaccounts \"builder\" not found");
    let new_uid = service_account(&app, "default", "builder").await;
    let st = review(&app, &plain, json!([])).await;
    assert_eq!(
        st["error"],
        format!("service account UID ({new_uid}) does not match claim ({uid})")
    );
}

#[tokio::test]
async fn self_subject_review_names_the_fixed_admin_or_the_impersonated_user() {
    let (app, _) = app().await;
    let (code, r) = send(
        &app,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(
        r["status"]["userInfo"],
        json!({"username": "system:admin", "groups": ["system:masters", "system:authenticated"]})
    );
    let (_, r) = call_with(
        &app,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[("Impersonate-User", "jane"), ("Impersonate-Group", "devs")],
        json!({}),
    )
    .await;
    assert_eq!(
        r["status"]["userInfo"],
        json!({"username": "jane", "groups": ["devs", "system:authenticated"]})
    );
    // Reviews are create-only.
    let (code, _) = send(
        &app,
        "GET",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Value::Null,
    )
    .await;
    assert_eq!(code, 405);
}

async fn sar(app: &Router, plural: &str, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    let uri = if plural == "localsubjectaccessreviews" {
        format!("/apis/authorization.k8s.io/v1/namespaces/default/{plural}")
    } else {
        format!("/apis/authorization.k8s.io/v1/{plural}")
    };
    call_with(app, "POST", &uri, headers, body).await
}

#[tokio::test]
async fn access_reviews_answer_for_the_admin_and_against_the_bootstrap_rbac_policy() {
    let (app, _) = app().await;
    let pods = json!({"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}});
    let (code, r) = sar(&app, "selfsubjectaccessreviews", &[], json!({"spec": pods})).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"], json!({"allowed": true}));

    let sa = "system:serviceaccount:default:default";
    let secrets = json!({"namespace": "default", "verb": "list", "resource": "secrets"});
    let (_, r) = sar(
        &app,
        "subjectaccessreviews",
        &[],
        json!({"spec": {"user": sa, "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"], "resourceAttributes": secrets}}),
    )
    .await;
    assert_eq!(r["status"], json!({"allowed": false}));
    // The same through impersonation (`kubectl auth can-i --as`).
    let (_, r) = sar(
        &app,
        "selfsubjectaccessreviews",
        &[("Impersonate-User", sa)],
        json!({"spec": {"resourceAttributes": secrets}}),
    )
    .await;
    assert_eq!(r["status"], json!({"allowed": false}));
    // What every authenticated user may do, with RBAC's reason.
    let (_, r) = sar(
        &app,
        "subjectaccessreviews",
        &[],
        json!({"spec": {"user": sa, "groups": ["system:authenticated"], "nonResourceAttributes": {"path": "/version", "verb": "get"}}}),
    )
    .await;
    assert_eq!(r["status"]["allowed"], true, "{r}");
    assert!(r["status"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("RBAC: allowed by ClusterRoleBinding "));

    // A RoleBinding created now counts at once.
    let (code, _) = send(
        &app,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"metadata": {"name": "sa-view"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}),
    )
    .await;
    assert_eq!(code, 201);
    let (_, r) = sar(
        &app,
        "localsubjectaccessreviews",
        &[],
        json!({"spec": {"user": sa, "resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}}),
    )
    .await;
    assert_eq!(r["status"]["allowed"], true, "{r}");
    assert_eq!(
        r["status"]["reason"],
        "RBAC: allowed by RoleBinding \"sa-view/default\" of ClusterRole \"view\" to ServiceAccount \"default/default\""
    );

    // Validation as upstream.
    let (code, st) = sar(
        &app,
        "subjectaccessreviews",
        &[],
        json!({"spec": {"resourceAttributes": secrets}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
    let (code, st) = sar(&app, "selfsubjectaccessreviews", &[], json!({"spec": {}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    let (code, st) = sar(
        &app,
        "localsubjectaccessreviews",
        &[],
        json!({"spec": {"user": "u", "resourceAttributes": {"namespace": "other", "verb": "get", "resource": "pods"}}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
    );

    // Rules: the admin may do everything; a service account what its bindings give.
    let (code, r) = sar(
        &app,
        "selfsubjectrulesreviews",
        &[],
        json!({"spec": {"namespace": "default"}}),
    )
    .await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(
        r["status"]["resourceRules"][0],
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
    );
    assert_eq!(
        r["status"]["nonResourceRules"][0],
        json!({"verbs": ["*"], "nonResourceURLs": ["*"]})
    );
    assert_eq!(r["status"]["incomplete"], false);
    let (_, r) = sar(
        &app,
        "selfsubjectrulesreviews",
        &[("Impersonate-User", sa)],
        json!({"spec": {"namespace": "default"}}),
    )
    .await;
    let rules = r["status"]["resourceRules"].as_array().unwrap();
    assert!(rules
        .iter()
        .all(|r| r["verbs"] != json!(["*"]) || r["resources"] != json!(["*"])));
    assert!(rules
        .iter()
        .any(|r| r["resources"].as_array().unwrap().contains(&json!("pods"))));
    let (code, _) = sar(&app, "selfsubjectrulesreviews", &[], json!({"spec": {}})).await;
    assert_eq!(code, 400);
}

fn csr_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

async fn create_csr(app: &Router, name: &str, usages: Value) -> Value {
    let (code, csr) = send(
        app,
        "POST",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        json!({"metadata": {"name": name}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(csr_pem(name)),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": 86400,
            "usages": usages,
        }}),
    )
    .await;
    assert_eq!(code, 201, "{csr}");
    csr
}

async fn decide_csr(app: &Router, mut csr: Value, ty: &str) -> (u16, Value) {
    let name = csr["metadata"]["name"].as_str().unwrap().to_string();
    let mut conditions = csr["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.push(
        json!({"type": ty, "status": "True", "reason": "KubectlApprove", "message": "by test"}),
    );
    csr["status"]["conditions"] = Value::Array(conditions);
    send(
        app,
        "PUT",
        &format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval"),
        csr,
    )
    .await
}

#[tokio::test]
async fn approved_client_csrs_get_a_certificate_from_the_sandbox_ca() {
    let (app, state) = app().await;
    let csr = create_csr(&app, "jane", json!(["client auth", "digital signature"])).await;
    assert_eq!(csr["spec"]["username"], "system:admin");
    let (code, approved) = decide_csr(&app, csr, "Approved").await;
    assert_eq!(code, 200, "{approved}");
    let (_, got) = send(
        &app,
        "GET",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/jane",
        Value::Null,
    )
    .await;
    assert_eq!(got["status"]["conditions"][0]["type"], "Approved");
    let pem_text = base64::engine::general_purpose::STANDARD
        .decode(got["status"]["certificate"].as_str().expect("issued"))
        .unwrap();
    let cert_der = pem::parse(&pem_text).unwrap().into_contents();
    use x509_parser::prelude::FromDer;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&cert_der).unwrap();
    let ca_der = pem::parse(state.credentials.ca_pem())
        .unwrap()
        .into_contents();
    let (_, ca) = x509_parser::certificate::X509Certificate::from_der(&ca_der).unwrap();
    assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
    let cn: Vec<_> = cert.subject().iter_common_name().collect();
    assert_eq!(cn[0].as_str().unwrap(), "jane");
    let life = cert.validity().not_after.timestamp() - jiff::Timestamp::now().as_second();
    assert!((86400 - 60..=86400).contains(&life), "{life}");
    // kubectl's columns.
    let (_, table) = call_with(
        &app,
        "GET",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        &[("accept", TABLE)],
        Value::Null,
    )
    .await;
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[2], "kubernetes.io/kube-apiserver-client");
    assert_eq!(cells[3], "system:admin");
    assert_eq!(cells[4], "24h");
    assert_eq!(cells[5], "Approved,Issued");

    // A denied one may not be approved too.
    let csr = create_csr(&app, "bob", json!(["client auth"])).await;
    let (code, denied) = decide_csr(&app, csr, "Denied").await;
    assert_eq!(code, 200, "{denied}");
    let (code, st) = decide_csr(&app, denied, "Approved").await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "CertificateSigningRequest.certificates.k8s.io \"bob\" is invalid: status.conditions[1].type: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"
    );
    // Approving through /status is refused.
    let mut csr = create_csr(&app, "eve", json!(["client auth"])).await;
    csr["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let (code, st) = send(
        &app,
        "PUT",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/eve/status",
        csr,
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "CertificateSigningRequest.certificates.k8s.io \"eve\" is invalid: status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
    );
    // Usages the client signer does not issue fail the request.
    let csr = create_csr(&app, "srv", json!(["server auth"])).await;
    decide_csr(&app, csr, "Approved").await;
    let (_, got) = send(
        &app,
        "GET",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/srv",
        Value::Null,
    )
    .await;
    let failed = &got["status"]["conditions"][1];
    assert_eq!(failed["type"], "Failed");
    assert_eq!(failed["reason"], "SignerValidationFailure");
    assert_eq!(
        failed["message"],
        "invalid usage for client certificate: server auth"
    );
    assert!(got["status"].get("certificate").is_none());
    // A request that is not a CSR.
    let (code, st) = send(
        &app,
        "POST",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        json!({"metadata": {"name": "x"}, "spec": {"request": "aGk=", "signerName": "example.com/s", "usages": ["client auth"]}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["details"]["causes"][0]["message"],
        "Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"
    );
}

#[tokio::test]
async fn a_local_apiservice_is_listed_for_every_served_group_version() {
    let (app, state) = app().await;
    let (code, list) = send(
        &app,
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    let served = state.resources.snapshot();
    for (g, v) in served.group_versions() {
        let want = format!("{v}.{g}");
        assert!(names.contains(&want.as_str()), "{want} in {names:?}");
    }
    let (_, apps) = send(
        &app,
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps",
        Value::Null,
    )
    .await;
    assert_eq!(
        apps["spec"],
        json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15})
    );
    assert_eq!(
        apps["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    assert_eq!(apps["status"]["conditions"][0]["reason"], "Local");
    let (_, table) = call_with(
        &app,
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        &[("accept", TABLE)],
        Value::Null,
    )
    .await;
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Service", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "Local");
    assert_eq!(table["rows"][0]["cells"][2], "True");
    // Seeding again (a restart) creates nothing twice.
    apiserver::bootstrap::seed(&state).await.unwrap();
    let (_, again) = send(
        &app,
        "GET",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        Value::Null,
    )
    .await;
    assert_eq!(again["items"].as_array().unwrap().len(), names.len());
}

#[tokio::test]
async fn apiservices_follow_resources_registered_and_removed_at_run_time() {
    let (app, state) = app().await;
    let widgets = api::ResourceInfo::new("example.com", "v1alpha1", "Widget", "widgets");
    state
        .resources
        .register(apiserver::registry::Resource::new(
            widgets,
            Arc::new(apiserver::registry::GenericStrategy),
        ))
        .unwrap();
    let uri = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.example.com";
    // The follower runs in the background: wait for it, bounded.
    let mut found = Value::Null;
    for _ in 0..500 {
        let (code, obj) = send(&app, "GET", uri, Value::Null).await;
        if code == 200 {
            found = obj;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        found["spec"],
        json!({"group": "example.com", "version": "v1alpha1", "groupPriorityMinimum": 1000, "versionPriority": 100})
    );
    assert_eq!(
        found["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    state.resources.remove("example.com", "v1alpha1", "widgets");
    let mut code = 200;
    for _ in 0..500 {
        code = send(&app, "GET", uri, Value::Null).await.0;
        if code == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(code, 404);
}
