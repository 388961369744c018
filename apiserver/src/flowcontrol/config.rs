//! The API Priority and Fairness configuration, digested (upstream `apf_controller.go`'s
//! `digestConfigObjects`): PriorityLevelConfigurations into seat limits, FlowSchemas into
//! matching rules in precedence order.
//!
//! Seat limits follow upstream exactly. The server's concurrency limit (the sum of
//! `--max-requests-inflight` and `--max-mutating-requests-inflight`, 600 by default) is shared
//! among the levels by their `nominalConcurrencyShares`:
//! `nominalCL = ceil(serverCL × shares / Σ shares)`. A level lends
//! `round(nominalCL × lendablePercent / 100)` of them and may borrow
//! `round(nominalCL × borrowingLimitPercent / 100)` more (any amount when unset). A FlowSchema
//! whose level does not exist is dangling and matches nothing. Objects are read as they are
//! stored (defaulted by their strategy); fields left out take upstream's defaults here too.

use std::sync::Arc;

use k8s_openapi::api::flowcontrol::v1 as fc;
use serde_json::Value;

use super::queueset::Queuing;

/// Upstream's defaults for a `Queue` limit response (`queues`, `handSize`, `queueLengthLimit`).
const DEFAULT_QUEUING: Queuing = Queuing {
    queues: 64,
    hand_size: 8,
    queue_length_limit: 50,
};

/// Upstream's default `nominalConcurrencyShares` of a `Limited` level.
const DEFAULT_LIMITED_SHARES: u32 = 30;

/// One PriorityLevelConfiguration, digested.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelSpec {
    pub name: String,
    pub uid: String,
    /// `Exempt`: never queued, never limited.
    pub exempt: bool,
    pub shares: u32,
    pub lendable_percent: u32,
    /// `None`: may borrow without limit.
    pub borrowing_limit_percent: Option<u32>,
    /// `None`: the `Reject` limit response (or an exempt level).
    pub queuing: Option<Queuing>,
}

/// A level's seat limits, derived from its spec and the server's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub nominal: u32,
    pub lendable: u32,
    /// The least it keeps: `nominal - lendable`.
    pub lower: u32,
    /// The most it may hold with what it borrows.
    pub upper: u32,
    /// The widest a request of this level may be (15 % of the nominal limit, at least 1, at
    /// most upstream's list-seats limit of 100).
    pub max_seats: u32,
}

/// How a FlowSchema splits its requests into flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinguisher {
    ByUser,
    ByNamespace,
}

/// A subject of a policy rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

/// A `resourceRules` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub namespaces: Vec<String>,
    pub cluster_scope: bool,
}

/// A `nonResourceRules` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    pub urls: Vec<String>,
}

/// One `rules` entry: subjects and what they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRules {
    pub subjects: Vec<Subject>,
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
}

/// One FlowSchema, digested.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaSpec {
    pub name: String,
    pub uid: String,
    pub precedence: i32,
    pub level: String,
    pub distinguisher: Option<Distinguisher>,
    pub rules: Vec<PolicyRules>,
}

fn pct(v: Option<i32>) -> u32 {
    v.unwrap_or(0).clamp(0, 100) as u32
}

/// Digests a stored PriorityLevelConfiguration; `None` if it does not decode.
pub fn level_spec(obj: &Value) -> Option<LevelSpec> {
    let plc: fc::PriorityLevelConfiguration = serde_json::from_value(obj.clone()).ok()?;
    let name = plc.metadata.name?;
    let uid = plc.metadata.uid.unwrap_or_default();
    let spec = plc.spec?;
    if spec.type_ == "Exempt" {
        let e = spec.exempt.unwrap_or_default();
        return Some(LevelSpec {
            name,
            uid,
            exempt: true,
            shares: e.nominal_concurrency_shares.unwrap_or(0).max(0) as u32,
            lendable_percent: pct(e.lendable_percent),
            borrowing_limit_percent: None,
            queuing: None,
        });
    }
    let l = spec.limited.unwrap_or_default();
    let queuing = match l.limit_response {
        Some(r) if r.type_ == "Reject" => None,
        Some(r) => {
            let q = r.queuing.unwrap_or_default();
            let positive =
                |v: Option<i32>, d: usize| v.filter(|v| *v > 0).map_or(d, |v| v as usize);
            Some(Queuing {
                queues: positive(q.queues, DEFAULT_QUEUING.queues),
                hand_size: positive(q.hand_size, DEFAULT_QUEUING.hand_size),
                queue_length_limit: positive(
                    q.queue_length_limit,
                    DEFAULT_QUEUING.queue_length_limit,
                ),
            })
        }
        None => Some(DEFAULT_QUEUING),
    };
    Some(LevelSpec {
        name,
        uid,
        exempt: false,
        shares: l
            .nominal_concurrency_shares
            .map_or(DEFAULT_LIMITED_SHARES, |s| s.max(0) as u32),
        lendable_percent: pct(l.lendable_percent),
        borrowing_limit_percent: l.borrowing_limit_percent.map(|p| p.max(0) as u32),
        queuing,
    })
}

