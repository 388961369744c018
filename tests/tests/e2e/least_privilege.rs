//! Our own components run least-privileged (issue 18) and NodeRestriction guards nodes (issue 19),
//! against one secure Sandbox each:
//!
//! * the controller manager (`system:kube-controller-manager`, its controllers as their
//!   `kube-system` ServiceAccounts), the scheduler (`system:kube-scheduler`) and every fake kubelet
//!   (`system:node:<node>`) work under the bootstrap RBAC policy and the Node authorizer alone: a
//!   Deployment, a Job, a StatefulSet, a Service with endpoints, a namespace deletion and node
//!   leases all converge while no request is authorized through `system:masters` (the test itself
//!   acts as a cluster-admin outside that group; `apiserver_authorization_decisions_total` counts
//!   the privileged-group decisions);
//! * a node identity may not change another node, nor its own taints or foreign labels, with
//!   upstream's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use minik8s::client::{Client, ListParams, Patch};
use minik8s::k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use minik8s::k8s_openapi::api::batch::v1::Job;
use minik8s::k8s_openapi::api::coordination::v1::Lease;
use minik8s::k8s_openapi::api::core::v1::{
    Endpoints, Namespace, Node, Pod, Service, ServiceAccount,
};
use minik8s::k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s::k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::json;
use tests::eventually;

async fn secure_sandbox(nodes: usize) -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .nodes(nodes)
        .start()
        .await
        .unwrap()
}

/// A client for `path`'s identity, over `reqwest` (for `/metrics`, which `client` does not read).
fn http(path: &Path) -> (reqwest::Client, String) {
    let cfg = minik8s::client::Config::from_kubeconfig(path).unwrap();
    let mut b = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(20));
    for c in reqwest::Certificate::from_pem_bundle(cfg.ca_pem.as_ref().unwrap()).unwrap() {
        b = b.add_root_certificate(c);
    }
    if let Some(id) = &cfg.identity_pem {
        b = b.identity(reqwest::Identity::from_pem(id).unwrap());
    }
    (b.build().unwrap(), cfg.server)
}

/// `apiserver_authorization_decisions_total` for `authorizer` and `decision`.
async fn decisions(path: &Path, authorizer: &str, decision: &str) -> u64 {
    let (client, server) = http(path);
    let text = client
        .get(format!("{server}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!(
        "apiserver_authorization_decisions_total{{type=\"{authorizer}\",name=\"{}\",decision=\"{decision}\"}} ",
        authorizer.to_lowercase().replace("privilegedgroups", "privileged-groups")
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// A cluster-admin outside `system:masters`: its requests are authorized by RBAC.
async fn tester(sandbox: &minik8s::Sandbox) -> (Client, std::path::PathBuf) {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "least-privilege-tester"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tester"}]
    }))
    .unwrap();
    sandbox
        .client()
        .api::<ClusterRoleBinding>(None)
        .create(&binding)
        .await
        .unwrap();
    let (client, path) = sandbox.add_user("tester", &[]).unwrap();
    let nodes = client.api::<Node>(None);
    eventually("the tester's binding", || async {
        nodes.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    (client, path)
}

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap()
}

fn job() -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": "once"},
        "spec": {"template": {
            "metadata": {"annotations": {"kubelet-fake.minik8s.io/run-for": "1s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap()
}

fn stateful_set() -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "c", "image": "postgres"}]}}}
    }))
    .unwrap()
}

fn service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap()
}

