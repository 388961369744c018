//! The real kubectl, oldest and newest the machine offers (1.27 directly, 1.33 through the
//! dispatcher), against an in-process apiserver: `kubectl explain` from the served OpenAPI,
//! `apply --validate=strict`, and server-side apply taking over from client-side apply (`apply`,
//! then `diff --server-side` and `apply --server-side` with a changed image), as upstream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

/// kubectl 1.27 (run directly) and the dispatcher (which runs 1.33 against our `/version`).
const KUBECTLS: &[&str] = &[
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/bin/kubectl",
];

fn pod(image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  containers:\n  - name: nginx\n    image: {image}\n    ports:\n    - containerPort: 80\n"
    )
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:1.27\n        env:\n        - name: A\n          value: b\n";

/// Runs `bin`, failing the test on a non-zero exit or an error on stderr.
fn ok(k: &Kube, bin: &str, args: &[&str]) -> String {
    let (ok, out, err) = k.run_with(bin, args);
    assert!(ok, "{bin} {args:?} failed:\nstdout: {out}\nstderr: {err}");
    assert!(
        !err.to_lowercase().contains("error"),
        "{bin} {args:?}: {err}"
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_strict_validation() {
    for bin in KUBECTLS {
        let server = common::start().await;
        let k = Kube::new(&server.url());
        blocking(move || {
            for (what, field) in [
                ("pods.spec", "containers"),
                ("deployments.apps.spec", "replicas"),
                ("services.spec", "ports"),
                ("configmaps", "data"),
                ("jobs.batch.spec", "backoffLimit"),
                ("clusterroles", "rules"),
                ("namespaces", "spec"),
            ] {
                let out = ok(&k, bin, &["explain", what]);
                assert!(
                    out.contains("KIND:") && out.contains("FIELDS:"),
                    "{bin} explain {what}: {out}"
                );
                assert!(out.contains(field), "{bin} explain {what}: {out}");
            }
            let out = ok(&k, bin, &["explain", "pods.spec.containers.image"]);
            assert!(out.contains("FIELD: image"), "{bin}: {out}");

            let f = k.write("d.yaml", DEPLOYMENT);
            let out = ok(
                &k,
                bin,
                &["apply", "--validate=strict", "-f", f.to_str().unwrap()],
            );
            assert!(out.contains("deployment.apps/web created"), "{bin}: {out}");
            let f = k.write("p.yaml", &pod("nginx:1.27"));
            let out = ok(
                &k,
                bin,
                &["create", "--validate=strict", "-f", f.to_str().unwrap()],
            );
            assert!(out.contains("pod/web created"), "{bin}: {out}");
            // Unknown fields are refused under strict validation, with upstream's wording.
            let bad = k.write(
                "bad.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nbogus: 1\n",
            );
            let (okd, _, err) = k.run_with(
                bin,
                &["apply", "--validate=strict", "-f", bad.to_str().unwrap()],
            );
            assert!(
                !okd && err.contains("unknown field \"bogus\""),
                "{bin}: {err}"
            );
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_takes_over_from_client_side_apply() {
    for bin in KUBECTLS {
        let server = common::start().await;
        let k = Kube::new(&server.url());
        blocking(move || {
            let f = k.write("pod.yaml", &pod("nginx:1.27"));
            let path = f.to_str().unwrap().to_string();
            let out = ok(&k, bin, &["apply", "-f", &path]);
            assert!(out.contains("pod/web created"), "{bin}: {out}");

            k.write("pod.yaml", &pod("nginx:1.28"));
            // The diff shows the change; kubectl diff exits 1 when there are differences.
            let (_, out, err) = k.run_with(bin, &["diff", "--server-side", "-f", &path]);
            assert!(
                !err.to_lowercase().contains("error") && !err.contains("conflict"),
                "{bin}: {err}"
            );
            let changed = |sign: char, image: &str| {
                out.lines()
                    .any(|l| l.starts_with(sign) && l.contains(&format!("image: {image}")))
            };
            assert!(
                changed('-', "nginx:1.27") && changed('+', "nginx:1.28"),
                "{bin}: {out}"
            );

            let out = ok(&k, bin, &["apply", "--server-side", "-f", &path]);
            assert!(out.contains("pod/web serverside-applied"), "{bin}: {out}");
            let out = ok(
                &k,
                bin,
                &[
                    "get",
                    "pod",
                    "web",
                    "-o",
                    "jsonpath={.spec.containers[0].image}",
                ],
            );
            assert_eq!(out, "nginx:1.28", "{bin}");
            // The image is now kubectl's (Apply); client-side apply no longer owns it.
            let out = ok(
                &k,
                bin,
                &["get", "pod", "web", "--show-managed-fields", "-o", "json"],
            );
            let pod: serde_json::Value = serde_json::from_str(&out).unwrap();
            let entries = pod["metadata"]["managedFields"].as_array().unwrap();
            let owns_image = |e: &serde_json::Value| {
                e["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
                    .get("f:image")
                    .is_some()
            };
            let ssa = entries
                .iter()
                .find(|e| e["manager"] == "kubectl" && e["operation"] == "Apply")
                .unwrap_or_else(|| panic!("{bin}: no kubectl Apply entry: {out}"));
            assert!(owns_image(ssa), "{bin}: {out}");
            for e in entries
                .iter()
                .filter(|e| e["manager"] == "kubectl-client-side-apply")
            {
                assert!(!owns_image(e), "{bin}: {out}");
            }

            // A field another manager set to a different value still conflicts.
            ok(
                &k,
                bin,
                &["label", "pod", "web", "app=other", "--overwrite"],
            );
            let (okd, _, err) = k.run_with(bin, &["apply", "--server-side", "-f", &path]);
            assert!(!okd && err.contains("conflict"), "{bin}: {err}");
        })
        .await;
    }
}
