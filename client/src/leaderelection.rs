//! Leader election on a `coordination.k8s.io/v1` Lease (client-go `tools/leaderelection`,
//! `resourcelock/leaselock.go`; spec informer.md §7).
//!
//! Protocol:
//! * **acquire**: `try_acquire_or_renew` immediately, then every `retry_period` + rand·1.2·
//!   `retry_period` (2–4.4 s with the defaults) until it succeeds or shutdown.
//! * **renew**: every `retry_period`, retry `try_acquire_or_renew` every `retry_period` for up to
//!   `renew_deadline`; failing that, leadership is lost: the leading token is cancelled, the lease
//!   optionally released, and `on_stopped_leading` runs (it always runs when `run` returns).
//! * **try_acquire_or_renew**: fast path PUTs the cached lease while our observation is fresh; slow
//!   path GETs (NotFound → CREATE), and if someone else holds a lease whose record we observed
//!   changing less than `leaseDurationSeconds` ago *by our local monotonic clock* (immune to clock
//!   skew), fails; otherwise PUTs with the fetched resourceVersion, so of two candidates one gets
//!   409 and fails the round. Taking over increments `leaseTransitions` and resets `acquireTime`.
//!
//! Defaults (kube-controller-manager): lease 15 s, renew deadline 10 s, retry 2 s, jitter 1.2;
//! validated as lease > renew > 1.2·retry > 0.

use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use parking_lot::Mutex;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::rest::{Api, Client};

/// `JitterFactor`.
pub const JITTER_FACTOR: f64 = 1.2;

/// Timings and identity of one candidate.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    pub lease_name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Release the lease (empty holder, 1 s duration) when leadership ends by shutdown.
    pub release_on_cancel: bool,
}

impl Default for LeaderElectionConfig {
    /// Standard timings; names and identity empty (fill them in: `validate` rejects empties).
    fn default() -> Self {
        LeaderElectionConfig::new("", "", "")
    }
}

impl LeaderElectionConfig {
    /// Defaults: 15 s / 10 s / 2 s, release on cancel.
    pub fn new(namespace: &str, lease_name: &str, identity: &str) -> Self {
        LeaderElectionConfig {
            lease_name: lease_name.to_string(),
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }

    /// client-go `NewLeaderElector` validation.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::LeaderElectionConfig(m.to_string()));
        if self.lease_duration <= self.renew_deadline {
            return bad("leaseDuration must be greater than renewDeadline");
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return bad("renewDeadline must be greater than retryPeriod*JitterFactor");
        }
        if self.retry_period.is_zero() {
            return bad("retryPeriod must be greater than zero");
        }
        if self.identity.is_empty() {
            return bad("identity must not be empty");
        }
        if self.lease_name.is_empty() || self.namespace.is_empty() {
            return bad("lease name and namespace must not be empty");
        }
        Ok(())
    }
}

/// Leadership body: receives a token cancelled when leadership ends.
pub type StartedLeadingFn = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;
/// Observer of holder changes.
pub type NewLeaderFn = Box<dyn Fn(&str) + Send + Sync>;

/// What to run on leadership changes.
pub struct LeaderCallbacks {
    /// Runs (as a task) when leadership is acquired; the token is cancelled when it is lost.
    pub on_started_leading: StartedLeadingFn,
    /// Runs when `run` returns, leader or not.
    pub on_stopped_leading: Box<dyn FnOnce() + Send>,
    /// Called (synchronously, from the elector) whenever the observed holder changes.
    pub on_new_leader: Option<NewLeaderFn>,
}

struct Observed {
    spec: Option<LeaseSpec>,
    lease: Option<Lease>,
    /// Local monotonic time the observed record last changed.
    time: Instant,
    reported_leader: String,
}

/// One leader-election candidate.
pub struct LeaderElector {
    cfg: LeaderElectionConfig,
    api: Api<Lease>,
    observed: Mutex<Observed>,
}

