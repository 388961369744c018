//! The real `/usr/bin/kubectl` against an in-process apiserver: `kubectl create ingress` (a
//! protobuf body) with rules and a class, `kubectl get ingress` with kubectl's columns,
//! `kubectl apply -f` of a NetworkPolicy, a StorageClass and a RuntimeClass, `kubectl get sc`
//! marking the default class, and upstream's validation errors as kubectl prints them.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_get_ingresses() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&[
            "create", "ingress", "web", "--class=nginx",
            "--rule=foo.com/=web:80", "--rule=bar.com/api*=api:http,tls=bar-tls",
        ]);
        assert!(out.contains("ingress.networking.k8s.io/web created"), "{out}");
        let out = k.ok(&["create", "ingress", "catch-all", "--default-backend=web:80"]);
        assert!(out.contains("ingress.networking.k8s.io/catch-all created"), "{out}");

        let out = k.ok(&["get", "ingress"]);
        assert_eq!(header(&out), ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"], "{out}");
        let cols = row(&out, "web");
        assert_eq!((cols[1], cols[2], cols[3], cols[4]), ("nginx", "foo.com,bar.com", "80,", "443"), "{out}");
        let cols = row(&out, "catch-all");
        assert_eq!((cols[1], cols[2], cols[3]), ("<none>", "*", "80"), "{out}");

        let out = k.ok(&["get", "ing", "web", "-o", "jsonpath={.spec.rules[1].http.paths[0].pathType} {.spec.rules[0].http.paths[0].pathType} {.spec.rules[1].http.paths[0].backend.service.port.name} {.spec.tls[0].secretName} {.metadata.generation}"]);
        assert_eq!(out.trim(), "Prefix Exact http bar-tls 1", "{out}");

        let (ok, _, err) = k.run(&["create", "ingress", "bad", "--rule=foo.com/=Bad_Service:80"]);
        assert!(!ok, "{err}");
        assert!(err.contains("error: failed to create ingress: Ingress.networking.k8s.io \"bad\" is invalid: spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Bad_Service\": a DNS-1035 label"), "{err}");

        let out = k.ok(&["describe", "ingress", "web"]);
        assert!(out.contains("Ingress Class:    nginx") && out.contains("foo.com") && out.contains("bar-tls terminates bar.com"), "{out}");
        let out = k.ok(&["annotate", "ingress", "web", "team=web"]);
        assert!(out.contains("annotated"), "{out}");
        let out = k.ok(&["delete", "ingress", "web", "catch-all"]);
        assert!(out.contains("\"web\" deleted") && out.contains("\"catch-all\" deleted"), "{out}");
    })
    .await;
}

const MANIFESTS: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
  namespace: default
spec:
  podSelector:
    matchLabels:
      app: db
  ingress:
  - from:
    - podSelector:
        matchLabels:
          app: web
    - ipBlock:
        cidr: 10.0.0.0/16
        except: [10.0.1.0/24]
    ports:
    - port: 5432
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: slow
provisioner: example.com/slow
reclaimPolicy: Retain
allowVolumeExpansion: true
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
scheduling:
  nodeSelector:
    sandbox: "true"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
spec:
  controller: k8s.io/ingress-nginx
"#;

const CSI_MANIFESTS: &str = r#"apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: csi.example.com
spec: {}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: node-1
spec:
  drivers:
  - name: csi.example.com
    nodeID: node-1
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: va-1
spec:
  attacher: csi.example.com
  nodeName: node-1
  source:
    persistentVolumeName: pv-1
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata:
  name: cap-1
  namespace: default
storageClassName: standard
capacity: 10Gi
---
apiVersion: networking.k8s.io/v1
kind: IPAddress
metadata:
  name: 10.96.0.100
