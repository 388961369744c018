//! The admission chain's flags and its newer plugins end to end, with the real kubectl against a
//! Sandbox: `--enable-admission-plugins` / `--disable-admission-plugins` are checked with
//! upstream's messages and take effect; RuntimeClass gives a pod its class's overhead and
//! scheduling and refuses an unknown class; CertificateSubjectRestriction refuses a
//! `system:masters` CSR for the apiserver client signer; StorageObjectInUseProtection with the
//! `pvc-protection` and `pv-protection` controllers keeps a claim used by a pod (and its volume)
//! until the pod is gone; TaintNodesByCondition taints a new node `not-ready` until the node
//! lifecycle controller sees it Ready; CertificateApproval and CertificateSigning refuse a user
//! without `approve` / `sign` on the signer, with upstream's messages, on a secure sandbox.
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

/// The claims' and pods' API in `default`, and the volumes'.
fn storage_apis(
    sandbox: &minik8s::Sandbox,
) -> (
    minik8s::client::Api<minik8s::k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    minik8s::client::Api<minik8s::k8s_openapi::api::core::v1::Pod>,
    minik8s::client::Api<minik8s::k8s_openapi::api::core::v1::PersistentVolume>,
) {
    let client = sandbox.client();
    (
        client.api(Some("default")),
        client.api(Some("default")),
        client.api(None),
    )
}

fn claim(name: &str) -> minik8s::k8s_openapi::api::core::v1::PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap()
}

