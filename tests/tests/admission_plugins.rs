//! The admission chain's flags and its newer plugins end to end, with the real kubectl against a
//! Sandbox: `--enable-admission-plugins` / `--disable-admission-plugins` are checked with
//! upstream's messages and take effect; RuntimeClass gives a pod its class's overhead and
//! scheduling and refuses an unknown class; CertificateSubjectRestriction refuses a
//! `system:masters` CSR for the apiserver client signer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use serde_json::{json, Value};

async fn kubectl<T: Send + 'static>(
    sandbox: &minik8s::Sandbox,
    f: impl FnOnce(tests::Kubectl) -> T + Send + 'static,
) -> T {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    tokio::task::spawn_blocking(move || f(k)).await.unwrap()
}

/// `kubectl create -f` of `obj`; (success, stdout + stderr).
fn create(k: &tests::Kubectl, obj: &Value) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj.json");
    std::fs::write(&file, obj.to_string()).unwrap();
    let out = k.output(&["create", "-f", file.to_str().unwrap()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn pod(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

fn privileged_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_plugin_flags_are_checked_and_disable_pod_security() {
    let err = minik8s::Sandbox::builder()
        .enable_admission_plugins("PodSecurity,Foo")
        .start()
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("cannot start the apiserver: enable-admission-plugins plugin \"Foo\" is unknown")
    );
    let err = minik8s::Sandbox::builder()
        .enable_admission_plugins("PodSecurity")
        .disable_admission_plugins("PodSecurity")
        .start()
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("cannot start the apiserver: [PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped")
    );
    // Enabling a default plugin changes nothing; disabling PodSecurity lets the pod in.
    for (disable, admitted) in [("", false), ("PodSecurity", true)] {
        let sandbox = minik8s::Sandbox::builder()
            .enable_admission_plugins("ResourceQuota")
            .disable_admission_plugins(disable)
            .start()
            .await
            .unwrap();
        let (ok, text) = kubectl(&sandbox, |k| {
            let labels = json!({"pod-security.kubernetes.io/enforce": "restricted"});
            assert!(create(&k, &namespace("s", labels)).0);
            create(&k, &pod("s", "p", privileged_spec()))
        })
        .await;
        assert_eq!(ok, admitted, "{text}");
        sandbox.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_class_overhead_scheduling_and_unknown_class() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let (pod, text) = kubectl(&sandbox, |k| {
        let class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "kata"}, "handler": "kata",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"runtime": "kata"},
                "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]}});
        let (ok, text) = create(&k, &class);
        assert!(ok, "{text}");
        let spec = json!({"runtimeClassName": "kata", "containers": [{"name": "c", "image": "i"}]});
        let (ok, text) = create(&k, &pod("default", "p", spec));
        assert!(ok, "{text}");
        let p = k.json(&["get", "pod", "p"]);
        let spec = json!({"runtimeClassName": "nope", "containers": [{"name": "c", "image": "i"}]});
        let (ok, text) = create(&k, &pod("default", "q", spec));
        assert!(!ok, "{text}");
        (p, text)
    })
    .await;
    assert_eq!(
        pod["spec"]["overhead"],
        json!({"cpu": "250m", "memory": "120Mi"}),
        "{pod}"
    );
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"runtime": "kata"}),
        "{pod}"
    );
    let tolerations = pod["spec"]["tolerations"].as_array().unwrap();
    assert!(tolerations.iter().any(|t| t["key"] == "kata"), "{pod}");
    assert!(
        text.contains("pods \"q\" is forbidden: pod rejected: RuntimeClass \"nope\" not found"),
        "{text}"
    );
    sandbox.stop().await;
}

fn csr(name: &str, orgs: &[&str]) -> Value {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    for o in orgs {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *o);
    }
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "usages": ["client auth"]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_masters_csr_for_the_apiserver_client_signer_is_refused() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        let (ok, text) = create(&k, &csr("root", &["system:masters"]));
        assert!(!ok, "{text}");
        assert!(
            text.contains("certificatesigningrequests.certificates.k8s.io \"root\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"),
            "{text}"
        );
        let (ok, text) = create(&k, &csr("dev", &["dev"]));
        assert!(ok, "{text}");
    })
    .await;
    sandbox.stop().await;
}
