//! One test per NodeRestriction rule, with upstream's messages.

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::authz::node::NODES_GROUP;

/// Pods and nodes by name, as the watch cache would serve them.
struct Cache(Vec<Value>);

impl Objects for Cache {
    fn list(&self, _: &str, plural: &str) -> Vec<Arc<Value>> {
        let kind = if plural == "pods" { "Pod" } else { "Node" };
        self.0
            .iter()
            .filter(|o| o["kind"] == kind)
            .cloned()
            .map(Arc::new)
            .collect()
    }

    fn get(&self, _: &str, plural: &str, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.list("", plural).into_iter().find(|o| {
            o["metadata"]["name"] == name && ns.is_none_or(|n| o["metadata"]["namespace"] == n)
        })
    }
}

fn node_user(name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:node:{name}"),
        groups: vec![NODES_GROUP.into(), "system:authenticated".into()],
        ..Default::default()
    }
}

fn pod(name: &str, node: &str) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": "a"}},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
}

fn node_obj(name: &str) -> Value {
    json!({"kind": "Node", "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"kubernetes.io/hostname": name}}, "spec": {}})
}

fn cache() -> Cache {
    Cache(vec![
        pod("mine", "n1"),
        pod("theirs", "n2"),
        node_obj("n1"),
        node_obj("n2"),
    ])
}

struct Req<'a> {
    op: NodeOperation,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
    object: Option<Value>,
    old: Option<Value>,
}

fn req<'a>(op: NodeOperation, group: &'a str, resource: &'a str) -> Req<'a> {
    Req {
        op,
        group,
        resource,
        sub: "",
        ns: "",
        name: "",
        object: None,
        old: None,
    }
}

/// The decision for node `n1`: `Ok` or the refusal's message.
fn decide(r: &Req<'_>) -> Result<(), String> {
    decide_as(&node_user("n1"), r)
}

fn decide_as(user: &UserInfo, r: &Req<'_>) -> Result<(), String> {
    let request = NodeRequest {
        user,
        operation: r.op,
        group: r.group,
        resource: r.resource,
        subresource: r.sub,
        namespace: r.ns,
        name: r.name,
        object: r.object.as_ref(),
        old: r.old.as_ref(),
    };
    admit(&request, &cache()).map_err(|refusal| match refusal {
        Refusal::Forbidden(Forbidden(m)) => m,
        Refusal::NotFound { resource, name } => format!("404 {resource} {name:?} not found"),
    })
}

#[test]
fn other_users_and_resources_pass() {
    let alice = UserInfo {
        username: "alice".into(),
        ..Default::default()
    };
    let mut r = req(NodeOperation::Update, "", "nodes");
    r.name = "n2";
    assert_eq!(decide_as(&alice, &r), Ok(()));
    // The user name alone does not make a node: the group does.
    let pretender = UserInfo {
        username: "system:node:n1".into(),
        ..Default::default()
    };
    assert_eq!(decide_as(&pretender, &r), Ok(()));
    let mut cm = req(NodeOperation::Create, "", "configmaps");
    cm.object = Some(json!({"metadata": {"name": "x"}}));
    assert_eq!(decide(&cm), Ok(()));
}

#[test]
fn a_node_is_named_system_node_and_in_system_nodes() {
    // As upstream's `NodeIdentity`: the group without the `system:node:` name is not a node.
    let bob = UserInfo {
        username: "bob".into(),
        groups: vec![NODES_GROUP.into()],
        ..Default::default()
    };
    assert_eq!(node_of(&bob), None);
    let mut r = req(NodeOperation::Update, "", "nodes");
    r.name = "n2";
    assert_eq!(decide_as(&bob, &r), Ok(()));
    assert_eq!(node_of(&node_user("n1")), Some("n1"));
    // The bare prefix is a node whose name is unknown: refused.
    let nameless = node_user("");
    assert_eq!(node_of(&nameless), Some(""));
    let r = req(NodeOperation::Delete, "", "configmaps");
    assert_eq!(
        decide_as(&nameless, &r),
        Err("could not determine node from user \"system:node:\"".into())
    );
}

#[test]
fn a_node_changes_only_its_own_node() {
    let mut r = req(NodeOperation::Update, "", "nodes");
    r.name = "n2";
    r.object = Some(node_obj("n2"));
    r.old = Some(node_obj("n2"));
    assert_eq!(
        decide(&r),
        Err("node \"n1\" is not allowed to modify node \"n2\"".into())
    );
    let mut own = req(NodeOperation::Update, "", "nodes");
    own.name = "n1";
    own.sub = "status";
    own.object = Some(node_obj("n1"));
    own.old = Some(node_obj("n1"));
    assert_eq!(decide(&own), Ok(()));
    let mut delete = req(NodeOperation::Delete, "", "nodes");
    delete.name = "n2";
    assert!(decide(&delete).is_err());
    delete.name = "n1";
    assert_eq!(decide(&delete), Ok(()));
    // A create names the node in its body.
    let mut create = req(NodeOperation::Create, "", "nodes");
    create.object = Some(node_obj("n2"));
    assert_eq!(
        decide(&create),
        Err("node \"n1\" is not allowed to modify node \"n2\"".into())
    );
}

#[test]
fn a_node_registers_only_with_kubelet_labels() {
    let mut create = req(NodeOperation::Create, "", "nodes");
    let mut obj = node_obj("n1");
    obj["metadata"]["labels"] = json!({
        "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux",
        "node.kubernetes.io/exclude-from-external-load-balancers": "",
        "kubelet.kubernetes.io/x": "", "example.com/any": "", "plain": ""
    });
    create.object = Some(obj.clone());
    assert_eq!(decide(&create), Ok(()));
    obj["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = json!("");
    obj["metadata"]["labels"]["node-restriction.kubernetes.io/pool"] = json!("a");
    obj["metadata"]["labels"]["team.k8s.io/x"] = json!("a");
    create.object = Some(obj);
    assert_eq!(
        decide(&create),
        Err("node \"n1\" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane, team.k8s.io/x".into())
    );
    let mut with_source = node_obj("n1");
    with_source["spec"]["configSource"] = json!({"configMap": {"name": "c"}});
    create.object = Some(with_source);
    assert_eq!(
        decide(&create),
        Err("node \"n1\" is not allowed to create pods with a non-nil configSource".into())
    );
}

#[test]
fn a_node_neither_changes_its_taints_nor_foreign_labels() {
    let mut r = req(NodeOperation::Update, "", "nodes");
    r.name = "n1";
    r.old = Some(node_obj("n1"));
    let mut tainted = node_obj("n1");
    tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
    r.object = Some(tainted);
    assert_eq!(
        decide(&r),
        Err("node \"n1\" is not allowed to modify taints".into())
    );
    // No taints and an empty list are the same.
    let mut empty = node_obj("n1");
    empty["spec"]["taints"] = json!([]);
    r.object = Some(empty);
    assert_eq!(decide(&r), Ok(()));
    let mut relabeled = node_obj("n1");
    relabeled["metadata"]["labels"]["node-role.kubernetes.io/worker"] = json!("");
    relabeled["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("z");
    r.object = Some(relabeled);
    assert_eq!(
        decide(&r),
        Err("is not allowed to modify labels: node-role.kubernetes.io/worker".into())
    );
    let mut source = node_obj("n1");
    source["spec"]["configSource"] = json!({"configMap": {"name": "c"}});
    r.object = Some(source);
    assert_eq!(
        decide(&r),
        Err(
            "node \"n1\" is not allowed to update configSource to a new non-nil configSource"
                .into()
        )
    );
}

fn mirror(node: &str) -> Value {
    let mut p = pod("static", node);
    p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": format!("uid-{node}"), "controller": true}]);
    p
}

#[test]
fn a_node_creates_only_its_own_mirror_pods() {
    let mut r = req(NodeOperation::Create, "", "pods");
    r.ns = "default";
    r.object = Some(mirror("n1"));
    assert_eq!(decide(&r), Ok(()));
    let expect = |p: Value, message: &str| {
        let mut r = req(NodeOperation::Create, "", "pods");
        r.ns = "default";
        r.object = Some(p);
        assert_eq!(decide(&r), Err(message.to_string()));
    };
    expect(pod("p", "n1"), "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods");
    expect(
        mirror("n2"),
        "node \"n1\" can only create pods with spec.nodeName set to itself",
    );
    let mut p = mirror("n1");
    p["metadata"]["ownerReferences"] = json!([]);
    expect(
        p.clone(),
        "node \"n1\" can only create pods with an owner reference set to itself",
    );
    p["metadata"]["ownerReferences"] = json!([{}, {}]);
    expect(
        p.clone(),
        "node \"n1\" can only create pods with a single owner reference set to itself",
    );
    p = mirror("n1");
    p["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    expect(
        p.clone(),
        "node \"n1\" can only create pods with a controller owner reference set to itself",
    );
    p = mirror("n1");
    p["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true);
    expect(
        p.clone(),
        "node \"n1\" must not set blockOwnerDeletion on an owner reference",
    );
    p = mirror("n1");
    p["metadata"]["ownerReferences"][0]["uid"] = json!("stale");
    expect(p, "node n1 UID mismatch: expected stale got uid-n1");
    // The Node object missing: the lister's NotFound, as upstream returns it.
    let unregistered = mirror("n3");
    let mut r = req(NodeOperation::Create, "", "pods");
    r.ns = "default";
    r.object = Some(unregistered);
    assert_eq!(
        decide_as(&node_user("n3"), &r),
        Err("404 node \"n3\" not found".to_string())
    );
    for (field, value, what) in [
        ("serviceAccountName", json!("sa"), "a service account"),
        ("imagePullSecrets", json!([{"name": "s"}]), "secrets"),
        (
            "volumes",
            json!([{"name": "v", "configMap": {"name": "c"}}]),
            "configmaps",
        ),
        (
            "volumes",
            json!([{"name": "v", "projected": {"sources": [{"clusterTrustBundle": {"name": "b", "path": "p"}}]}}]),
            "clustertrustbundles",
        ),
        (
            "volumes",
            json!([{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
            "persistentvolumeclaims",
        ),
    ] {
        let mut p = mirror("n1");
        p["spec"][field] = value;
        expect(
            p,
            &format!("node \"n1\" can not create pods that reference {what}"),
        );
    }
    let mut env = mirror("n1");
    env["spec"]["containers"][0]["envFrom"] = json!([{"secretRef": {"name": "s"}}]);
    expect(
        env,
        "node \"n1\" can not create pods that reference secrets",
    );
}

#[test]
fn a_node_deletes_only_its_own_pods_and_never_updates_them() {
    let mut r = req(NodeOperation::Delete, "", "pods");
    r.ns = "default";
    r.name = "theirs";
    assert_eq!(
        decide(&r),
        Err("node \"n1\" can only delete pods with spec.nodeName set to itself".into())
    );
    r.name = "mine";
    assert_eq!(decide(&r), Ok(()));
    let mut update = req(NodeOperation::Update, "", "pods");
    update.name = "mine";
    assert_eq!(
        decide(&update),
        Err(
            "unexpected operation \"UPDATE\", node \"n1\" can only create and delete mirror pods"
                .into()
        )
    );
    update.sub = "exec";
    assert_eq!(
        decide(&update),
        Err("unexpected pod subresource \"exec\", only 'status' and 'eviction' are allowed".into())
    );
}

#[test]
fn a_node_updates_only_its_own_pods_status_and_not_their_labels() {
    let mut r = req(NodeOperation::Update, "", "pods");
    r.sub = "status";
    r.ns = "default";
    r.name = "theirs";
    r.old = Some(pod("theirs", "n2"));
    r.object = Some(pod("theirs", "n2"));
    assert_eq!(
        decide(&r),
        Err(
            "node \"n1\" can only update pod status for pods with spec.nodeName set to itself"
                .into()
        )
    );
    r.name = "mine";
    r.old = Some(pod("mine", "n1"));
    let mut running = pod("mine", "n1");
    running["status"] = json!({"phase": "Running"});
    r.object = Some(running.clone());
    assert_eq!(decide(&r), Ok(()));
    running["metadata"]["labels"]["extra"] = json!("x");
    r.object = Some(running.clone());
    assert_eq!(
        decide(&r),
        Err("node \"n1\" cannot update labels through pod status".into())
    );
    let mut claims = pod("mine", "n1");
    claims["status"]["resourceClaimStatuses"] = json!([{"name": "c", "resourceClaimName": "x"}]);
    r.object = Some(claims);
    assert_eq!(
        decide(&r),
        Err("node \"n1\" cannot update resource claim statues".into())
    );
}

#[test]
fn a_node_evicts_only_its_own_pods() {
    let mut r = req(NodeOperation::Create, "", "pods");
    r.sub = "eviction";
    r.ns = "default";
    r.name = "theirs";
    assert_eq!(
        decide(&r),
        Err("node n1 can only evict pods with spec.nodeName set to itself".into())
    );
    r.name = "";
    r.object = Some(json!({"metadata": {"name": "mine"}}));
    assert_eq!(decide(&r), Ok(()));
    r.object = Some(json!({"metadata": {}}));
    assert_eq!(
        decide(&r),
        Err("could not determine pod from request data".into())
    );
}

#[test]
fn a_node_updates_only_the_status_capacity_and_conditions_of_claims() {
    let claim = json!({"metadata": {"name": "c", "resourceVersion": "1"}, "spec": {"volumeName": "v"}, "status": {"phase": "Bound"}});
    let mut r = req(NodeOperation::Update, "", "persistentvolumeclaims");
    r.sub = "status";
    r.name = "c";
    r.old = Some(claim.clone());
    let mut grown = claim.clone();
    grown["metadata"]["resourceVersion"] = json!("2");
    grown["status"]["capacity"] = json!({"storage": "2Gi"});
    grown["status"]["conditions"] = json!([{"type": "Resizing", "status": "True"}]);
    r.object = Some(grown.clone());
    assert_eq!(decide(&r), Ok(()));
    grown["metadata"]["labels"] = json!({"a": "b"});
    r.object = Some(grown);
    assert_eq!(
        decide(&r),
        Err("node \"n1\" is not allowed to update fields other than status.capacity and status.conditions".into())
    );
    r.sub = "";
    assert_eq!(decide(&r), Err("may only update PVC status".into()));
}

#[test]
fn a_node_requests_tokens_only_for_its_own_pods() {
    let token = |bound: Value| {
        let mut r = req(NodeOperation::Create, "", "serviceaccounts");
        r.sub = "token";
        r.ns = "default";
        r.name = "default";
        r.object = Some(json!({"spec": {"boundObjectRef": bound}}));
        decide(&r)
    };
    assert_eq!(
        token(Value::Null),
        Err("node requested token not bound to a pod".into())
    );
    assert_eq!(
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine"})),
        Err("node requested token with a pod binding without a uid".into())
    );
    assert_eq!(
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "old"})),
        Err("the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated".into())
    );
    assert_eq!(
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "theirs", "uid": "uid-theirs"})),
        Err("node requested token bound to a pod scheduled on a different node".into())
    );
    assert_eq!(
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "uid-mine"})),
        Ok(())
    );
}

#[test]
fn a_node_writes_only_its_own_lease_and_csinode() {
    let mut lease = req(NodeOperation::Create, "coordination.k8s.io", "leases");
    lease.ns = "kube-node-lease";
    lease.object = Some(json!({"metadata": {"name": "n2"}}));
    assert_eq!(
        decide(&lease),
        Err("can only access node lease with the same name as the requesting node".into())
    );
    lease.object = Some(json!({"metadata": {"name": "n1"}}));
    assert_eq!(decide(&lease), Ok(()));
    lease.ns = "default";
    assert_eq!(
        decide(&lease),
        Err("can only access leases in the \"kube-node-lease\" system namespace".into())
    );
    let mut update = req(NodeOperation::Update, "coordination.k8s.io", "leases");
    update.ns = "kube-node-lease";
    update.name = "n1";
    assert_eq!(decide(&update), Ok(()));
    let mut csi = req(NodeOperation::Delete, "storage.k8s.io", "csinodes");
    csi.name = "n2";
    assert_eq!(
        decide(&csi),
        Err("can only access CSINode with the same name as the requesting node".into())
    );
}
