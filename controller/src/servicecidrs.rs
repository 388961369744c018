//! The ServiceCIDR controller (`service-cidr-controller`; upstream `pkg/controller/servicecidrs`,
//! 1.33).
//!
//! Every ServiceCIDR carries the `networking.k8s.io/service-cidr-finalizer` (added with a
//! strategic merge patch) and a `Ready` condition. A ServiceCIDR being deleted keeps its
//! finalizer while an IPAddress of the cluster-IP allocator (`ipaddress.kubernetes.io/managed-by:
//! ipallocator.k8s.io`) lies in it and in no other ServiceCIDR — its status then says so
//! (`Ready=False`, reason `Terminating`) — unless another ServiceCIDR contains each of its ranges;
//! once nothing would be orphaned, and at least [`DELETION_GRACE_PERIOD`] after the deletion
//! started (so the allocators have seen it), the finalizer is removed
//! (`$deleteFromPrimitiveList`). Conditions are written with server-side apply of the status
//! (field manager `service-cidr-controller`, forced), as upstream.
//!
//! Events: a ServiceCIDR's add queues it and every ServiceCIDR it overlaps; an update or delete
//! queues it; an allocator IPAddress added or deleted queues the ServiceCIDRs containing it.
//! Deviation: an existing `Ready=True` condition, or a blocked deletion's `Ready=False`, is left as it
//! is (upstream re-applies it on every sync, with a new transition time, and replaces the default
//! ServiceCIDR's message).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use client::{
    Action, Client, DeletedObject, HandlerRegistration, Lister, Patch, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use ipnet::IpNet;
use k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::{Error, Result};

/// The controller's name (field manager).
pub const CONTROLLER_NAME: &str = "service-cidr-controller";
/// `ServiceCIDRProtectionFinalizer`.
pub const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// `deletionGracePeriod`.
pub const DELETION_GRACE_PERIOD: Duration = Duration::from_secs(10);
/// The IPAddress label naming their allocator.
const MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const ALLOCATOR: &str = "ipallocator.k8s.io";
const BLOCKED: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";

fn ranges(cidr: &ServiceCIDR) -> Vec<IpNet> {
    cidr.spec
        .as_ref()
        .and_then(|s| s.cidrs.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.parse::<IpNet>().ok())
        .collect()
}

fn name_of(cidr: &ServiceCIDR) -> &str {
    cidr.metadata.name.as_deref().unwrap_or("")
}

/// The ServiceCIDRs of `all` with a range containing `ip` (`servicecidr.ContainsAddress`).
fn containing_address(all: &[Arc<ServiceCIDR>], ip: IpAddr) -> Vec<&ServiceCIDR> {
    all.iter()
        .map(|c| c.as_ref())
        .filter(|c| ranges(c).iter().any(|r| r.contains(&ip)))
        .collect()
}

/// Whether deleting `cidr` leaves no allocator IPAddress without a ServiceCIDR (`canDeleteCIDR`).
pub fn can_delete(cidr: &ServiceCIDR, all: &[Arc<ServiceCIDR>], ips: &[Arc<IPAddress>]) -> bool {
    let own = ranges(cidr);
    // Every range contained in another ServiceCIDR (or an equal one): nothing can be orphaned.
    let has_parent = own.iter().all(|r| {
        all.iter()
            .map(|c| c.as_ref())
            .filter(|c| name_of(c) != name_of(cidr))
            .any(|c| ranges(c).iter().any(|p| p.contains(r)))
    });
    if has_parent {
        return true;
    }
    !ips.iter().any(|ip| {
        let managed = ip
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .map(String::as_str)
            == Some(ALLOCATOR);
        let Some(addr) = ip.metadata.name.as_deref().and_then(|n| n.parse().ok()) else {
            return false;
        };
        if !managed || !own.iter().any(|r| r.contains(&addr)) {
            return false;
        }
        let holders = containing_address(all, addr);
        holders.len() == 1 && name_of(holders[0]) == name_of(cidr)
    })
}

