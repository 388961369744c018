//! API Priority and Fairness (`flowcontrol.apiserver.k8s.io/v1`; upstream
//! `staging/src/k8s.io/apiserver/pkg/util/flowcontrol/` and
//! `pkg/server/filters/priority-and-fairness.go`, read for behaviour).
//!
//! How a request goes through it ([`filter`]): its attributes are parsed from its path
//! ([`request`]) and its subject derived ([`subject`]: the seam where authentication will put
//! the real user); [`classify`] finds the first matching FlowSchema, whose priority level and
//! distinguisher make its flow; an `Exempt` level runs it at once; otherwise it asks its level
//! ([`level`]) for seats ([`width`]: a LIST by its object count), waits in its flow's
//! shuffle-sharded queue ([`shuffle`], [`queueset`]: fair queuing by virtual time) at most a
//! quarter of the request timeout, and runs holding its seats. A full queue, a `Reject` level
//! without free seats, or a wait past the limit answers 429 with a `Retry-After` ([`retry`]).
//!
//! The configuration ([`config`]) is followed in the watch cache by [`controller`], which
//! rebuilds the [`Dispatch`] snapshot on every change: levels keep their queues and waiting
//! requests across changes. Until the first snapshot the bootstrap objects apply. The server's
//! limit (600 seats by default, upstream's 400 + 200) is shared by nominal shares; every 10 s
//! levels lend idle seats and borrow ([`borrowing`]). Metrics are in [`stats`].
//!
//! Guarantees: each request holds its seats until its handler returns (a watch: until its
//! initial state is taken, then it streams without seats); a waiting request is bounded by its
//! queue's length limit and its wait limit; every lock is short and never held across an await.

pub mod borrowing;
pub mod classify;
pub mod config;
pub mod controller;
pub mod debug;
pub mod filter;
pub mod level;
pub mod queueset;
pub mod request;
pub mod retry;
pub mod shuffle;
pub mod stats;
pub mod status;
pub mod subject;
pub mod width;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderValue;
use parking_lot::{Mutex, RwLock};

use config::{LevelSpec, SchemaSpec};
use level::Level;
use request::RequestDigest;
use stats::FlowStats;

/// Levels with their names.
pub type LevelsByName = Vec<(String, Arc<Level>)>;

/// A FlowSchema ready for matching, with its level.
#[derive(Debug)]
pub struct Schema {
    pub spec: SchemaSpec,
    pub level_spec: Arc<LevelSpec>,
    pub level: Arc<Level>,
    /// The widest request of its level.
    pub max_seats: u32,
    pub stats: Arc<FlowStats>,
    /// `X-Kubernetes-PF-FlowSchema-UID`.
    pub uid_header: HeaderValue,
    /// `X-Kubernetes-PF-PriorityLevel-UID`.
    pub level_uid_header: HeaderValue,
}

/// The configuration in force: schemas in matching order, dangling ones left out.
#[derive(Debug, Default)]
pub struct Dispatch {
    pub schemas: Vec<Schema>,
    /// FlowSchemas whose level does not exist, by name, with that level's name.
    pub dangling: Vec<(String, String)>,
}

impl Dispatch {
    /// The matching schema; the last one (`catch-all`, always present) if none matches.
    pub fn classify(&self, d: &RequestDigest) -> Option<&Schema> {
        self.schemas
            .iter()
            .find(|s| classify::matches(&s.spec, d))
            .or_else(|| self.schemas.iter().find(|s| s.spec.name == "catch-all"))
    }
}

/// The priority and fairness state of one apiserver.
#[derive(Debug)]
pub struct FlowControl {
    /// The server's concurrency limit in seats.
    server_limit: u32,
    current: RwLock<Arc<Dispatch>>,
    /// Levels by name: kept across configuration changes (queues and seats live on).
    levels: Mutex<BTreeMap<String, Arc<Level>>>,
    /// Flow stats by (level, schema): kept while the configuration has the pair or a request (or
    /// the dispatch in force) still holds them, so counters of a live schema never go backwards
    /// and deleted schemas do not accumulate.
    flows: Mutex<BTreeMap<(String, String), Arc<FlowStats>>>,
}

fn header_value(uid: &str) -> HeaderValue {
    HeaderValue::from_str(uid).unwrap_or_else(|_| HeaderValue::from_static(""))
}

