//! The Node and Lease objects a simulated kubelet registers and keeps fresh.
//!
//! Pure builders: [`NodeIdentity::nth`] derives a node's name, InternalIP and pod CIDR from its
//! index; [`node_object`] builds the object to register; [`desired_status`] computes the status the
//! kubelet would post now given the current object (conditions keep their `lastTransitionTime`
//! unless their status changes, every heartbeat moves `lastHeartbeatTime`);
//! [`status_needs_update`] is the kubelet's rule for posting it — when anything but heartbeat times
//! changed, or when the last report is older than the report interval. [`lease_object`] builds the
//! node's Lease in `kube-node-lease`.
//!
//! Timing constants come from the kubelet: `NodeLeaseDurationSeconds` defaults to 40
//! (`pkg/kubelet/apis/config/v1beta1/defaults.go`), renewed every `0.25 ×` that = 10 s
//! (`nodeLeaseRenewIntervalFraction`, `pkg/kubelet/kubelet.go`); `nodeStatusUpdateFrequency`
//! defaults to 10 s. The brief asks for a status report at least every minute (the kubelet's own
//! `nodeStatusReportFrequency` default is 5 min); both are configurable.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ids::hex_digest;
use crate::ipam::Cidr;
use crate::pod_status::{api_time, since};

/// `NodeLeaseDurationSeconds` default (kubelet config v1beta1 defaults).
pub const NODE_LEASE_DURATION: Duration = Duration::from_secs(40);
/// `nodeLeaseRenewIntervalFraction = 0.25` of the lease duration (`pkg/kubelet/kubelet.go`).
pub const NODE_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `nodeStatusUpdateFrequency` default: how often the kubelet computes its node status.
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// How often the status is posted even when unchanged (the brief's "at least every minute").
pub const NODE_STATUS_REPORT_INTERVAL: Duration = Duration::from_secs(60);
/// The namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The label every fake node carries, so tools can tell them apart.
pub const FAKE_NODE_LABEL: &str = "minik8s.io/fake-node";
/// The kubelet version the nodes report (the project pins Kubernetes 1.33).
pub const KUBELET_VERSION: &str = "v1.33.0";

/// The configurable shape of every simulated node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct NodeTemplate {
    /// `capacity.cpu` = `allocatable.cpu`.
    pub cpu: String,
    /// `capacity.memory` = `allocatable.memory`.
    pub memory: String,
    /// `capacity.pods` = `allocatable.pods` (the kubelet's `maxPods` default is 110).
    pub pods: u32,
    /// `capacity.ephemeral-storage`.
    pub ephemeral_storage: String,
    /// Extra labels on every node.
    pub labels: BTreeMap<String, String>,
    /// Network of the first node's pod CIDR; node `i` gets the `i`-th block after it.
    pub pod_cidr_base: Ipv4Addr,
    /// Prefix length of each node's pod CIDR.
    pub pod_cidr_prefix: u8,
    /// Node `i`'s InternalIP is this address plus `i + 2`.
    pub node_ip_base: Ipv4Addr,
}

impl Default for NodeTemplate {
    fn default() -> Self {
        Self {
            cpu: "32".to_string(),
            memory: "128Gi".to_string(),
            pods: 110,
            ephemeral_storage: "100Gi".to_string(),
            labels: BTreeMap::new(),
            pod_cidr_base: Ipv4Addr::new(10, 244, 0, 0),
            pod_cidr_prefix: 24,
            node_ip_base: Ipv4Addr::new(172, 16, 0, 0),
        }
    }
}

/// Who a node is: derived from its index, stable across restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    pub index: usize,
    pub name: String,
    pub internal_ip: Ipv4Addr,
    pub pod_cidr: Cidr,
}

impl NodeIdentity {
    /// Node `index` named `<prefix>-<index>`; `None` if its addresses overflow the IPv4 space.
    pub fn nth(prefix: &str, index: usize, t: &NodeTemplate) -> Option<Self> {
        let pod_cidr = Cidr::nth(t.pod_cidr_base, t.pod_cidr_prefix, index)?;
        let ip =
            u64::from(u32::from(t.node_ip_base)).checked_add(u64::try_from(index).ok()? + 2)?;
        Some(Self {
            index,
            name: format!("{prefix}-{index}"),
            internal_ip: Ipv4Addr::from(u32::try_from(ip).ok()?),
            pod_cidr,
        })
    }
}

