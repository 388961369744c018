//! [`KubeletConfig`]: everything [`crate::FakeKubelets::start`] needs besides the client, and its
//! YAML file form.
//!
//! The file (`minik8s kubelet --config FILE`) is either a full kubelet-fake configuration
//!
//! ```yaml
//! nodes: 10
//! namePrefix: node
//! node: {cpu: "32", memory: 128Gi, pods: 110}
//! leaseDuration: 40s
//! leaseRenewInterval: 10s
//! nodeStatusReportInterval: 1m
//! statusWorkers: 16
//! heartbeatConcurrency: 8
//! eventRecordQPS: 50
//! eventBurst: 100
//! eventWriteConcurrency: 2
//! lifecycle:
//!   podStartDelay: {delay: 100ms, jitter: 200ms}
//!   rules: [...]
//! ```
//!
//! or just a lifecycle document (the keys of [`LifecycleConfig`] at top level). Every key is
//! optional; unknown keys are errors. Command-line flags (such as `--nodes`) override the file.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{duration_serde, LifecycleConfig};
use crate::error::{Error, Result};
use crate::node::{
    NodeTemplate, NODE_LEASE_DURATION, NODE_LEASE_RENEW_INTERVAL, NODE_STATUS_REPORT_INTERVAL,
};

/// The kubelet's `eventRecordQPS` default (`--event-qps`).
pub const EVENT_RECORD_QPS: f64 = 50.0;
/// The kubelet's `eventBurst` default (`--event-burst`).
pub const EVENT_BURST: u32 = 100;

/// Default of [`KubeletConfig::status_coalesce_window`].
pub const STATUS_COALESCE_WINDOW: Duration = Duration::from_millis(500);

/// Everything [`crate::FakeKubelets::start`] needs besides the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct KubeletConfig {
    /// How many nodes to simulate.
    pub nodes: usize,
    /// Nodes are named `<name_prefix>-<index>`.
    pub name_prefix: String,
    /// Index of the first node (so that several processes can simulate disjoint node sets).
    pub first_index: usize,
    /// How pods behave.
    pub lifecycle: LifecycleConfig,
    /// What every node looks like.
    pub node: NodeTemplate,
    /// `leaseDurationSeconds` of node leases (kubelet default 40 s).
    #[serde(with = "duration_serde")]
    pub lease_duration: Duration,
    /// How often leases are renewed and node status is computed (kubelet: 10 s).
    #[serde(with = "duration_serde")]
    pub lease_renew_interval: Duration,
    /// How often node status is posted even when unchanged.
    #[serde(with = "duration_serde")]
    pub node_status_report_interval: Duration,
    /// A pod status that would be superseded sooner than this is not written (the next one is):
    /// the kubelet's PLEG relists once a second, so it too never reports sub-second states.
    #[serde(with = "duration_serde")]
    pub status_coalesce_window: Duration,
    /// Size of the pod status writer pool.
    pub status_workers: usize,
    /// At most this many heartbeats (lease + node status) in flight at once.
    pub heartbeat_concurrency: usize,
    /// Each node's event writes per second (the kubelet's `eventRecordQPS`; 0: unlimited).
    #[serde(rename = "eventRecordQPS")]
    pub event_record_qps: f64,
    /// Each node's event write burst (the kubelet's `eventBurst`).
    pub event_burst: u32,
    /// At most this many event writes of all nodes in flight at once: the nodes share one
    /// process and one apiserver budget, which real kubelets on separate machines do not.
    pub event_write_concurrency: usize,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            nodes: 3,
            name_prefix: "node".to_string(),
            first_index: 0,
            lifecycle: LifecycleConfig::default(),
            node: NodeTemplate::default(),
            lease_duration: NODE_LEASE_DURATION,
            lease_renew_interval: NODE_LEASE_RENEW_INTERVAL,
            node_status_report_interval: NODE_STATUS_REPORT_INTERVAL,
            status_coalesce_window: STATUS_COALESCE_WINDOW,
            // Each real kubelet writes its pods' statuses one at a time (its status manager), so
            // N nodes have up to N writes in flight; these nodes share a pool. The apiserver
            // queues what the nodes' priority level (`node-high`) cannot seat, so the pool only
            // bounds this process's tasks; a durable store commits concurrent writes in one flush.
            status_workers: 64,
            heartbeat_concurrency: 8,
            event_record_qps: EVENT_RECORD_QPS,
            event_burst: EVENT_BURST,
            event_write_concurrency: 2,
        }
    }
}