impl FlowControl {
    /// Flow control over `server_limit` seats with the bootstrap configuration.
    pub fn new(server_limit: u32) -> Arc<Self> {
        let fc = Arc::new(FlowControl {
            server_limit: server_limit.max(1),
            current: RwLock::default(),
            levels: Mutex::default(),
            flows: Mutex::default(),
        });
        let levels = crate::bootstrap::flowcontrol::priority_levels();
        let schemas = crate::bootstrap::flowcontrol::flow_schemas();
        fc.apply(
            levels.iter().filter_map(config::level_spec).collect(),
            schemas.iter().filter_map(config::schema_spec).collect(),
        );
        fc
    }

    /// The configuration in force.
    pub fn dispatch(&self) -> Arc<Dispatch> {
        self.current.read().clone()
    }

    /// The server's limit in seats.
    pub fn server_limit(&self) -> u32 {
        self.server_limit
    }

    /// The level named `name`, if configured.
    pub fn level(&self, name: &str) -> Option<Arc<Level>> {
        self.levels.lock().get(name).cloned()
    }

    /// Puts a new configuration in force. The mandatory objects (`exempt`, `catch-all`) are
    /// supplied from the bootstrap set when missing, as upstream's controller does.
    pub fn apply(&self, mut levels: Vec<LevelSpec>, mut schemas: Vec<SchemaSpec>) {
        for name in ["exempt", "catch-all"] {
            if !levels.iter().any(|l| l.name == name) {
                let boot = crate::bootstrap::flowcontrol::priority_levels();
                levels.extend(
                    boot.iter()
                        .filter_map(config::level_spec)
                        .filter(|l| l.name == name),
                );
            }
            if !schemas.iter().any(|s| s.name == name) {
                let boot = crate::bootstrap::flowcontrol::flow_schemas();
                schemas.extend(
                    boot.iter()
                        .filter_map(config::schema_spec)
                        .filter(|s| s.name == name),
                );
            }
        }
        levels.sort_by(|a, b| a.name.cmp(&b.name));
        let levels: Vec<Arc<LevelSpec>> = levels.into_iter().map(Arc::new).collect();
        let limits = config::limits(&levels, self.server_limit);
        let now = Instant::now();
        let mut by_name = BTreeMap::new();
        {
            let mut current = self.levels.lock();
            for (spec, l) in levels.iter().zip(limits) {
                let level = match current.get(&spec.name) {
                    Some(level) => {
                        level.reconfigure(spec, l);
                        level.clone()
                    }
                    None => Level::new(spec, l, now),
                };
                by_name.insert(spec.name.clone(), (spec.clone(), level, l.max_seats));
            }
            *current = by_name
                .iter()
                .map(|(n, (_, level, _))| (n.clone(), level.clone()))
                .collect();
        }
        classify::sort(&mut schemas);
        let mut dispatch = Dispatch::default();
        let mut flows = self.flows.lock();
        for spec in schemas {
            let Some((level_spec, level, max_seats)) = by_name.get(&spec.level) else {
                dispatch
                    .dangling
                    .push((spec.name.clone(), spec.level.clone()));
                continue;
            };
            let stats = flows
                .entry((spec.level.clone(), spec.name.clone()))
                .or_insert_with(|| Arc::new(FlowStats::new(&spec.level, &spec.name)))
                .clone();
            dispatch.schemas.push(Schema {
                uid_header: header_value(&spec.uid),
                level_uid_header: header_value(&level_spec.uid),
                level_spec: level_spec.clone(),
                level: level.clone(),
                max_seats: *max_seats,
                stats,
                spec,
            });
        }
        let configured: std::collections::BTreeSet<(&str, &str)> = dispatch
            .schemas
            .iter()
            .map(|s| (s.spec.level.as_str(), s.spec.name.as_str()))
            .collect();
        flows.retain(|(level, name), stats| {
            configured.contains(&(level.as_str(), name.as_str())) || Arc::strong_count(stats) > 1
        });
        drop(flows);
        *self.current.write() = Arc::new(dispatch);
    }