/// Digests a stored FlowSchema; `None` if it does not decode.
pub fn schema_spec(obj: &Value) -> Option<SchemaSpec> {
    let fs: fc::FlowSchema = serde_json::from_value(obj.clone()).ok()?;
    let name = fs.metadata.name?;
    let spec = fs.spec?;
    let distinguisher = match spec.distinguisher_method.map(|d| d.type_) {
        Some(t) if t == "ByUser" => Some(Distinguisher::ByUser),
        Some(t) if t == "ByNamespace" => Some(Distinguisher::ByNamespace),
        _ => None,
    };
    let rules = spec
        .rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| PolicyRules {
            subjects: r.subjects.into_iter().filter_map(subject).collect(),
            resource_rules: r
                .resource_rules
                .unwrap_or_default()
                .into_iter()
                .map(|rr| ResourceRule {
                    verbs: rr.verbs,
                    api_groups: rr.api_groups,
                    resources: rr.resources,
                    namespaces: rr.namespaces.unwrap_or_default(),
                    cluster_scope: rr.cluster_scope.unwrap_or(false),
                })
                .collect(),
            non_resource_rules: r
                .non_resource_rules
                .unwrap_or_default()
                .into_iter()
                .map(|nr| NonResourceRule {
                    verbs: nr.verbs,
                    urls: nr.non_resource_urls,
                })
                .collect(),
        })
        .collect();
    Some(SchemaSpec {
        name,
        uid: fs.metadata.uid.unwrap_or_default(),
        precedence: spec.matching_precedence.unwrap_or(1000),
        level: spec.priority_level_configuration.name,
        distinguisher,
        rules,
    })
}

fn subject(s: fc::Subject) -> Option<Subject> {
    match s.kind.as_str() {
        "User" => s.user.map(|u| Subject::User(u.name)),
        "Group" => s.group.map(|g| Subject::Group(g.name)),
        "ServiceAccount" => s.service_account.map(|sa| Subject::ServiceAccount {
            namespace: sa.namespace,
            name: sa.name,
        }),
        _ => None,
    }
}

/// Upstream's list-seats limit (`MaximumListSeatsLimit`).
pub const MAXIMUM_LIST_SEATS: u32 = 100;

/// The seat limits of every level, in `levels`' order, from the server's limit.
pub fn limits(levels: &[Arc<LevelSpec>], server_limit: u32) -> Vec<Limits> {
    let shares: u64 = levels
        .iter()
        .map(|l| u64::from(l.shares))
        .sum::<u64>()
        .max(1);
    levels
        .iter()
        .map(|l| {
            let nominal = (u64::from(server_limit) * u64::from(l.shares)).div_ceil(shares) as u32;
            let lendable =
                (f64::from(nominal) * f64::from(l.lendable_percent) / 100.0).round() as u32;
            let upper = if l.exempt {
                nominal
            } else {
                match l.borrowing_limit_percent {
                    // `p` may be any non-negative i32 (upstream computes in int): saturate.
                    Some(p) => nominal
                        .saturating_add((f64::from(nominal) * f64::from(p) / 100.0).round() as u32),
                    None => server_limit.max(nominal),
                }
            };
            let max_seats =
                ((f64::from(nominal) * 0.15).ceil() as u32).clamp(1, MAXIMUM_LIST_SEATS);
            Limits {
                nominal,
                lendable,
                lower: nominal - lendable,
                upper,
                max_seats,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::flowcontrol::{flow_schemas, priority_levels};

    fn bootstrap_levels() -> Vec<Arc<LevelSpec>> {
        priority_levels()
            .iter()
            .filter_map(level_spec)
            .map(Arc::new)
            .collect()
    }

    #[test]
    fn bootstrap_objects_digest() {
        let levels = bootstrap_levels();
        assert_eq!(levels.len(), 8);
        assert!(levels[0].exempt);
        let catch_all = &levels[1];
        assert_eq!((catch_all.shares, catch_all.queuing), (5, None));
        let wl = levels.iter().find(|l| l.name == "workload-low");
        assert_eq!(
            wl.map(|l| (l.shares, l.lendable_percent, l.queuing)),
            Some((
                100,
                90,
                Some(Queuing {
                    queues: 128,
                    hand_size: 6,
                    queue_length_limit: 50
                })
            ))
        );
        let schemas: Vec<_> = flow_schemas().iter().filter_map(schema_spec).collect();
        assert_eq!(schemas.len(), flow_schemas().len());
        let nodes = schemas.iter().find(|s| s.name == "system-nodes");
        assert_eq!(
            nodes.map(|s| (s.precedence, s.level.as_str(), s.distinguisher)),
            Some((500, "system", Some(Distinguisher::ByUser)))
        );
    }

    #[test]
    fn nominal_limits_share_the_server_limit_as_upstream() {
        let levels = bootstrap_levels();
        let limits = limits(&levels, 600);
        let by = |name: &str| {
            levels
                .iter()
                .position(|l| l.name == name)
                .map(|i| limits[i])
        };
        // Σ shares = 0 + 5 + 30 + 40 + 10 + 40 + 100 + 20 = 245.
        assert_eq!(by("exempt").map(|l| l.nominal), Some(0));
        assert_eq!(by("catch-all").map(|l| l.nominal), Some(13)); // ceil(600 × 5 / 245)
        let gd = by("global-default");
        assert_eq!(
            gd.map(|l| (l.nominal, l.lendable, l.lower)),
            Some((49, 25, 24))
        );
        assert_eq!(gd.map(|l| l.upper), Some(600));
        assert_eq!(by("workload-low").map(|l| l.nominal), Some(245));
        assert_eq!(by("workload-low").map(|l| l.max_seats), Some(37));
        assert_eq!(by("leader-election").map(|l| l.lendable), Some(0));
    }

    #[test]
    fn a_borrowing_limit_bounds_the_upper_limit() {
        let mut spec = (*bootstrap_levels()[2]).clone();
        spec.borrowing_limit_percent = Some(50);
        let l = limits(&[Arc::new(spec)], 100);
        assert_eq!((l[0].nominal, l[0].upper), (100, 150));
    }
}
