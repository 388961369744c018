//! The `resourcequota` controller (upstream `pkg/controller/resourcequota`): keeps every
//! ResourceQuota's `status.hard` equal to its `spec.hard` and its `status.used` equal to what its
//! namespace consumes, as the quota evaluators of [`api::quota`] measure it.
//!
//! * Two work queues as upstream: `resourcequota_priority` for quotas whose status misses usage
//!   that admission needs (new quotas, changed `spec.hard`: admission refuses writes with
//!   `status unknown for quota` until then), `resourcequota_primary` for recalculations; each
//!   runs `--concurrent-resource-quota-syncs` workers (5).
//! * A quota is recalculated when it is added or its `spec.hard` changes, every
//!   `--resource-quota-sync-period` (5 m, the full resync), and when the objects it counts go
//!   away (replenishment): a delete of a pod, service, claim, ConfigMap, Secret or
//!   ReplicationController, a pod becoming terminal or outliving its deletion grace period, a
//!   service changing its priced type, a claim its allocated size. Creates are charged by the
//!   ResourceQuota admission plugin, so they need no recalculation. A namespace without quotas
//!   costs one index lookup per such event; nothing at all for other pod updates.
//! * A sync ([`decide::next_status`]) recounts the namespace from the informer caches (other
//!   `count/<resource>.<group>` resources are listed from the apiserver) and writes
//!   `resourcequotas/status` with the cached object's resourceVersion, so a concurrent charge by
//!   admission makes it fail with a conflict and retry with back-off on the new state.
//!
//! Deviation: upstream's quota monitor watches every discovered resource, so a deleted
//! Deployment lowers `count/deployments.apps` at once; here resources without a shared informer
//! are recounted only when the quota is synced for another reason or by the full resync.

pub mod controller;
pub mod decide;

pub use controller::{Informers, ResourceQuotaController, DEFAULT_SYNC_PERIOD};