spec:
  parentRef:
    resource: services
    namespace: default
    name: web
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_network_policy_storage_class_and_runtime_class() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let f = k.write("bundle.yaml", MANIFESTS);
        let out = k.ok(&["apply", "-f", f.to_str().unwrap()]);
        for line in [
            "networkpolicy.networking.k8s.io/db created",
            "storageclass.storage.k8s.io/standard created",
            "storageclass.storage.k8s.io/slow created",
            "runtimeclass.node.k8s.io/gvisor created",
            "ingressclass.networking.k8s.io/nginx created",
        ] {
            assert!(out.contains(line), "{out}");
        }
        // Applying again changes nothing.
        let out = k.ok(&["apply", "-f", f.to_str().unwrap()]);
        assert!(
            out.contains("storageclass.storage.k8s.io/standard unchanged"),
            "{out}"
        );

        let out = k.ok(&["get", "sc"]);
        assert_eq!(
            header(&out),
            [
                "NAME",
                "PROVISIONER",
                "RECLAIMPOLICY",
                "VOLUMEBINDINGMODE",
                "ALLOWVOLUMEEXPANSION",
                "AGE"
            ],
            "{out}"
        );
        let cols = row(&out, "standard");
        assert_eq!(
            &cols[1..6],
            [
                "(default)",
                "rancher.io/local-path",
                "Delete",
                "WaitForFirstConsumer",
                "false"
            ],
            "{out}"
        );
        let cols = row(&out, "slow");
        assert_eq!(
            &cols[1..5],
            ["example.com/slow", "Retain", "Immediate", "true"],
            "{out}"
        );

        let out = k.ok(&["get", "netpol"]);
        assert_eq!(header(&out), ["NAME", "POD-SELECTOR", "AGE"], "{out}");
        assert_eq!(row(&out, "db")[1], "app=db", "{out}");
        let out = k.ok(&[
            "get",
            "netpol",
            "db",
            "-o",
            "jsonpath={.spec.policyTypes} {.spec.ingress[0].ports[0].protocol}",
        ]);
        assert_eq!(out.trim(), "[\"Ingress\"] TCP", "{out}");

        let out = k.ok(&["get", "runtimeclass"]);
        assert_eq!(header(&out), ["NAME", "HANDLER", "AGE"], "{out}");
        assert_eq!(row(&out, "gvisor")[1], "runsc", "{out}");
        let out = k.ok(&["get", "ingressclass"]);
        assert_eq!(
            header(&out),
            ["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
            "{out}"
        );
        assert_eq!(
            &row(&out, "nginx")[1..3],
            ["k8s.io/ingress-nginx", "<none>"],
            "{out}"
        );
        let out = k.ok(&["get", "servicecidrs"]);
        assert_eq!(header(&out), ["NAME", "CIDRS", "AGE"], "{out}");
        assert_eq!(row(&out, "kubernetes")[1], "10.96.0.0/12", "{out}");

        let out = k.ok(&["describe", "sc", "standard"]);
        assert!(
            out.contains("IsDefaultClass:  Yes")
                && out.contains("VolumeBindingMode:     WaitForFirstConsumer"),
            "{out}"
        );
        let out = k.ok(&["describe", "netpol", "db"]);
        assert!(
            out.contains("PodSelector:     app=db") && out.contains("10.0.1.0/24"),
            "{out}"
        );
        k.ok(&["describe", "runtimeclass", "gvisor"]);

        // Immutable fields, as kubectl reports upstream's refusal.
        let changed = MANIFESTS.replace(
            "provisioner: rancher.io/local-path",
            "provisioner: other.io/x",
        );
        let f2 = k.write("changed.yaml", &changed);
        let (ok, _, err) = k.run(&["apply", "-f", f2.to_str().unwrap()]);
        assert!(!ok, "{err}");
        assert!(
            err.contains("provisioner: Forbidden: updates to provisioner are forbidden."),
            "{err}"
        );
        let changed = MANIFESTS.replace("handler: runsc", "handler: kata");
        let f3 = k.write("changed-rc.yaml", &changed);
        let (ok, _, err) = k.run(&["apply", "-f", f3.to_str().unwrap()]);
        assert!(!ok, "{err}");
        assert!(
            err.contains("handler: Invalid value: \"kata\": field is immutable"),
            "{err}"
        );

        let more = k.write("csi.yaml", CSI_MANIFESTS);
        k.ok(&["apply", "-f", more.to_str().unwrap()]);
        for (resource, want) in [
            (
                "csidrivers",
                vec![
                    "NAME",
                    "ATTACHREQUIRED",
                    "PODINFOONMOUNT",
                    "STORAGECAPACITY",
                    "TOKENREQUESTS",
                    "REQUIRESREPUBLISH",
                    "MODES",
                    "AGE",
                ],
            ),
            ("csinodes", vec!["NAME", "DRIVERS", "AGE"]),
            (
                "volumeattachments",
                vec!["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"],
            ),
            (
                "csistoragecapacities",
                vec!["NAME", "STORAGECLASSNAME", "CAPACITY"],
            ),
            ("ipaddresses", vec!["NAME", "PARENTREF"]),
        ] {
            let out = k.ok(&["get", resource]);
            assert_eq!(header(&out), want, "{out}");
        }
        let out = k.ok(&["get", "csidrivers"]);
        assert_eq!(
            &row(&out, "csi.example.com")[1..7],
            ["true", "false", "false", "<unset>", "false", "Persistent"],
            "{out}"
        );
        let out = k.ok(&["get", "volumeattachments"]);
        assert_eq!(
            &row(&out, "va-1")[1..5],
            ["csi.example.com", "pv-1", "node-1", "false"],
            "{out}"
        );
        let out = k.ok(&["get", "ip"]);
        assert_eq!(row(&out, "10.96.0.100")[1], "services/default/web", "{out}");

        // Server-side apply of the same objects takes them over.
        let out = k.ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            f.to_str().unwrap(),
        ]);
        assert!(
            out.contains("storageclass.storage.k8s.io/standard serverside-applied"),
            "{out}"
        );
        let out = k.ok(&["explain", "networkpolicy.spec.ingress.ports"]);
        assert!(out.contains("endPort"), "{out}");
    })
    .await;
}