fn resources(t: &NodeTemplate) -> BTreeMap<String, Quantity> {
    [
        ("cpu", t.cpu.clone()),
        ("memory", t.memory.clone()),
        ("pods", t.pods.to_string()),
        ("ephemeral-storage", t.ephemeral_storage.clone()),
        ("hugepages-1Gi", "0".to_string()),
        ("hugepages-2Mi", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect()
}

/// A UUID-shaped deterministic ID (`8-4-4-4-12` hex) for machine/system/boot IDs.
fn uuid_like(parts: &[&[u8]]) -> String {
    let h = hex_digest(parts);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The Node object to register.
pub fn node_object(id: &NodeIdentity, t: &NodeTemplate, now: Timestamp) -> Node {
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", id.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
        (FAKE_NODE_LABEL, "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(t.labels.clone());
    let annotations: BTreeMap<String, String> = [
        ("node.alpha.kubernetes.io/ttl", "0"),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach",
            "true",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(id.pod_cidr.to_string()),
            pod_cidrs: Some(vec![id.pod_cidr.to_string()]),
            provider_id: Some(format!("minik8s://{}", id.name)),
            ..Default::default()
        }),
        status: Some(desired_status(id, t, None, now)),
    }
}

/// The node conditions the kubelet posts for a healthy node: (type, reason, message), in order.
const HEALTHY: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// The status to post now, given the current object's status (for transition times).
pub fn desired_status(
    id: &NodeIdentity,
    t: &NodeTemplate,
    current: Option<&NodeStatus>,
    now: Timestamp,
) -> NodeStatus {
    let previous = current
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut conditions: Vec<NodeCondition> = HEALTHY
        .iter()
        .map(|(type_, status, reason, message)| {
            let transition = previous
                .iter()
                .find(|c| c.type_ == *type_ && c.status == *status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| api_time(now));
            NodeCondition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_heartbeat_time: Some(api_time(now)),
                last_transition_time: Some(transition),
            }
        })
        .collect();
    // Conditions others own (e.g. NetworkUnavailable) are kept.
    conditions.extend(
        previous
            .iter()
            .filter(|c| !HEALTHY.iter().any(|(ty, ..)| *ty == c.type_))
            .cloned(),
    );
    let machine = uuid_like(&[b"machine", id.name.as_bytes()]);
    NodeStatus {
        capacity: Some(resources(t)),
        allocatable: Some(resources(t)),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_string(),
                address: id.internal_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_string(),
                address: id.name.clone(),
            },
        ]),
        conditions: Some(conditions),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_string(),
            boot_id: uuid_like(&[b"boot", id.name.as_bytes()]),
            container_runtime_version: "containerd://1.7.24".to_string(),
            kernel_version: "6.8.0-minik8s".to_string(),
            kube_proxy_version: KUBELET_VERSION.to_string(),
            kubelet_version: KUBELET_VERSION.to_string(),
            machine_id: machine.replace('-', ""),
            operating_system: "linux".to_string(),
            os_image: "minik8s fake node".to_string(),
            system_uuid: machine,
            swap: None,
        }),
        ..Default::default()
    }
}

/// Strips heartbeat times, for comparing statuses the way the kubelet's `nodeStatusHasChanged`
/// does.
fn without_heartbeats(s: &NodeStatus) -> NodeStatus {
    let mut s = s.clone();
    if let Some(cs) = s.conditions.as_mut() {
        for c in cs.iter_mut() {
            c.last_heartbeat_time = None;
        }
    }
    s
}

/// Whether the kubelet would post `desired` now: it differs from `current` in more than heartbeat
/// times, or the last report is at least `report_interval` old (or there never was one).
pub fn status_needs_update(
    current: Option<&NodeStatus>,
    desired: &NodeStatus,
    last_report: Option<Timestamp>,
    report_interval: Duration,
    now: Timestamp,
) -> bool {
    let Some(current) = current else { return true };
    if without_heartbeats(current) != without_heartbeats(desired) {
        return true;
    }
    match last_report {
        None => true,
        Some(at) => since(now, at) >= report_interval,
    }
}

