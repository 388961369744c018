//! CertificateSigningRequest and APIService strategies: upstream's messages and field paths,
//! the approval rules, tables.

use crate::registry::{builtin, Resource};
use base64::Engine;
use serde_json::{json, Value};
use std::sync::Arc;

fn r(group: &str, plural: &str) -> Arc<Resource> {
    match builtin::find(group, plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

fn csrs() -> Arc<Resource> {
    r("certificates.k8s.io", "certificatesigningrequests")
}

fn errors(errs: &[api::validation::FieldError]) -> Vec<String> {
    errs.iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn request_pem() -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "jane");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(request: &str) -> Value {
    json!({
        "metadata": {"name": "jane"},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
        },
    })
}

#[test]
fn a_valid_request_passes_and_gets_the_requestor() {
    let res = csrs();
    let mut obj = csr(&request_pem());
    res.prepare_for_create(&mut obj);
    assert_eq!(errors(&res.validate_create(&obj)), Vec::<String>::new());
    assert_eq!(obj["spec"]["username"], "system:admin");
    assert_eq!(obj["status"], json!({}));
}

#[test]
fn bad_requests_get_upstreams_messages() {
    let res = csrs();
    let mut obj = csr("hello");
    obj["spec"]["usages"] = json!(["client auth", "flying", "client auth"]);
    obj["spec"]["signerName"] = json!("signer");
    obj["spec"]["expirationSeconds"] = json!(100);
    let got = errors(&res.validate_create(&obj));
    assert_eq!(
        got,
        vec![
            "spec.request: Invalid value: []byte{0x68, 0x65, 0x6c, 0x6c, 0x6f}: PEM block type must be CERTIFICATE REQUEST".to_string(),
            format!("spec.usages[1]: Unsupported value: \"flying\": supported values: {}", r#""any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment", "decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel", "ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", "server auth", "signing", "timestamping""#),
            "spec.usages[2]: Duplicate value: \"client auth\"".to_string(),
            "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path of the form 'example.com/signer-name'".to_string(),
            "spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 600 seconds (10 minutes)".to_string(),
        ]
    );
    let mut obj = csr(&request_pem());
    obj["spec"]["usages"] = json!([]);
    obj["spec"]["signerName"] = json!("example/x");
    assert_eq!(
        errors(&res.validate_create(&obj)),
        vec![
            "spec.usages: Required value",
            "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots",
        ]
    );
}

fn approved(old: &Value, conds: Value) -> Value {
    let mut new = old.clone();
    new["status"] = json!({"conditions": conds});
    crate::registry::strategy::approval_update(&mut new, old);
    new
}

#[test]
fn approval_rules_follow_upstream() {
    let res = csrs();
    let mut old = csr(&request_pem());
    res.prepare_for_create(&mut old);
    let ok = approved(
        &old,
        json!([{"type": "Approved", "reason": "KubectlApprove"}]),
    );
    assert_eq!(ok["status"]["conditions"][0]["status"], "True");
    assert!(ok["status"]["conditions"][0]["lastUpdateTime"].is_string());
    assert_eq!(
        errors(&crate::registry::strategy::validate_approval_update(
            &ok, &old
        )),
        Vec::<String>::new()
    );
    let both = approved(
        &old,
        json!([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]),
    );
    assert_eq!(
        errors(&crate::registry::strategy::validate_approval_update(&both, &old)),
        vec!["status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"]
    );
    let falsy = approved(&old, json!([{"type": "Approved", "status": "False"}]));
    assert_eq!(
        errors(&crate::registry::strategy::validate_approval_update(
            &falsy, &old
        )),
        vec![
            "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""
        ]
    );
    // Removing an approval is refused; so is approving through /status.
    let removed = approved(&ok, json!([]));
    assert_eq!(
        errors(&crate::registry::strategy::validate_approval_update(
            &removed, &ok
        )),
        vec![
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        ]
    );
    let mut via_status = old.clone();
    via_status["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    assert_eq!(
        errors(&res.validate_update(&via_status, &old)),
        vec!["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
    );
    // The approval path never changes the spec.
    let mut sneaky = ok.clone();
    sneaky["spec"]["usages"] = json!(["server auth"]);
    crate::registry::strategy::approval_update(&mut sneaky, &ok);
    assert_eq!(sneaky["spec"], ok["spec"]);
}

#[test]
fn csr_table_columns_and_condition() {
    let res = csrs();
    let cols: Vec<String> = res
        .strategy
        .table_columns()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        cols,
        [
            "Name",
            "Age",
            "SignerName",
            "Requestor",
            "RequestedDuration",
            "Condition"
        ]
    );
    let mut obj = csr(&request_pem());
    res.prepare_for_create(&mut obj);
    obj["spec"]["expirationSeconds"] = json!(3600);
    obj["status"] =
        json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "eA=="});
    let cells = res.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(cells[2], "kubernetes.io/kube-apiserver-client");
    assert_eq!(cells[3], "system:admin");
    assert_eq!(cells[4], "60m");
    assert_eq!(cells[5], "Approved,Issued");
}

#[test]
fn apiservices_are_validated_and_local_ones_available() {
    let res = r("apiregistration.k8s.io", "apiservices");
    let mut local = crate::registry::strategy::local_apiservice("apps", "v1");
    assert_eq!(local["metadata"]["name"], "v1.apps");
    assert_eq!(local["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(local["spec"]["versionPriority"], 15);
    res.prepare_for_create(&mut local);
    assert_eq!(errors(&res.validate_create(&local)), Vec::<String>::new());
    assert_eq!(local["status"]["conditions"][0]["reason"], "Local");
    let cells = res.strategy.table_cells(&local, jiff::Timestamp::now());
    assert_eq!(
        (cells[1].clone(), cells[2].clone()),
        (json!("Local"), json!("True"))
    );
    let core = crate::registry::strategy::local_apiservice("", "v1");
    assert_eq!(core["metadata"]["name"], "v1.");

    let bad = json!({
        "metadata": {"name": "wrong"},
        "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 5000},
    });
    assert_eq!(
        errors(&res.validate_create(&bad)),
        vec![
            "metadata.name: Invalid value: \"wrong\": must be in the form: <version>.<group>",
            "metadata.name: Invalid value: \"wrong\": must be `spec.version+\".\"+spec.group`",
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
            "spec.versionPriority: Invalid value: 5000: must be positive and less than 1000",
        ]
    );
}
