//! Static cost estimation, after cel-go's `checker/cost.go` with Kubernetes' library costs
//! (`apiserver/pkg/cel/library/cost.go`): the worst-case cost of an expression given the sizes
//! the schema allows (`maxItems`, `maxProperties`, `maxLength`, or what the request size limit
//! implies when they are absent). Comprehensions cost their range's size times one iteration.
//!
//! The limits (`apiextensions/validation`, `apiserver/pkg/apis/cel/config.go`):
//! [`STATIC_ESTIMATED_COST_LIMIT`] per expression (times how often the node can occur),
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`] for a whole CRD, [`PER_CALL_LIMIT`] and
//! [`RUNTIME_CEL_COST_BUDGET`] at run time.

use crate::schema::{Kind, Node};
use cel::common::ast::{operators, EntryExpr, Expr, IdedExpr, LiteralValue};
use std::sync::Arc;

/// `StaticEstimatedCostLimit`.
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// `StaticEstimatedCRDCostLimit`.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// `PerCallLimit`: the run-time cost limit of one evaluation.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// `RuntimeCELCostBudget`: the run-time cost budget of one request.
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;
/// `RuntimeCELCostBudgetMatchConditions`: the run-time cost budget of one webhook's or one
/// policy binding's `matchConditions` for one request.
pub const RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS: u64 = 2_500_000;
/// The error of an exceeded budget (`cel.ErrOutOfBudget`'s text as upstream's filter reports it).
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// `common.StringTraversalCostFactor`.
const STRING_TRAVERSAL: f64 = 0.1;
/// `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH: f64 = 0.25;

#[derive(Clone, Default)]
struct Est {
    cost: u64,
    /// The largest size of the value (string length, list or map size).
    size: u64,
    node: Option<Arc<Node>>,
}

fn ceil(x: f64) -> u64 {
    x.ceil().max(0.0) as u64
}

fn traversal(size: u64) -> u64 {
    ceil(size as f64 * STRING_TRAVERSAL)
}

/// The estimated worst-case cost of `e` with `self`/`oldSelf` typed by `root`.
pub fn estimate(e: &IdedExpr, root: &Arc<Node>) -> u64 {
    let mut scope = Vec::new();
    est(e, root, &mut scope).cost
}

fn of_node(node: Option<Arc<Node>>) -> Est {
    let size = node.as_ref().map_or(0, |n| n.max_elements);
    Est {
        cost: 1,
        size,
        node,
    }
}