fn finalizers(
    meta: &minik8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_used_by_a_pod_stays_until_the_pod_is_gone() {
    use minik8s::client::DeleteParams;
    use tests::eventually;

    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap();
    let (claims, pods, volumes) = storage_apis(&sandbox);
    let created = claims.create(&claim("data")).await.unwrap();
    assert_eq!(
        finalizers(&created.metadata),
        ["kubernetes.io/pvc-protection"]
    );
    let pod: minik8s::k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "user"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        }
    }))
    .unwrap();
    pods.create(&pod).await.unwrap();
    // The claim binds to a provisioned volume, which carries its own finalizer.
    let volume = eventually("the claim bound", || async {
        let c = claims.get("data").await.ok()?;
        c.spec?.volume_name.filter(|v| !v.is_empty())
    })
    .await;
    let pv = volumes.get(&volume).await.unwrap();
    assert_eq!(finalizers(&pv.metadata), ["kubernetes.io/pv-protection"]);
    eventually("the pod running", || async {
        let p = pods.get("user").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;

    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = claims.get("data").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    // A barrier: an unused claim deleted after it goes at once; the one worker of
    // pvc-protection has looked at `data` by then, and kept it.
    claims.create(&claim("unused")).await.unwrap();
    claims
        .delete("unused", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the unused claim gone", || async {
        claims.get_opt("unused").await.ok()?.is_none().then_some(())
    })
    .await;
    let kept = claims.get("data").await.unwrap();
    assert_eq!(finalizers(&kept.metadata), ["kubernetes.io/pvc-protection"]);
    assert!(volumes.get_opt(&volume).await.unwrap().is_some());

    pods.delete("user", &DeleteParams::default()).await.unwrap();
    eventually("the claim gone after its pod", || async {
        claims.get_opt("data").await.ok()?.is_none().then_some(())
    })
    .await;
    // Reclaim policy Delete: the released volume is deleted, and pv-protection lets it go.
    eventually("the volume gone", || async {
        volumes.get_opt(&volume).await.ok()?.is_none().then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_node_is_not_ready_tainted_until_it_reports_ready() {
    use minik8s::client::Patch;
    use minik8s::k8s_openapi::api::core::v1::Node;
    use tests::eventually;

    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap();
    let nodes: minik8s::client::Api<Node> = sandbox.client().api(None);
    let not_ready = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule")
    };
    // The fake kubelet's node reports Ready: its creation taint is gone.
    eventually("the kubelet's node untainted", || async {
        let list = nodes.list(&Default::default()).await.ok()?;
        let node = list.items.first()?;
        (!not_ready(node)).then_some(())
    })
    .await;

    let bare: Node = serde_json::from_value(json!({"metadata": {"name": "bare"}})).unwrap();
    let created = nodes.create(&bare).await.unwrap();
    let taints = created.spec.unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1);
    assert_eq!(taints[0].key, "node.kubernetes.io/not-ready");
    assert_eq!(taints[0].effect, "NoSchedule");

    let status = |ready: &str| {
        Patch::Merge(
            json!({"status": {"conditions": [{"type": "Ready", "status": ready,
            "reason": "Test", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}),
        )
    };
    nodes.patch_status("bare", &status("False")).await.unwrap();
    eventually("not-ready while Ready is False", || async {
        let n = nodes.get("bare").await.ok()?;
        let t = n
            .spec
            .as_ref()?
            .taints
            .as_ref()?
            .iter()
            .find(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule")?;
        let conditions = n.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
            .then(|| t.clone())
    })
    .await;
    nodes.patch_status("bare", &status("True")).await.unwrap();
    eventually("the taint removed once Ready", || async {
        let n = nodes.get("bare").await.ok()?;
        (!not_ready(&n)).then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_and_signing_need_the_signer_verbs() {
    use minik8s::k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use tests::eventually;

    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let (alice_client, alice_path) = sandbox.add_user("alice", &["devs"]).unwrap();
    let admin = tests::Kubectl::new(sandbox.kubeconfig_path());
    const RBAC: &str = "rbac.authorization.k8s.io/v1";
    let role = |name: &str, rules: Value| json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules});
    let binding = |name: &str| {
        json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    };
    let editor = role(
        "csr-editor",
        json!([{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "list", "update", "patch"],
            "resources": ["certificatesigningrequests", "certificatesigningrequests/approval",
                "certificatesigningrequests/status"]}]),
    );
    let mut request = csr("req", &["dev"]);
    request["spec"]["signerName"] = json!("example.com/signer");
    let admin2 = tests::Kubectl::new(sandbox.kubeconfig_path());
    tokio::task::spawn_blocking(move || {
        for obj in [editor, binding("csr-editor"), request] {
            let (ok, text) = create(&admin2, &obj);
            assert!(ok, "{text}");
        }
    })
    .await
    .unwrap();

    let approve = move || {
        let out = tests::Kubectl::new(&alice_path).output(&["certificate", "approve", "req"]);
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    // The binding reaches the authorizer's cache shortly.
    let (ok, text) = eventually("alice may update approvals", || {
        let approve = approve.clone();
        async move {
            let (ok, text) = tokio::task::spawn_blocking(approve).await.ok()?;
            (!text.contains("cannot")).then_some((ok, text))
        }
    })
    .await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to approve requests with signerName \"example.com/signer\""),
        "{text}"
    );

    // `approve` on the signer's domain wildcard lets alice in.
    let approver = role(
        "csr-approver",
        json!([{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
            "resourceNames": ["example.com/*"], "verbs": ["approve"]}]),
    );
    tokio::task::spawn_blocking(move || {
        for obj in [approver, binding("csr-approver")] {
            let (ok, text) = create(&admin, &obj);
            assert!(ok, "{text}");
        }
    })
    .await
    .unwrap();
    eventually("alice approves", || {
        let approve = approve.clone();
        async move {
            tokio::task::spawn_blocking(approve)
                .await
                .ok()?
                .0
                .then_some(())
        }
    })
    .await;

    // Signing through /status needs `sign`.
    let csrs: minik8s::client::Api<CertificateSigningRequest> = alice_client.api(None);
    let mut approved = csrs.get("req").await.unwrap();
    let failed: minik8s::k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition =
        serde_json::from_value(json!({"type": "Failed", "status": "True",
            "reason": "SignerFailure", "message": "cannot sign"}))
        .unwrap();
    approved
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(failed);
    let err = csrs.replace_status("req", &approved).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("user not permitted to sign requests with signerName \"example.com/signer\""),
        "{err}"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_defaults_and_exemptions_come_from_the_admission_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admission.yaml");
    std::fs::write(
        &file,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
         - name: PodSecurity\n  configuration:\n\
         \x20   apiVersion: pod-security.admission.config.k8s.io/v1\n\
         \x20   kind: PodSecurityConfiguration\n\
         \x20   defaults:\n      enforce: baseline\n\
         \x20   exemptions:\n      namespaces: [tools]\n",
    )
    .unwrap();
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .configure(move |c| c.apiserver.admission.load_config_file(&file).unwrap())
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        for ns in ["apps", "tools"] {
            let (ok, text) = create(&k, &namespace(ns, json!({})));
            assert!(ok, "{text}");
        }
        // The default enforce level is baseline now.
        let (ok, text) = create(&k, &pod("apps", "p", privileged_spec()));
        assert!(!ok, "{text}");
        assert!(
            text.contains(
                "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged"
            ),
            "{text}"
        );
        // An exempt namespace is not evaluated.
        let (ok, text) = create(&k, &pod("tools", "p", privileged_spec()));
        assert!(ok, "{text}");
    })
    .await;
    sandbox.stop().await;
}