/// The node's Lease, renewed `now`.
pub fn lease_object(
    node: &str,
    node_uid: Option<&str>,
    duration: Duration,
    now: Timestamp,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(NODE_LEASE_NAMESPACE.to_string()),
            owner_references: node_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Node".to_string(),
                    name: node.to_string(),
                    uid: uid.to_string(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_status::add;

    fn t0() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn ident(i: usize) -> NodeIdentity {
        match NodeIdentity::nth("node", i, &NodeTemplate::default()) {
            Some(id) => id,
            None => panic!("no identity {i}"),
        }
    }

    fn cond<'a>(s: &'a NodeStatus, t: &str) -> &'a NodeCondition {
        match s.conditions.iter().flatten().find(|c| c.type_ == t) {
            Some(c) => c,
            None => panic!("no {t}"),
        }
    }

    #[test]
    fn identities_are_derived_from_the_index() {
        let id = ident(7);
        assert_eq!(id.name, "node-7");
        assert_eq!(id.internal_ip, Ipv4Addr::new(172, 16, 0, 9));
        assert_eq!(id.pod_cidr.to_string(), "10.244.7.0/24");
        assert_eq!(ident(999).internal_ip, Ipv4Addr::new(172, 16, 3, 233));
        assert_eq!(ident(999).pod_cidr.to_string(), "10.247.231.0/24");
    }

    #[test]
    fn node_object_has_every_field() {
        let t = NodeTemplate::default();
        let node = node_object(&ident(3), &t, t0());
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("kubernetes.io/hostname").map(String::as_str),
            Some("node-3")
        );
        assert_eq!(
            labels.get(FAKE_NODE_LABEL).map(String::as_str),
            Some("true")
        );
        let spec = node.spec.clone().unwrap_or_default();
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.3.0/24"));
        assert_eq!(spec.pod_cidrs, Some(vec!["10.244.3.0/24".to_string()]));
        let s = node.status.clone().unwrap_or_default();
        let cap = s.capacity.clone().unwrap_or_default();
        assert_eq!(cap.get("pods"), Some(&Quantity("110".into())));
        assert_eq!(cap.get("cpu"), Some(&Quantity("32".into())));
        assert_eq!(cap.get("memory"), Some(&Quantity("128Gi".into())));
        assert_eq!(s.allocatable, s.capacity);
        let addrs = s.addresses.clone().unwrap_or_default();
        assert_eq!(addrs[0].type_, "InternalIP");
        assert_eq!(addrs[0].address, "172.16.0.5");
        assert_eq!(addrs[1].type_, "Hostname");
        assert_eq!(addrs[1].address, "node-3");
        let info = s.node_info.clone().unwrap_or_default();
        assert_eq!(info.kubelet_version, "v1.33.0");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.system_uuid.len(), 36);
        let types: Vec<&str> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            types,
            vec!["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("KubeletReady"));
        assert_eq!(cond(&s, "MemoryPressure").status, "False");
        assert_eq!(cond(&s, "Ready").last_heartbeat_time, Some(api_time(t0())));
        // Deterministic: the same node gets the same IDs every time.
        assert_eq!(node_object(&ident(3), &t, t0()), node);
    }

    #[test]
    fn configurable_resources() {
        let t = NodeTemplate {
            cpu: "4".into(),
            memory: "8Gi".into(),
            pods: 20,
            labels: [("zone".to_string(), "a".to_string())].into(),
            ..NodeTemplate::default()
        };
        let node = node_object(&ident(0), &t, t0());
        let cap = node.status.and_then(|s| s.capacity).unwrap_or_default();
        assert_eq!(cap.get("pods"), Some(&Quantity("20".into())));
        assert_eq!(cap.get("cpu"), Some(&Quantity("4".into())));
        assert_eq!(
            node.metadata
                .labels
                .unwrap_or_default()
                .get("zone")
                .map(String::as_str),
            Some("a")
        );
    }

    #[test]
    fn transitions_kept_heartbeats_move() {
        let t = NodeTemplate::default();
        let first = desired_status(&ident(0), &t, None, t0());
        let later = add(t0(), Duration::from_secs(30));
        let second = desired_status(&ident(0), &t, Some(&first), later);
        assert_eq!(
            cond(&second, "Ready").last_transition_time,
            Some(api_time(t0()))
        );
        assert_eq!(
            cond(&second, "Ready").last_heartbeat_time,
            Some(api_time(later))
        );
        // Unchanged apart from heartbeats: posted only once the report interval passed.
        assert!(!status_needs_update(
            Some(&first),
            &second,
            Some(t0()),
            NODE_STATUS_REPORT_INTERVAL,
            later
        ));
        let much_later = add(t0(), Duration::from_secs(60));
        assert!(status_needs_update(
            Some(&first),
            &second,
            Some(t0()),
            NODE_STATUS_REPORT_INTERVAL,
            much_later
        ));
        assert!(status_needs_update(
            None,
            &second,
            None,
            NODE_STATUS_REPORT_INTERVAL,
            later
        ));
    }

    #[test]
    fn recovers_from_unknown_with_a_new_transition() {
        let t = NodeTemplate::default();
        let mut current = desired_status(&ident(0), &t, None, t0());
        // The node lifecycle controller marked it Unknown and added a condition of its own.
        if let Some(cs) = current.conditions.as_mut() {
            for c in cs.iter_mut().filter(|c| c.type_ == "Ready") {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
            }
            cs.push(NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                ..Default::default()
            });
        }
        let later = add(t0(), Duration::from_secs(100));
        let desired = desired_status(&ident(0), &t, Some(&current), later);
        assert_eq!(cond(&desired, "Ready").status, "True");
        assert_eq!(
            cond(&desired, "Ready").last_transition_time,
            Some(api_time(later))
        );
        assert_eq!(cond(&desired, "NetworkUnavailable").status, "False");
        assert!(status_needs_update(
            Some(&current),
            &desired,
            Some(later),
            NODE_STATUS_REPORT_INTERVAL,
            later
        ));
    }

    #[test]
    fn lease_fields() {
        let l = lease_object("node-1", Some("uid-1"), NODE_LEASE_DURATION, t0());
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(l.metadata.name.as_deref(), Some("node-1"));
        let owner = l.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owner[0].kind, "Node");
        assert_eq!(owner[0].uid, "uid-1");
        let spec = l.spec.unwrap_or_default();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(MicroTime(t0())));
        assert_eq!(NODE_LEASE_RENEW_INTERVAL * 4, NODE_LEASE_DURATION);
    }
}