/// Every node's Lease renewed after `after`.
async fn leases_renewed(client: &Client, nodes: &[String], after: jiff::Timestamp) {
    let leases = client.api::<Lease>(Some("kube-node-lease"));
    for node in nodes {
        eventually(&format!("lease of {node} renewed"), || async {
            let l = leases.get(node).await.ok()?;
            (l.spec?.renew_time?.0 > after).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn the_control_plane_needs_no_system_masters() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let sandbox = secure_sandbox(2).await;
    let (client, kubeconfig) = tester(&sandbox).await;
    let masters_before = decisions(&kubeconfig, "PrivilegedGroups", "allowed").await;
    let started = jiff::Timestamp::now();

    let ns = "default";
    let deployments = client.api::<Deployment>(Some(ns));
    deployments.create(&deployment()).await.unwrap();
    client.api::<Job>(Some(ns)).create(&job()).await.unwrap();
    client
        .api::<StatefulSet>(Some(ns))
        .create(&stateful_set())
        .await
        .unwrap();
    client
        .api::<Service>(Some(ns))
        .create(&service())
        .await
        .unwrap();
    let doomed: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    let namespaces = client.api::<Namespace>(None);
    namespaces.create(&doomed).await.unwrap();
    client
        .api::<Deployment>(Some("doomed"))
        .create(&deployment())
        .await
        .unwrap();

    eventually("deployment web available", || async {
        let d = deployments.get("web").await.ok()?;
        (d.status?.available_replicas? == 2).then_some(())
    })
    .await;
    let jobs = client.api::<Job>(Some(ns));
    eventually("job once complete", || async {
        let j = jobs.get("once").await.ok()?;
        (j.status?.succeeded? == 1).then_some(())
    })
    .await;
    let sets = client.api::<StatefulSet>(Some(ns));
    eventually("statefulset db ready", || async {
        let s = sets.get("db").await.ok()?;
        (s.status?.ready_replicas? == 2).then_some(())
    })
    .await;
    let endpoints = client.api::<Endpoints>(Some(ns));
    eventually("endpoints of web", || async {
        let e = endpoints.get("web").await.ok()?;
        let ready: usize = e
            .subsets?
            .iter()
            .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
            .sum();
        (ready == 2).then_some(())
    })
    .await;
    let slices = client.api::<EndpointSlice>(Some(ns));
    eventually("endpoint slice of web", || async {
        let list = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
            .await
            .ok()?;
        let ready = list
            .items
            .iter()
            .flat_map(|s| &s.endpoints)
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count();
        (ready == 2).then_some(())
    })
    .await;
    // The doomed namespace's pods ran before it goes (the namespace controller deletes them).
    let doomed_deployments = client.api::<Deployment>(Some("doomed"));
    eventually("deployment in doomed available", || async {
        let d = doomed_deployments.get("web").await.ok()?;
        (d.status?.available_replicas? == 2).then_some(())
    })
    .await;
    namespaces
        .delete("doomed", &Default::default())
        .await
        .unwrap();
    eventually("namespace doomed gone", || async {
        namespaces
            .get("doomed")
            .await
            .err()
            .filter(|e| e.is_not_found())
            .map(|_| ())
    })
    .await;
    let nodes = sandbox.kubelets().unwrap().node_names();
    leases_renewed(&client, &nodes, started).await;

    // The controllers act as their own accounts, which the manager made.
    let accounts = client.api::<ServiceAccount>(Some("kube-system"));
    for name in [
        "replicaset-controller",
        "deployment-controller",
        "job-controller",
        "statefulset-controller",
        "endpoint-controller",
        "endpointslice-controller",
        "namespace-controller",
        "generic-garbage-collector",
    ] {
        accounts.get(name).await.unwrap();
    }
    // Every account the manager made is one the bootstrap policy binds to its controller role.
    let bindings = client.api::<ClusterRoleBinding>(None);
    for sa in accounts.list(&ListParams::default()).await.unwrap().items {
        let name = sa.metadata.name.unwrap();
        if name == "default" {
            continue;
        }
        let binding = bindings
            .get(&format!("system:controller:{name}"))
            .await
            .unwrap_or_else(|e| panic!("no bootstrap binding for kube-system/{name}: {e}"));
        assert_eq!(binding.role_ref.name, format!("system:controller:{name}"));
    }
    assert_eq!(
        decisions(&kubeconfig, "PrivilegedGroups", "allowed").await,
        masters_before,
        "a component's request was authorized through system:masters"
    );
    assert!(decisions(&kubeconfig, "Node", "allowed").await > 0);
    assert!(decisions(&kubeconfig, "RBAC", "allowed").await > 0);
    sandbox.stop().await;
}

#[tokio::test]
async fn node_restriction_keeps_a_node_to_itself() {
    let sandbox = secure_sandbox(1).await;
    let node = sandbox.kubelets().unwrap().node_names().remove(0);
    let (stranger, _) = sandbox
        .add_user("system:node:x", &["system:nodes"])
        .unwrap();
    let label = Patch::Merge(json!({"metadata": {"labels": {"example.com/owner": "x"}}}));
    let err = stranger
        .api::<Node>(None)
        .patch(&node, &label)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(403), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "nodes \"{node}\" is forbidden: node \"x\" is not allowed to modify node \"{node}\""
        )),
        "{err}"
    );

    // The node itself may set its own labels, but not labels it does not own, nor taints.
    let (own, _) = sandbox
        .add_user(&format!("system:node:{node}"), &["system:nodes"])
        .unwrap();
    let nodes = own.api::<Node>(None);
    nodes.patch(&node, &label).await.unwrap();
    let role =
        Patch::Merge(json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}}));
    let err = nodes.patch(&node, &role).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "nodes \"{node}\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker"
        )),
        "{err}"
    );
    let taint = Patch::Merge(json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}));
    let err = nodes.patch(&node, &taint).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "nodes \"{node}\" is forbidden: node \"{node}\" is not allowed to modify taints"
        )),
        "{err}"
    );
    // An admin's change is not a node's: it passes.
    sandbox
        .client()
        .api::<Node>(None)
        .patch(&node, &role)
        .await
        .unwrap();

    // A kubelet's TokenRequest: the Node authorizer lets it ask for the service account of a pod
    // on the node; NodeRestriction then wants the token bound to such a pod.
    let admin = sandbox.client();
    admin
        .api::<ServiceAccount>(Some("default"))
        .create(&serde_json::from_value(json!({"metadata": {"name": "sa"}})).unwrap())
        .await
        .unwrap();
    let pods = admin.api::<Pod>(Some("default"));
    let mut uids = Vec::new();
    for (name, on) in [("here", node.as_str()), ("there", "elsewhere")] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": on, "serviceAccountName": "sa",
                     "containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap();
        uids.push(pods.create(&pod).await.unwrap().metadata.uid.unwrap());
    }
    let accounts = own.api::<ServiceAccount>(Some("default"));
    let request = |bound: serde_json::Value| {
        json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest", "spec": {"boundObjectRef": bound}})
    };
    let refused = [
        (json!(null), "node requested token not bound to a pod"),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "name": "there", "uid": uids[1]}),
            "node requested token bound to a pod scheduled on a different node",
        ),
    ];
    for (bound, reason) in refused {
        let err = accounts
            .create_subresource("sa", "token", &request(bound))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(403), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("serviceaccounts \"sa\" is forbidden: {reason}")),
            "{err}"
        );
    }
    let bound = json!({"apiVersion": "v1", "kind": "Pod", "name": "here", "uid": uids[0]});
    let issued = accounts
        .create_subresource("sa", "token", &request(bound))
        .await
        .unwrap();
    assert!(issued["status"]["token"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));
    sandbox.stop().await;
}