fn est(e: &IdedExpr, root: &Arc<Node>, scope: &mut Vec<(String, Option<Arc<Node>>)>) -> Est {
    match &e.expr {
        Expr::Literal(l) => Est {
            cost: 0,
            size: match l {
                LiteralValue::String(s) => s.inner().len() as u64,
                LiteralValue::Bytes(b) => b.inner().len() as u64,
                _ => 0,
            },
            node: None,
        },
        Expr::Ident(name) => {
            if let Some((_, n)) = scope.iter().rev().find(|(v, _)| v == name) {
                return of_node(n.clone());
            }
            match name.as_str() {
                "self" | "oldSelf" => of_node(Some(root.clone())),
                _ => Est {
                    cost: 1,
                    ..Est::default()
                },
            }
        }
        Expr::Select(s) => {
            let operand = est(&s.operand, root, scope);
            let field = operand.node.as_ref().and_then(|n| match &n.kind {
                Kind::Object { fields, .. } => fields.get(&s.field).map(|f| f.node.clone()),
                Kind::Map(v) => Some(v.clone()),
                _ => None,
            });
            let mut out = of_node(field);
            out.cost = operand.cost.saturating_add(1);
            if s.test {
                out.node = None;
                out.size = 0;
            }
            out
        }
        Expr::List(l) => {
            let mut cost = 10u64; // cel-go: a list literal costs `common.ListCreateBaseCost`.
            for el in &l.elements {
                cost = cost.saturating_add(est(el, root, scope).cost);
            }
            Est {
                cost,
                size: l.elements.len() as u64,
                node: None,
            }
        }
        Expr::Map(m) => {
            let mut cost = 30u64; // `common.MapCreateBaseCost`.
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    cost = cost
                        .saturating_add(est(&me.key, root, scope).cost)
                        .saturating_add(est(&me.value, root, scope).cost);
                }
            }
            Est {
                cost,
                size: m.entries.len() as u64,
                node: None,
            }
        }
        Expr::Struct(_) => Est {
            cost: 40,
            ..Est::default()
        },
        Expr::Comprehension(c) => {
            let range = est(&c.iter_range, root, scope);
            let init = est(&c.accu_init, root, scope);
            let item = match range.node.as_ref().map(|n| &n.kind) {
                Some(Kind::List(item)) => Some(item.clone()),
                Some(Kind::Map(_)) | Some(Kind::Object { .. }) => None,
                _ => None,
            };
            let depth = scope.len();
            scope.push((c.iter_var.clone(), item));
            if let Some(v2) = &c.iter_var2 {
                scope.push((v2.clone(), None));
            }
            // A bound value (`cel.bind`, two-variable comprehensions) keeps its schema node.
            scope.push((c.accu_var.clone(), init.node.clone()));
            let cond = est(&c.loop_cond, root, scope);
            let step = est(&c.loop_step, root, scope);
            let result = est(&c.result, root, scope);
            scope.truncate(depth);
            let per = cond.cost.saturating_add(step.cost);
            Est {
                cost: range
                    .cost
                    .saturating_add(init.cost)
                    .saturating_add(per.saturating_mul(range.size))
                    .saturating_add(result.cost),
                size: range.size,
                node: None,
            }
        }
        Expr::Call(call) => {
            let target = call.target.as_ref().map(|t| est(t, root, scope));
            let args: Vec<Est> = call.args.iter().map(|a| est(a, root, scope)).collect();
            let sum = |items: &[Est]| items.iter().fold(0u64, |a, e| a.saturating_add(e.cost));
            let base = target
                .as_ref()
                .map_or(0, |t| t.cost)
                .saturating_add(sum(&args));
            let recv = target.as_ref().or(args.first());
            let recv_size = recv.map_or(0, |r| r.size);
            let arg_size = |i: usize| {
                let all: Vec<&Est> = target.iter().chain(args.iter()).collect();
                all.get(i).map_or(0, |a| a.size)
            };
            let name = call.func_name.as_str();
            if matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "sets")
            {
                let product = args
                    .first()
                    .map_or(0, |a| a.size)
                    .saturating_mul(args.get(1).map_or(0, |a| a.size));
                return Est {
                    cost: base.saturating_add(product.max(1)),
                    ..Est::default()
                };
            }
            match name {
                crate::comprehensions::KEYS_FN => Est {
                    cost: base.saturating_add(arg_size(0).max(1)),
                    size: arg_size(0),
                    node: None,
                },
                operators::LOGICAL_AND | operators::LOGICAL_OR => Est {
                    cost: base,
                    ..Est::default()
                },
                operators::CONDITIONAL => {
                    let c = args.first().map_or(0, |a| a.cost);
                    let t = args.get(1).cloned().unwrap_or_default();
                    let f = args.get(2).cloned().unwrap_or_default();
                    let branch = if t.cost >= f.cost {
                        t.clone()
                    } else {
                        f.clone()
                    };
                    Est {
                        cost: c.saturating_add(branch.cost),
                        size: t.size.max(f.size),
                        node: t.node.or(f.node),
                    }
                }
                operators::INDEX | operators::OPT_INDEX => {
                    let item =
                        args.first()
                            .and_then(|a| a.node.as_ref())
                            .and_then(|n| match &n.kind {
                                Kind::List(i) | Kind::Map(i) => Some(i.clone()),
                                _ => None,
                            });
                    let mut out = of_node(item);
                    out.cost = base.saturating_add(1);
                    out
                }
                operators::ADD
                    if args.iter().any(|a| {
                        matches!(a.node.as_ref().map(|n| &n.kind), Some(Kind::List(_)))
                    }) =>
                {
                    Est {
                        cost: base.saturating_add(1),
                        size: arg_size(0).saturating_add(arg_size(1)),
                        node: args.first().and_then(|a| a.node.clone()),
                    }
                }
                operators::ADD => Est {
                    cost: base
                        .saturating_add(traversal(arg_size(0).saturating_add(arg_size(1))).max(1)),
                    size: arg_size(0).saturating_add(arg_size(1)),
                    node: None,
                },
                operators::EQUALS | operators::NOT_EQUALS => Est {
                    cost: base.saturating_add(traversal(arg_size(0).min(arg_size(1))).max(1)),
                    ..Est::default()
                },
                operators::IN => Est {
                    cost: base.saturating_add(arg_size(1).max(1)),
                    ..Est::default()
                },
                "matches" | crate::library::regex::MATCHES_FN | "find" | "findAll" => {
                    let str_cost = ceil((1.0 + recv_size as f64) * STRING_TRAVERSAL);
                    let re_cost = ceil(arg_size(1) as f64 * REGEX_LENGTH).max(1);
                    Est {
                        cost: base.saturating_add(str_cost.saturating_mul(re_cost)),
                        size: recv_size,
                        node: None,
                    }
                }
                "contains" => Est {
                    cost: base.saturating_add(
                        traversal(recv_size)
                            .max(1)
                            .saturating_mul(traversal(arg_size(1)).max(1)),
                    ),
                    ..Est::default()
                },
                "startsWith" | "endsWith" | "charAt" | "lowerAscii" | "upperAscii" | "replace"
                | "split" | "substring" | "trim" | "url" | "isURL" | "ip" | "isIP" | "cidr"
                | "isCIDR" | "quantity" | "isQuantity" | "ip.isCanonical" | "validate"
                | "reverse" | "format" | "strings.quote" => Est {
                    cost: base
                        .saturating_add(traversal(recv_size.saturating_add(arg_size(1))).max(1)),
                    size: recv_size,
                    node: None,
                },
                "join" | "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" => Est {
                    cost: base.saturating_add(recv_size.max(1)),
                    size: recv_size,
                    node: None,
                },
                _ => Est {
                    cost: base.saturating_add(1),
                    ..Est::default()
                },
            }
        }
        Expr::Unspecified => Est::default(),
    }
}

/// upstream's `getCostErrorMessage`.
pub fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let formatted = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {formatted} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}
