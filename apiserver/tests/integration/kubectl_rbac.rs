//! The real `/usr/bin/kubectl` against an in-process apiserver: `kubectl create` of each RBAC
//! kind and of a PriorityClass (protobuf bodies), `kubectl get` of the bootstrap policy with
//! kubectl's columns, and the Priority admission's refusal as kubectl prints it.
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
async fn create_and_get_rbac_and_priority_classes() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["create", "role", "pod-reader", "--verb=get,list", "--resource=pods"]);
        assert!(out.contains("role.rbac.authorization.k8s.io/pod-reader created"), "{out}");
        let out = k.ok(&["create", "clusterrole", "node-reader", "--verb=get", "--resource=nodes", "--non-resource-url=/healthz"]);
        assert!(out.contains("clusterrole.rbac.authorization.k8s.io/node-reader created"), "{out}");
        let out = k.ok(&["create", "clusterrole", "monitoring", "--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"]);
        assert!(out.contains("clusterrole.rbac.authorization.k8s.io/monitoring created"), "{out}");
        let out = k.ok(&["create", "rolebinding", "read-pods", "--role=pod-reader", "--user=jane", "--serviceaccount=default:default"]);
        assert!(out.contains("rolebinding.rbac.authorization.k8s.io/read-pods created"), "{out}");
        let out = k.ok(&["create", "clusterrolebinding", "read-nodes", "--clusterrole=node-reader", "--group=devs"]);
        assert!(out.contains("clusterrolebinding.rbac.authorization.k8s.io/read-nodes created"), "{out}");
        let out = k.ok(&["create", "priorityclass", "high", "--value=1000", "--description=important"]);
        assert!(out.contains("priorityclass.scheduling.k8s.io/high created"), "{out}");
        let (ok, _, err) = k.run(&["create", "priorityclass", "system-mine", "--value=5"]);
        assert!(!ok && err.contains("priority class names with 'system-' prefix are reserved for system use only"), "{err}");

        let out = k.ok(&["get", "clusterroles"]);
        assert_eq!(header(&out), ["NAME", "CREATED", "AT"], "{out}");
        for name in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:controller:replicaset-controller", "node-reader"] {
            let cols = row(&out, name);
            assert!(cols[1].ends_with('Z') && cols[1].contains('T'), "{out}");
        }
        let out = k.ok(&["get", "clusterrolebindings"]);
        assert_eq!(header(&out), ["NAME", "ROLE", "AGE"], "{out}");
        assert_eq!(row(&out, "cluster-admin")[1], "ClusterRole/cluster-admin", "{out}");
        assert_eq!(row(&out, "read-nodes")[1], "ClusterRole/node-reader", "{out}");
        let out = k.ok(&["get", "rolebindings", "-o", "wide"]);
        assert_eq!(header(&out), ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{out}");
        let cols = row(&out, "read-pods");
        assert_eq!((cols[1], cols[3], cols[4]), ("Role/pod-reader", "jane", "default/default"), "{out}");
        let out = k.ok(&["get", "roles", "-n", "kube-system"]);
        row(&out, "system::leader-locking-kube-scheduler");
        let out = k.ok(&["get", "pc"]);
        assert_eq!(header(&out), ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"], "{out}");
        let cols = row(&out, "system-node-critical");
        assert_eq!((cols[1], cols[2], cols[4]), ("2000001000", "false", "PreemptLowerPriority"), "{out}");
        assert_eq!(row(&out, "high")[1], "1000", "{out}");

        let out = k.ok(&["get", "clusterrole", "node-reader", "-o", "yaml"]);
        assert!(out.contains("- /healthz") && out.contains("- nodes"), "{out}");
        let out = k.ok(&["describe", "clusterrole", "node-reader"]);
        assert!(out.contains("nodes") && out.contains("[/healthz]"), "{out}");
        let out = k.ok(&["get", "clusterrole", "monitoring", "-o", "jsonpath={.aggregationRule.clusterRoleSelectors[0].matchLabels}"]);
        assert!(out.contains("aggregate-to-monitoring"), "{out}");

        let pod = k.write(
            "pod.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  priorityClassName: nope\n  containers:\n  - name: c\n    image: nginx\n",
        );
        let (ok, _, err) = k.run(&["create", "-f", pod.to_str().unwrap()]);
        assert!(!ok, "{err}");
        assert!(err.contains("Error from server (Forbidden)") && err.contains("pods \"p\" is forbidden: no PriorityClass with name nope was found"), "{err}");
        let high = k.write("high.yaml", &std::fs::read_to_string(&pod).unwrap().replace("nope", "high"));
        k.ok(&["create", "-f", high.to_str().unwrap()]);
        let out = k.ok(&["get", "pod", "p", "-o", "jsonpath={.spec.priority}"]);
        assert_eq!(out, "1000");

        let out = k.ok(&["delete", "rolebinding", "read-pods"]);
        assert!(out.contains("rolebinding.rbac.authorization.k8s.io \"read-pods\" deleted"), "{out}");
        let (ok, _, err) = k.run(&["delete", "pc", "system-cluster-critical"]);
        assert!(!ok && err.contains("this is a system priority class and cannot be deleted"), "{err}");
    })
    .await;
    server.stop().await.unwrap();
}