fn lease_secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl LeaderElector {
    pub fn new(client: Client, cfg: LeaderElectionConfig) -> Result<Self> {
        cfg.validate()?;
        Ok(LeaderElector {
            api: client.api::<Lease>(Some(&cfg.namespace)),
            cfg,
            observed: Mutex::new(Observed {
                spec: None,
                lease: None,
                time: Instant::now(),
                reported_leader: String::new(),
            }),
        })
    }

    pub fn config(&self) -> &LeaderElectionConfig {
        &self.cfg
    }

    /// The holder identity we last observed.
    pub fn get_leader(&self) -> String {
        self.observed
            .lock()
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default()
    }

    pub fn is_leader(&self) -> bool {
        self.get_leader() == self.cfg.identity
    }

    /// Campaigns, leads, and returns when leadership is lost or `shutdown` fires.
    pub async fn run(&self, shutdown: CancellationToken, callbacks: LeaderCallbacks) {
        let LeaderCallbacks {
            on_started_leading,
            on_stopped_leading,
            on_new_leader,
        } = callbacks;
        let notify = |s: &Self| s.maybe_report_transition(on_new_leader.as_deref());
        if !self.acquire(&shutdown, &notify).await {
            on_stopped_leading();
            return;
        }
        tracing::info!(identity = %self.cfg.identity, lease = %self.cfg.lease_name, "acquired lease");
        let leading = shutdown.child_token();
        let _task = tokio::spawn(on_started_leading(leading.clone()));
        self.renew(&shutdown, &notify).await;
        leading.cancel();
        if self.cfg.release_on_cancel && shutdown.is_cancelled() {
            self.release().await;
        }
        tracing::info!(identity = %self.cfg.identity, "stopped leading");
        on_stopped_leading();
    }

    async fn acquire(
        &self,
        shutdown: &CancellationToken,
        notify: &(dyn Fn(&Self) + Send + Sync),
    ) -> bool {
        loop {
            let ok = tokio::select! {
                _ = shutdown.cancelled() => return false,
                ok = self.try_acquire_or_renew() => ok,
            };
            notify(self);
            if ok {
                return true;
            }
            let r: f64 = rand::thread_rng().gen_range(0.0..1.0);
            let d = self.cfg.retry_period + self.cfg.retry_period.mul_f64(r * JITTER_FACTOR);
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(d) => {}
            }
        }
    }

    async fn renew(&self, shutdown: &CancellationToken, notify: &(dyn Fn(&Self) + Send + Sync)) {
        loop {
            let deadline = Instant::now() + self.cfg.renew_deadline;
            let renewed = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let attempt = tokio::time::timeout(left, self.try_acquire_or_renew());
                let ok = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = attempt => r.unwrap_or(false),
                };
                if ok {
                    break true;
                }
                if Instant::now() + self.cfg.retry_period >= deadline {
                    break false;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(self.cfg.retry_period) => {}
                }
            };
            notify(self);
            if !renewed {
                tracing::warn!(identity = %self.cfg.identity, "failed to renew lease within the renew deadline");
                return;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    fn maybe_report_transition(&self, on_new_leader: Option<&(dyn Fn(&str) + Send + Sync)>) {
        let leader = self.get_leader();
        let changed = {
            let mut o = self.observed.lock();
            if o.reported_leader == leader {
                false
            } else {
                o.reported_leader = leader.clone();
                true
            }
        };
        if changed {
            tracing::info!(identity = %self.cfg.identity, leader = %leader, "new leader observed");
            if let Some(f) = on_new_leader {
                f(&leader);
            }
        }
    }

    fn set_observed(&self, lease: Lease) {
        let mut o = self.observed.lock();
        o.spec = lease.spec.clone();
        o.lease = Some(lease);
        o.time = Instant::now();
    }

    fn new_spec(&self, now: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(lease_secs(self.cfg.lease_duration)),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(0),
            ..Default::default()
        }
    }

    /// One attempt to become or stay leader.
    pub async fn try_acquire_or_renew(&self) -> bool {
        let now = Timestamp::now();
        let mut spec = self.new_spec(now);
        // Fast path: we lead and our observation is fresh → renew the cached lease.
        let cached = {
            let o = self.observed.lock();
            let valid = o.spec.as_ref().is_some_and(|s| {
                let d = Duration::from_secs(
                    u64::try_from(s.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
                );
                s.holder_identity.as_deref() == Some(self.cfg.identity.as_str())
                    && o.time + d > Instant::now()
            });
            if valid {
                o.lease.clone()
            } else {
                None
            }
        };
        if let Some(mut lease) = cached {
            let old = lease.spec.clone().unwrap_or_default();
            spec.acquire_time = old.acquire_time;
            spec.lease_transitions = old.lease_transitions;
            lease.spec = Some(spec.clone());
            match self.api.replace(&self.cfg.lease_name, &lease).await {
                Ok(l) => {
                    self.set_observed(l);
                    return true;
                }
                Err(e) => tracing::debug!(error = %e, "optimistic lease update failed; slow path"),
            }
            spec = self.new_spec(now);
        }
        // Slow path.
        let mut lease = match self.api.get(&self.cfg.lease_name).await {
            Ok(l) => l,
            Err(Error::NotFound(_)) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.lease_name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(spec),
                };
                return match self.api.create(&lease).await {
                    Ok(l) => {
                        self.set_observed(l);
                        true
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "lease create failed");
                        false
                    }
                };
            }
            Err(e) => {
                tracing::debug!(error = %e, "lease get failed");
                return false;
            }
        };
        let current = lease.spec.clone().unwrap_or_default();
        {
            let mut o = self.observed.lock();
            if o.spec.as_ref() != Some(&current) {
                o.spec = Some(current.clone());
                o.time = Instant::now();
            }
            o.lease = Some(lease.clone());
        }
        let holder = current.holder_identity.clone().unwrap_or_default();
        let dur = Duration::from_secs(
            u64::try_from(current.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let observed_at = self.observed.lock().time;
        if !holder.is_empty() && holder != self.cfg.identity && observed_at + dur > Instant::now() {
            return false;
        }
        if holder == self.cfg.identity {
            spec.acquire_time = current.acquire_time.clone();
            spec.lease_transitions = current.lease_transitions;
        } else {
            spec.lease_transitions = Some(current.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        lease.spec = Some(spec);
        match self.api.replace(&self.cfg.lease_name, &lease).await {
            Ok(l) => {
                self.set_observed(l);
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "lease update failed");
                false
            }
        }
    }

    /// Gives the lease up if we hold it: empty holder, 1 s duration (retried on conflict).
    pub async fn release(&self) -> bool {
        for _ in 0..3 {
            let mut lease = match self.api.get(&self.cfg.lease_name).await {
                Ok(l) => l,
                Err(_) => return false,
            };
            let cur = lease.spec.clone().unwrap_or_default();
            if cur.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
                return true;
            }
            let now = MicroTime(Timestamp::now());
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: cur.lease_transitions,
                ..Default::default()
            });
            match self.api.replace(&self.cfg.lease_name, &lease).await {
                Ok(l) => {
                    self.set_observed(l);
                    return true;
                }
                Err(Error::Conflict(_)) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "lease release failed");
                    return false;
                }
            }
        }
        false
    }
}