struct Inner {
    client: Client,
    cidrs: Lister<ServiceCIDR>,
    ips: Lister<IPAddress>,
    queue: RateLimitingQueue<String>,
    clock: Arc<dyn Clock>,
}

/// The ServiceCIDR controller.
pub struct ServiceCidrController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl ServiceCidrController {
    /// Build on the shared ServiceCIDR and IPAddress informers.
    pub fn new(
        client: Client,
        cidrs: SharedIndexInformer<ServiceCIDR>,
        ips: SharedIndexInformer<IPAddress>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            cidrs: cidrs.lister(),
            ips: ips.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("ipaddresses"),
            clock,
        });
        let registrations = [
            cidrs.add_event_handler(CidrHandler(inner.clone())),
            ips.add_event_handler(AddressHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        let [a, b] = &self.registrations;
        Runner::new("service_cidr")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[a, b],
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move { inner.sync(&key).await }
                },
            )
            .await;
    }
}

impl Inner {
    /// `sync`.
    async fn sync(&self, name: &str) -> Result<Action> {
        let Some(cidr) = self.cidrs.get(name) else {
            return Ok(Action::AwaitChange);
        };
        let api = self.client.api::<ServiceCIDR>(None);
        let finalizers = cidr.metadata.finalizers.as_deref().unwrap_or(&[]);
        let has_finalizer = finalizers.iter().any(|f| f == FINALIZER);
        let ready = cidr
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready");
        if let Some(deleted_at) = cidr.metadata.deletion_timestamp.as_ref() {
            let all = self.cidrs.list(&api::labels::Selector::everything());
            let ips = self.ips.list(&api::labels::Selector::everything());
            if !can_delete(&cidr, &all, &ips) {
                // Written once: every address event re-syncs a blocked ServiceCIDR.
                if !ready.is_some_and(|c| c.status == "False" && c.reason == "Terminating") {
                    self.apply_ready(name, false).await?;
                }
                return Ok(Action::AwaitChange);
            }
            let since = self.clock.now().duration_since(deleted_at.0);
            let left = jiff::SignedDuration::try_from(DELETION_GRACE_PERIOD)
                .unwrap_or_default()
                .checked_sub(since)
                .unwrap_or_default();
            if left.is_positive() {
                return Ok(Action::RequeueAfter(
                    Duration::try_from(left).unwrap_or(DELETION_GRACE_PERIOD),
                ));
            }
            if has_finalizer {
                let patch =
                    json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}});
                self.patch(&api, name, Patch::Strategic(patch)).await?;
            }
            return Ok(Action::AwaitChange);
        }
        if !has_finalizer {
            let patch = json!({"metadata": {"finalizers": [FINALIZER]}});
            self.patch(&api, name, Patch::Strategic(patch)).await?;
        }
        if ready.is_none_or(|c| c.status != "True") {
            self.apply_ready(name, true).await?;
        }
        Ok(Action::AwaitChange)
    }

    async fn patch(&self, api: &client::Api<ServiceCIDR>, name: &str, patch: Patch) -> Result<()> {
        match api.patch(name, &patch).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("patch ServiceCIDR finalizers", e)),
        }
    }

    /// Applies the `Ready` condition: true, or false while deletion is blocked.
    async fn apply_ready(&self, name: &str, ready: bool) -> Result<()> {
        let now = api::meta::format_time(self.clock.now());
        let condition = if ready {
            json!({"type": "Ready", "status": "True", "reason": "",
                   "message": "Kubernetes Service CIDR is ready", "lastTransitionTime": now})
        } else {
            json!({"type": "Ready", "status": "False", "reason": "Terminating",
                   "message": BLOCKED, "lastTransitionTime": now})
        };
        let body = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "ServiceCIDR",
            "metadata": {"name": name},
            "status": {"conditions": [condition]},
        });
        let patch = Patch::Apply {
            body,
            field_manager: CONTROLLER_NAME.into(),
            force: true,
        };
        match self
            .client
            .api::<ServiceCIDR>(None)
            .patch_status(name, &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("apply ServiceCIDR status", e)),
        }
    }

    /// The ServiceCIDRs overlapping `cidr` (`overlappingServiceCIDRs`).
    fn enqueue_overlapping(&self, cidr: &ServiceCIDR) {
        let own = ranges(cidr);
        for other in self.cidrs.list(&api::labels::Selector::everything()) {
            let overlaps = ranges(&other)
                .iter()
                .any(|r| own.iter().any(|o| r.contains(o) || o.contains(r)));
            if overlaps {
                self.queue.add(name_of(&other).to_string());
            }
        }
    }

    /// The ServiceCIDRs containing an allocator IPAddress (`containingServiceCIDRs`).
    fn enqueue_containing(&self, ip: &IPAddress) {
        let managed = ip
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .map(String::as_str)
            == Some(ALLOCATOR);
        let Some(addr) = ip.metadata.name.as_deref().and_then(|n| n.parse().ok()) else {
            return;
        };
        if !managed {
            return;
        }
        let all = self.cidrs.list(&api::labels::Selector::everything());
        for c in containing_address(&all, addr) {
            self.queue.add(name_of(c).to_string());
        }
    }
}