    /// One borrowing adjustment (every [`borrowing::ADJUSTMENT_PERIOD`]): each limited level's
    /// current limit from the levels' smoothed seat demands.
    pub fn adjust_borrowing(&self, now: Instant) {
        let levels: Vec<Arc<Level>> = self.levels.lock().values().cloned().collect();
        let mut claims = Vec::with_capacity(levels.len());
        let mut total = 0.0;
        let mut exempt = Vec::with_capacity(levels.len());
        for level in &levels {
            let (demand, l, is_exempt) = level.end_period(now);
            total += f64::from(l.nominal);
            exempt.push(is_exempt);
            let lower = f64::from(l.lower);
            claims.push(if is_exempt {
                borrowing::Claim {
                    lower,
                    upper: lower,
                    target: lower,
                }
            } else {
                borrowing::Claim {
                    lower,
                    upper: f64::from(l.upper),
                    target: demand.max(lower),
                }
            });
        }
        let shares = borrowing::allocate(total, &claims);
        for ((level, share), is_exempt) in levels.iter().zip(shares).zip(exempt) {
            if !is_exempt {
                level.set_limit(share.round().max(1.0) as u32);
            }
        }
    }

    /// Every level by name, and every flow's stats.
    pub fn snapshot(&self) -> (LevelsByName, Vec<Arc<FlowStats>>) {
        let levels = self
            .levels
            .lock()
            .iter()
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
        let flows = self.flows.lock().values().cloned().collect();
        (levels, flows)
    }

    /// Renders the `apiserver_flowcontrol_*` metrics.
    pub fn render_metrics(&self, out: &mut String) {
        let flows: Vec<Arc<FlowStats>> = self.flows.lock().values().cloned().collect();
        let levels: Vec<(String, Arc<stats::LevelGauges>)> = self
            .levels
            .lock()
            .iter()
            .map(|(n, l)| (n.clone(), l.gauges.clone()))
            .collect();
        stats::render(out, &flows, &levels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_level_borrows_what_idle_levels_lend() {
        let fc = FlowControl::new(600);
        let (Some(busy), Some(idle)) = (fc.level("global-default"), fc.level("workload-low"))
        else {
            panic!("bootstrap levels missing");
        };
        assert_eq!(busy.load(), (0, 0, 49));
        // 149 one-seat requests of as many flows: 49 run, 100 wait.
        let held: Vec<_> = (0..149u64)
            .map(|i| busy.enqueue(shuffle::flow_hash("global-default", &i.to_string()), 1))
            .collect();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(busy.load(), (49, 100, 49));
        fc.adjust_borrowing(Instant::now() + borrowing::ADJUSTMENT_PERIOD);
        let (in_use, waiting, limit) = busy.load();
        assert!(limit >= 149, "global-default limit {limit}");
        assert_eq!((in_use, waiting), (149, 0));
        // The idle workload-low (nominal 245, lends 90 %) gave most of its seats.
        let (_, _, lent) = idle.load();
        assert!((24..245).contains(&lent), "workload-low limit {lent}");
        // Every level keeps at least its lower limit.
        let levels = fc.levels.lock().clone();
        for (name, level) in levels {
            let lower = level
                .gauges
                .lower
                .load(std::sync::atomic::Ordering::Relaxed);
            let current = level
                .gauges
                .current
                .load(std::sync::atomic::Ordering::Relaxed);
            assert!(current >= lower, "{name}: {current} < {lower}");
        }
    }

    #[test]
    fn a_changed_level_gets_new_limits_and_a_dangling_schema_is_left_out() {
        let fc = FlowControl::new(600);
        let mut levels: Vec<LevelSpec> = crate::bootstrap::flowcontrol::priority_levels()
            .iter()
            .filter_map(config::level_spec)
            .collect();
        let mut schemas: Vec<SchemaSpec> = crate::bootstrap::flowcontrol::flow_schemas()
            .iter()
            .filter_map(config::schema_spec)
            .collect();
        if let Some(l) = levels.iter_mut().find(|l| l.name == "workload-low") {
            l.shares = 200;
        }
        if let Some(s) = schemas.iter_mut().find(|s| s.name == "service-accounts") {
            s.level = "missing".into();
        }
        fc.apply(levels, schemas);
        assert_eq!(fc.level("workload-low").map(|l| l.load().2), Some(348));
        let d = fc.dispatch();
        assert_eq!(
            d.dangling,
            vec![("service-accounts".to_string(), "missing".to_string())]
        );
        assert!(d.schemas.iter().all(|s| s.spec.name != "service-accounts"));
    }
}
