//! The real `/usr/bin/kubectl` against an in-process apiserver: `kubectl autoscale` (a protobuf
//! HorizontalPodAutoscaler body), `kubectl get hpa` at both versions with kubectl's columns, the
//! bootstrap flowcontrol configuration as `kubectl get` shows it, and `kubectl apply -f` of a
//! ValidatingWebhookConfiguration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first} in:\n{out}"))
}

fn header(out: &str) -> Vec<&str> {
    out.lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscale_and_get_hpa_at_both_versions() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let d = k.write("deploy.yaml", DEPLOYMENT);
        k.ok(&["apply", "-f", d.to_str().unwrap()]);
        let out = k.ok(&["autoscale", "deployment", "web", "--max=5", "--cpu-percent=60"]);
        assert!(out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"), "{out}");
        let (ok, out, log) = k.run(&["autoscale", "deployment", "web", "--name=other", "--min=2", "--max=4", "-v=8"]);
        assert!(ok && out.contains("horizontalpodautoscaler.autoscaling/other autoscaled"), "{out}{log}");
        // kubectl sends the generated object as protobuf, at the preferred version.
        assert!(log.contains("Content-Type: application/vnd.kubernetes.protobuf"), "{log}");
        assert!(log.contains("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"), "{log}");

        for resource in ["hpa", "hpa.v1.autoscaling", "horizontalpodautoscalers.v2.autoscaling"] {
            let out = k.ok(&["get", resource]);
            assert_eq!(
                header(&out),
                ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"],
                "{out}"
            );
            let cols = row(&out, "web");
            assert_eq!(&cols[1..6], ["Deployment/web", "cpu:", "<unknown>/60%", "1", "5"], "{out}");
            let cols = row(&out, "other");
            assert_eq!(cols[4], "2", "{out}");
            assert_eq!(cols[5], "4", "{out}");
        }
        // kubectl expands the short name `hpa` to the preferred version: the full resource name
        // selects v1.
        let out = k.ok(&["get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}"]);
        assert_eq!(out, "autoscaling/v1 60");
        let out = k.ok(&["get", "hpa.v2.autoscaling", "web", "-o", "jsonpath={.apiVersion} {.spec.metrics[0].resource.target.averageUtilization}"]);
        assert_eq!(out, "autoscaling/v2 60");

        // A v2 manifest with a scaling behavior, then the same object edited at v1.
        let hpa = k.write(
            "hpa.yaml",
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: tuned\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  maxReplicas: 10\n  metrics:\n  - type: Resource\n    resource:\n      name: memory\n      target:\n        type: AverageValue\n        averageValue: 500Mi\n  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 120\n",
        );
        let out = k.ok(&["apply", "-f", hpa.to_str().unwrap()]);
        assert!(out.contains("horizontalpodautoscaler.autoscaling/tuned created"), "{out}");
        let out = k.ok(&["get", "hpa", "tuned"]);
        assert_eq!(row(&out, "tuned")[2..4], ["memory:", "<unknown>/500Mi"], "{out}");
        let out = k.ok(&["get", "horizontalpodautoscalers.v1.autoscaling", "tuned", "-o", "yaml"]);
        assert!(out.contains("autoscaling.alpha.kubernetes.io/metrics"), "{out}");
        let out = k.ok(&["patch", "horizontalpodautoscalers.v1.autoscaling", "tuned", "-p", "{\"spec\":{\"maxReplicas\":11}}"]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["get", "hpa", "tuned", "-o", "jsonpath={.spec.maxReplicas} {.spec.metrics[0].resource.name} {.spec.behavior.scaleDown.stabilizationWindowSeconds}"]);
        assert_eq!(out, "11 memory 120");

        let bad = k.write(
            "bad.yaml",
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: bad\nspec:\n  scaleTargetRef:\n    kind: Deployment\n    name: web\n  minReplicas: 3\n  maxReplicas: 2\n",
        );
        let (ok, _, err) = k.run(&["create", "-f", bad.to_str().unwrap()]);
        assert!(!ok, "{err}");
        assert!(
            err.contains("The HorizontalPodAutoscaler \"bad\" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"),
            "{err}"
        );
        let out = k.ok(&["explain", "hpa.spec.behavior"]);
        assert!(out.contains("scaleDown") && out.contains("autoscaling"), "{out}");
        let out = k.ok(&["explain", "hpa.spec.targetCPUUtilizationPercentage", "--api-version=autoscaling/v1"]);
        assert!(out.contains("targetCPUUtilizationPercentage"), "{out}");
        let out = k.ok(&["delete", "hpa", "web"]);
        assert!(out.contains("deleted"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_flowschemas_and_priority_levels() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["get", "flowschemas"]);
        assert_eq!(
            header(&out),
            [
                "NAME",
                "PRIORITYLEVEL",
                "MATCHINGPRECEDENCE",
                "DISTINGUISHERMETHOD",
                "AGE",
                "MISSINGPL"
            ],
            "{out}"
        );
        assert_eq!(out.lines().count(), 14, "{out}");
        // Sorted as kubectl's printer sorts them: by matching precedence, then name.
        let order: Vec<&str> = out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(
            order,
            [
                "exempt",
                "probes",
                "system-leader-election",
                "endpoint-controller",
                "workload-leader-election",
                "system-node-high",
                "system-nodes",
                "kube-controller-manager",
                "kube-scheduler",
                "kube-system-service-accounts",
                "service-accounts",
                "global-default",
                "catch-all"
            ],
            "{out}"
        );
        let exempt = row(&out, "exempt");
        assert_eq!(
            (exempt[1], exempt[2], exempt[3], exempt[5]),
            ("exempt", "1", "<none>", "False"),
            "{out}"
        );
        let ksa = row(&out, "kube-system-service-accounts");
        assert_eq!(
            (ksa[1], ksa[2], ksa[3]),
            ("workload-high", "900", "ByNamespace"),
            "{out}"
        );
        let out = k.ok(&["get", "prioritylevelconfigurations"]);
        assert_eq!(
            header(&out),
            [
                "NAME",
                "TYPE",
                "NOMINALCONCURRENCYSHARES",
                "QUEUES",
                "HANDSIZE",
                "QUEUELENGTHLIMIT",
                "AGE"
            ],
            "{out}"
        );
        assert_eq!(
            row(&out, "exempt")[1..6],
            ["Exempt", "<none>", "<none>", "<none>", "<none>"],
            "{out}"
        );
        assert_eq!(
            row(&out, "catch-all")[1..6],
            ["Limited", "5", "<none>", "<none>", "<none>"],
            "{out}"
        );
        assert_eq!(
            row(&out, "workload-low")[1..6],
            ["Limited", "100", "128", "6", "50"],
            "{out}"
        );
        let out = k.ok(&[
            "get",
            "flowschemas,prioritylevelconfigurations",
            "-o",
            "name",
        ]);
        assert!(
            out.contains("flowschema.flowcontrol.apiserver.k8s.io/probes"),
            "{out}"
        );
        assert!(
            out.contains("prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/node-high"),
            "{out}"
        );
        let out = k.ok(&["describe", "flowschema", "probes"]);
        assert!(out.contains("/healthz"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_a_validating_webhook_configuration() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let manifest = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: pod-policy.example.com\nwebhooks:\n- name: pod-policy.example.com\n  rules:\n  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    resources: [\"pods\"]\n    scope: \"Namespaced\"\n  clientConfig:\n    service:\n      namespace: example-namespace\n      name: example-service\n    caBundle: Y2E=\n  admissionReviewVersions: [\"v1\"]\n  sideEffects: None\n  timeoutSeconds: 5\n";
        let f = k.write("vwc.yaml", manifest);
        let out = k.ok(&["apply", "-f", f.to_str().unwrap()]);
        assert!(out.contains("validatingwebhookconfiguration.admissionregistration.k8s.io/pod-policy.example.com created"), "{out}");
        let out = k.ok(&["apply", "-f", f.to_str().unwrap()]);
        assert!(out.contains("unchanged"), "{out}");
        let out = k.ok(&["get", "validatingwebhookconfigurations"]);
        assert_eq!(header(&out), ["NAME", "WEBHOOKS", "AGE"], "{out}");
        assert_eq!(row(&out, "pod-policy.example.com")[1], "1", "{out}");
        let out = k.ok(&["get", "validatingwebhookconfiguration", "pod-policy.example.com", "-o", "jsonpath={.webhooks[0].failurePolicy} {.webhooks[0].timeoutSeconds} {.webhooks[0].clientConfig.service.port}"]);
        assert_eq!(out, "Fail 5 443");
        let edited = manifest.replace("timeoutSeconds: 5", "timeoutSeconds: 50");
        let f = k.write("vwc.yaml", &edited);
        let (ok, _, err) = k.run(&["apply", "-f", f.to_str().unwrap()]);
        assert!(!ok, "{err}");
        assert!(err.contains("webhooks[0].timeoutSeconds: Invalid value: 50: the timeout value must be between 1 and 30 seconds"), "{err}");
        let out = k.ok(&["apply", "--server-side", "-f", k.write("vwc.yaml", manifest).to_str().unwrap()]);
        assert!(out.contains("serverside-applied"), "{out}");
        let out = k.ok(&["get", "validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingwebhookconfigurations"]);
        assert!(out.is_empty() || out.contains("No resources"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}