struct CidrHandler(Arc<Inner>);

impl ResourceEventHandler<ServiceCIDR> for CidrHandler {
    fn on_add(&self, obj: &Arc<ServiceCIDR>, _in_initial_list: bool) {
        self.0.queue.add(name_of(obj).to_string());
        self.0.enqueue_overlapping(obj);
    }

    fn on_update(&self, _old: &Arc<ServiceCIDR>, new: &Arc<ServiceCIDR>) {
        self.0.queue.add(name_of(new).to_string());
    }

    fn on_delete(&self, obj: DeletedObject<ServiceCIDR>) {
        self.0.queue.add(name_of(obj.object()).to_string());
    }
}

struct AddressHandler(Arc<Inner>);

impl ResourceEventHandler<IPAddress> for AddressHandler {
    fn on_add(&self, obj: &Arc<IPAddress>, _in_initial_list: bool) {
        self.0.enqueue_containing(obj);
    }

    fn on_update(&self, _old: &Arc<IPAddress>, _new: &Arc<IPAddress>) {}

    fn on_delete(&self, obj: DeletedObject<IPAddress>) {
        self.0.enqueue_containing(obj.object());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::networking::v1::{IPAddressSpec, ParentReference, ServiceCIDRSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn cidr(name: &str, ranges: &[&str]) -> Arc<ServiceCIDR> {
        Arc::new(ServiceCIDR {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ServiceCIDRSpec {
                cidrs: Some(ranges.iter().map(|s| s.to_string()).collect()),
            }),
            status: None,
        })
    }

    fn ip(addr: &str, managed: bool) -> Arc<IPAddress> {
        let labels = managed.then(|| [(MANAGED_BY.to_string(), ALLOCATOR.to_string())].into());
        Arc::new(IPAddress {
            metadata: ObjectMeta {
                name: Some(addr.into()),
                labels,
                ..Default::default()
            },
            spec: Some(IPAddressSpec {
                parent_ref: ParentReference {
                    resource: "services".into(),
                    name: "s".into(),
                    ..Default::default()
                },
            }),
        })
    }

    #[test]
    fn deletion_waits_for_orphans_unless_a_parent_covers_the_range() {
        let extra = cidr("extra", &["10.100.0.0/24"]);
        let alone = [extra.clone()];
        let ips = [ip("10.100.0.5", true)];
        // The only ServiceCIDR holding an allocated address: blocked.
        assert!(!can_delete(&extra, &alone, &ips));
        // Addresses someone else manages never block.
        assert!(can_delete(&extra, &alone, &[ip("10.100.0.5", false)]));
        // No address in range: free to go.
        assert!(can_delete(&extra, &alone, &[ip("10.96.0.5", true)]));
        // A larger ServiceCIDR contains the range: the addresses stay covered.
        let parent = cidr("parent", &["10.100.0.0/16"]);
        assert!(can_delete(&extra, &[extra.clone(), parent.clone()], &ips));
        // An equal one covers it too; the parent itself is blocked by nothing it does not hold.
        assert!(can_delete(&parent, &[extra.clone(), parent.clone()], &ips));
    }
}
