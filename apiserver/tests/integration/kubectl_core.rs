//! The real `/usr/bin/kubectl` against an in-process apiserver with the core storage and policy
//! kinds: `create quota` (a protobuf body), `describe quota`, `get quota` with kubectl's REQUEST
//! and LIMIT columns, `get endpoints` (with upstream's deprecation warning), `get endpointslices`, `get pv,pvc`, `apply -f` of a claim and a LimitRange,
//! `get componentstatuses`, and upstream's validation errors as kubectl prints them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

const PV: &str = r#"apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv1
spec:
  capacity:
    storage: 5Gi
  accessModes: ["ReadWriteOnce", "ReadWriteMany"]
  storageClassName: manual
  hostPath:
    path: /mnt/data
"#;

const PVC: &str = r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: ["ReadWriteOnce"]
  storageClassName: manual
  resources:
    requests:
      storage: 1Gi
"#;

const LIMITS: &str = r#"apiVersion: v1
kind: LimitRange
metadata:
  name: limits
spec:
  limits:
  - type: Container
    max:
      cpu: "2"
      memory: 1Gi
    min:
      cpu: 100m
"#;

const ENDPOINTS: &str = r#"apiVersion: v1
kind: Endpoints
metadata:
  name: web
subsets:
- addresses:
  - ip: 10.0.0.1
  - ip: 10.0.0.2
  ports:
  - port: 8080
"#;

const SLICE: &str = r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
  protocol: TCP
endpoints:
- addresses: ["10.0.0.1"]
  conditions:
    ready: true
- addresses: ["10.0.0.2"]
"#;

