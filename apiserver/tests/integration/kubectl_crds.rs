//! The real `/usr/bin/kubectl` with CustomResourceDefinitions: `apply` a CRD, `wait --for
//! condition=established`, then at once `get` (printer columns, `-o wide`, short names, `get
//! all`), `explain`, `scale`, `patch --subresource=status`, and `delete crd` taking its instances
//! along.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A widget of the tests.
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              color:
                type: string
                description: The colour of the widget.
              replicas:
                type: integer
          status:
            type: object
            properties:
              replicas:
                type: integer
              phase:
                type: string
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Phase
      type: string
      jsonPath: .status.phase
      priority: 1
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  color: blue
  replicas: 1
"#;

fn split(line: &str) -> Vec<String> {
    line.split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let crd = k.write("crd.yaml", CRD);
        let out = k.ok(&["apply", "-f", crd.to_str().unwrap()]);
        assert!(
            out.contains(
                "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
            ),
            "{out}"
        );
        let out = k.ok(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            "crd/widgets.example.com",
        ]);
        assert!(out.contains("condition met"), "{out}");
        let out = k.ok(&["get", "crd"]);
        assert_eq!(
            split(out.lines().next().unwrap()),
            ["NAME", "CREATED AT"],
            "{out}"
        );
        assert!(out.contains("widgets.example.com"), "{out}");

        let w = k.write("w.yaml", WIDGET);
        let out = k.ok(&["apply", "-f", w.to_str().unwrap()]);
        assert!(out.contains("widget.example.com/w1 created"), "{out}");
        let out = k.ok(&["get", "widgets"]);
        let mut lines = out.lines();
        assert_eq!(
            split(lines.next().unwrap()),
            ["NAME", "COLOR", "REPLICAS"],
            "{out}"
        );
        assert_eq!(split(lines.next().unwrap()), ["w1", "blue", "1"], "{out}");
        let out = k.ok(&["get", "wd", "-o", "wide"]);
        assert_eq!(
            split(out.lines().next().unwrap()),
            ["NAME", "COLOR", "REPLICAS", "PHASE"],
            "{out}"
        );
        let out = k.ok(&["get", "all"]);
        assert!(out.contains("widget.example.com/w1"), "{out}");
        let w2 = k.write("w2.yaml", &WIDGET.replace("blue", "green"));
        let out = k.ok(&["apply", "-f", w2.to_str().unwrap()]);
        assert!(out.contains("widget.example.com/w1 configured"), "{out}");
        let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.color}"]);
        assert_eq!(out, "green");

        let out = k.ok(&["explain", "widget.spec"]);
        assert!(out.contains("What the widget should be."), "{out}");
        assert!(out.contains("The colour of the widget."), "{out}");

        let out = k.ok(&["scale", "widget", "w1", "--replicas=3"]);
        assert!(out.contains("widget.example.com/w1 scaled"), "{out}");
        let out = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(out, "3");

        let out = k.ok(&[
            "patch",
            "widget",
            "w1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Ready","replicas":3}}"#,
        ]);
        assert!(out.contains("widget.example.com/w1 patched"), "{out}");
        let out = k.ok(&["get", "widget", "w1", "-o", "wide"]);
        assert!(
            out.lines().nth(1).is_some_and(|l| l.contains("Ready")),
            "{out}"
        );
        // kubectl patch defaults to strategic merge: refused for custom resources.
        let (ok, _, err) = k.run(&["patch", "widget", "w1", "-p", r#"{"spec":{"color":"red"}}"#]);
        assert!(
            !ok && err.contains("application/merge-patch+json"),
            "a strategic merge patch was not refused: {err}"
        );

        let out = k.ok(&["delete", "crd", "widgets.example.com"]);
        assert!(
            out.contains(
                "customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted"
            ),
            "{out}"
        );
        let (ok, _, err) = k.run(&["get", "crd", "widgets.example.com"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_crds_with_kubectl_server_side_apply() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/crds/gateway-api");
        let out = k.ok(&["apply", "--server-side", "-f", dir.to_str().unwrap()]);
        assert!(
            out.contains("customresourcedefinition.apiextensions.k8s.io/httproutes.gateway.networking.k8s.io serverside-applied"),
            "{out}"
        );
        let out = k.ok(&[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            "crd",
            "--all",
        ]);
        assert!(out.contains("httproutes.gateway.networking.k8s.io condition met"), "{out}");
        let out = k.ok(&["get", "gatewayclasses"]);
        assert!(out.contains("No resources found") || out.is_empty(), "{out}");
        let out = k.ok(&["explain", "httproute.spec.hostnames"]);
        assert!(out.contains("Hostnames defines a set of hostnames"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}