impl KubeletConfig {
    /// Parses either form (see the module docs) and validates it.
    pub fn from_yaml(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let cfg = match serde_yaml::from_str::<Self>(text) {
            Ok(cfg) => cfg,
            Err(full_err) => match LifecycleConfig::from_yaml(text) {
                Ok(lifecycle) => Self {
                    lifecycle,
                    ..Self::default()
                },
                // Report the error of the full form: it names the offending key.
                Err(_) => return Err(Error::ParseConfig { source: full_err }),
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and parses a file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadConfig {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Checks the values [`crate::FakeKubelets::start`] cannot work with.
    pub fn validate(&self) -> Result<()> {
        self.lifecycle.validate()?;
        if self.status_workers == 0
            || self.heartbeat_concurrency == 0
            || self.event_write_concurrency == 0
        {
            return Err(Error::InvalidConfig(
                "statusWorkers, heartbeatConcurrency and eventWriteConcurrency must be at least 1"
                    .into(),
            ));
        }
        if !(self.event_record_qps >= 0.0 && self.event_record_qps.is_finite()) {
            return Err(Error::InvalidConfig(
                "eventRecordQPS must be a finite number, at least 0".into(),
            ));
        }
        if self.lease_renew_interval.is_zero() {
            return Err(Error::InvalidConfig(
                "leaseRenewInterval must be positive".into(),
            ));
        }
        if self.lease_duration < self.lease_renew_interval {
            return Err(Error::InvalidConfig(
                "leaseDuration must not be shorter than leaseRenewInterval".into(),
            ));
        }
        if !(16..=28).contains(&self.node.pod_cidr_prefix) {
            return Err(Error::InvalidConfig(
                "node.podCidrPrefix must be between 16 and 28".into(),
            ));
        }
        if self.name_prefix.is_empty() {
            return Err(Error::InvalidConfig("namePrefix must not be empty".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_form() -> Result<()> {
        let cfg = KubeletConfig::from_yaml(
            r#"
nodes: 10
namePrefix: fake
node: {cpu: "8", pods: 50}
leaseRenewInterval: 2s
leaseDuration: 8s
statusWorkers: 4
lifecycle:
  podStartDelay: 1s
  rules: [{name: c, crashLoop: {}}]
"#,
        )?;
        assert_eq!(cfg.nodes, 10);
        assert_eq!(cfg.name_prefix, "fake");
        assert_eq!(cfg.node.cpu, "8");
        assert_eq!(cfg.node.pods, 50);
        assert_eq!(cfg.node.memory, NodeTemplate::default().memory);
        assert_eq!(cfg.lease_renew_interval, Duration::from_secs(2));
        assert_eq!(cfg.lease_duration, Duration::from_secs(8));
        assert_eq!(cfg.status_workers, 4);
        assert_eq!(cfg.node_status_report_interval, NODE_STATUS_REPORT_INTERVAL);
        assert_eq!(
            cfg.lifecycle.pod_start_delay,
            crate::config::Delay::fixed(Duration::from_secs(1))
        );
        assert_eq!(cfg.lifecycle.rules.len(), 1);
        Ok(())
    }

    #[test]
    fn lifecycle_only_form() -> Result<()> {
        let cfg = KubeletConfig::from_yaml("podStartDelay: 2s\nrules: []\n")?;
        assert_eq!(
            cfg.lifecycle.pod_start_delay,
            crate::config::Delay::fixed(Duration::from_secs(2))
        );
        assert_eq!(cfg.nodes, KubeletConfig::default().nodes);
        assert_eq!(KubeletConfig::from_yaml("")?, KubeletConfig::default());
        Ok(())
    }

    #[test]
    fn rejects_nonsense() {
        assert!(matches!(
            KubeletConfig::from_yaml("nodez: 3"),
            Err(Error::ParseConfig { .. })
        ));
        assert!(matches!(
            KubeletConfig::from_yaml("statusWorkers: 0"),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            KubeletConfig::from_yaml("leaseDuration: 1s\nleaseRenewInterval: 5s"),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            KubeletConfig::from_yaml("node: {podCidrPrefix: 8}"),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn defaults_are_the_kubelets() {
        let d = KubeletConfig::default();
        assert_eq!(d.lease_duration, Duration::from_secs(40));
        assert_eq!(d.lease_renew_interval, Duration::from_secs(10));
        assert_eq!(d.node.pods, 110);
        assert_eq!(d.event_record_qps, 50.0);
        assert_eq!(d.event_burst, 100);
    }

    #[test]
    fn event_limits_parse() -> Result<()> {
        let cfg = KubeletConfig::from_yaml(
            "eventRecordQPS: 5\neventBurst: 10\neventWriteConcurrency: 2",
        )?;
        assert_eq!(cfg.event_record_qps, 5.0);
        assert_eq!(cfg.event_burst, 10);
        assert_eq!(cfg.event_write_concurrency, 2);
        assert!(KubeletConfig::from_yaml("eventRecordQPS: -1").is_err());
        Ok(())
    }
}