fn header_and_row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let header = out.lines().next().unwrap_or("");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name}: {out}"));
    // Columns are separated by at least two spaces (names like ACCESS MODES have one).
    let split = |l: &str| -> Vec<String> {
        l.split("  ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    (split(header), split(row))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_limits_volumes_and_endpoints_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["create", "quota", "compute", "--hard=pods=10,requests.cpu=1,limits.memory=2Gi"]);
        assert!(out.contains("resourcequota/compute created"), "{out}");
        let out = k.ok(&["get", "quota", "compute", "-o", "jsonpath={.spec.hard.pods} {.spec.hard.limits\\.memory}"]);
        assert_eq!(out, "10 2Gi");
        // The quota controller would compute status; it is written through /status here.
        let out = k.ok(&["patch", "quota", "compute", "--subresource=status", "--type=merge", "-p",
            r#"{"status":{"hard":{"pods":"10","requests.cpu":"1","limits.memory":"2Gi"},"used":{"pods":"3","requests.cpu":"250m"}}}"#]);
        assert!(out.contains("resourcequota/compute patched"), "{out}");
        let out = k.ok(&["get", "quota"]);
        let (header, row) = header_and_row(&out, "compute");
        assert_eq!(header, ["NAME", "AGE", "REQUEST", "LIMIT"], "{out}");
        assert_eq!(row[2..], ["pods: 3/10, requests.cpu: 250m/1", "limits.memory: 0/2Gi"], "{out}");
        let out = k.ok(&["describe", "quota", "compute"]);
        assert!(out.contains("Name:") && out.contains("compute"), "{out}");
        let pods = out.lines().find(|l| l.starts_with("pods")).unwrap_or_else(|| panic!("{out}"));
        assert_eq!(pods.split_whitespace().collect::<Vec<_>>(), ["pods", "3", "10"], "{out}");
        let (ok, _, err) = k.run(&["create", "quota", "bad", "--hard=pods=1.5"]);
        assert!(!ok && err.contains("ResourceQuota \"bad\" is invalid: spec.hard[pods]: Invalid value: \"1500m\": must be an integer"), "{err}");

        let limits = k.write("limits.yaml", LIMITS);
        let out = k.ok(&["apply", "-f", limits.to_str().unwrap()]);
        assert!(out.contains("limitrange/limits created"), "{out}");
        let out = k.ok(&["get", "limits", "limits", "-o", "jsonpath={.spec.limits[0].default.cpu} {.spec.limits[0].defaultRequest.memory}"]);
        assert_eq!(out, "2 1Gi");
        let out = k.ok(&["get", "limitranges"]);
        let (header, _) = header_and_row(&out, "limits");
        assert_eq!(header, ["NAME", "CREATED AT"], "{out}");
        let changed = k.write("limits2.yaml", &LIMITS.replace("cpu: 100m", "cpu: 200m"));
        let out = k.ok(&["apply", "-f", changed.to_str().unwrap()]);
        assert!(out.contains("limitrange/limits configured"), "{out}");

        let pv = k.write("pv.yaml", PV);
        let out = k.ok(&["apply", "-f", pv.to_str().unwrap()]);
        assert!(out.contains("persistentvolume/pv1 created"), "{out}");
        let pvc = k.write("pvc.yaml", PVC);
        let out = k.ok(&["apply", "-f", pvc.to_str().unwrap()]);
        assert!(out.contains("persistentvolumeclaim/data created"), "{out}");
        let out = k.ok(&["get", "pv"]);
        let (header, row) = header_and_row(&out, "pv1");
        assert_eq!(header, ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"], "{out}");
        assert_eq!(row[..6], ["pv1", "5Gi", "RWO,RWX", "Retain", "Pending", "manual"], "{out}");
        let out = k.ok(&["describe", "pv", "pv1"]);
        assert!(out.contains("Reclaim Policy:") && out.contains("Retain") && out.contains("HostPath"), "{out}");
        let out = k.ok(&["describe", "pvc", "data"]);
        assert!(out.contains("Status:") && out.contains("Pending"), "{out}");
        let out = k.ok(&["describe", "limitrange", "limits"]);
        let cpu = out.lines().find(|l| l.starts_with("Container") && l.contains("cpu")).unwrap_or_else(|| panic!("{out}"));
        assert_eq!(cpu.split_whitespace().collect::<Vec<_>>(), ["Container", "cpu", "200m", "2", "2", "2", "-"], "{out}");
        let out = k.ok(&["explain", "pv.spec.persistentVolumeReclaimPolicy"]);
        assert!(out.contains("persistentVolumeReclaimPolicy"), "{out}");
        let out = k.ok(&["get", "pv,pvc"]);
        assert!(out.contains("persistentvolume/pv1") && out.contains("persistentvolumeclaim/data"), "{out}");
        let out = k.ok(&["get", "pvc"]);
        let (header, row) = header_and_row(&out, "data");
        assert_eq!(header, ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"], "{out}");
        assert_eq!(row[..4], ["data", "Pending", "manual", "<unset>"], "{out}");
        let (ok, _, err) = k.run(&["apply", "-f", k.write("bad.yaml", &PVC.replace("name: data", "name: bad").replace("  accessModes: [\"ReadWriteOnce\"]\n", "")).to_str().unwrap()]);
        assert!(!ok && err.contains("The PersistentVolumeClaim \"bad\" is invalid: spec.accessModes: Required value: at least 1 access mode is required"), "{err}");
        let bigger = k.write("pvc2.yaml", &PVC.replace("storage: 1Gi", "storage: 2Gi"));
        let (ok, _, err) = k.run(&["apply", "-f", bigger.to_str().unwrap()]);
        assert!(!ok && err.contains("spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"), "{err}");

        let ep = k.write("ep.yaml", ENDPOINTS);
        let out = k.ok(&["apply", "-f", ep.to_str().unwrap()]);
        assert!(out.contains("endpoints/web created"), "{out}");
        let (ok, out, err) = k.run(&["get", "endpoints"]);
        assert!(ok && err.contains("Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"), "{err}");
        let (header, row) = header_and_row(&out, "web");
        assert_eq!(header, ["NAME", "ENDPOINTS", "AGE"], "{out}");
        assert_eq!(row[1], "10.0.0.1:8080,10.0.0.2:8080", "{out}");

        let slice = k.write("slice.yaml", SLICE);
        let out = k.ok(&["apply", "-f", slice.to_str().unwrap()]);
        assert!(out.contains("endpointslice.discovery.k8s.io/web-abc created"), "{out}");
        let out = k.ok(&["get", "endpointslices"]);
        let (header, row) = header_and_row(&out, "web-abc");
        assert_eq!(header, ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"], "{out}");
        assert_eq!(row[..4], ["web-abc", "IPv4", "8080", "10.0.0.1,10.0.0.2"], "{out}");
        let changed = k.write("slice2.yaml", &SLICE.replace("addressType: IPv4", "addressType: IPv6"));
        let (ok, _, err) = k.run(&["apply", "-f", changed.to_str().unwrap()]);
        assert!(!ok && err.contains("addressType: Invalid value: \"IPv6\": field is immutable"), "{err}");

        let (ok, out, err) = k.run(&["get", "componentstatuses"]);
        assert!(ok && err.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"), "{err}");
        let (header, row) = header_and_row(&out, "etcd-0");
        assert_eq!(header, ["NAME", "STATUS", "MESSAGE", "ERROR"], "{out}");
        assert_eq!(row, ["etcd-0", "Healthy", "ok"], "{out}");
        let out = k.ok(&["get", "cs", "scheduler", "-o", "jsonpath={.conditions[0].status}"]);
        assert_eq!(out, "False");

        let out = k.ok(&["delete", "quota", "compute"]);
        assert!(out.contains("resourcequota \"compute\" deleted"), "{out}");
        // The claim keeps its pvc-protection finalizer (no controller here): do not wait.
        let out = k.ok(&["delete", "pvc", "data", "--wait=false"]);
        assert!(out.contains("persistentvolumeclaim \"data\" deleted"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}
