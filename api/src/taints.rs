//! The well-known node taint keys (upstream `k8s.io/api/core/v1/well_known_taints.go`), one copy for
//! the apiserver's admission and every controller that sets or reads them.

/// `TaintNodeNotReady`: the node's Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `TaintNodeUnreachable`: the node controller cannot reach the node (Ready is Unknown).
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `TaintNodeUnschedulable`: the node is cordoned.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// `TaintNodeMemoryPressure`.
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `TaintNodeDiskPressure`.
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `TaintNodeNetworkUnavailable`.
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// `TaintNodePIDPressure`.
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
