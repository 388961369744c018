//! `/debug/api_priority_and_fairness/dump_priority_levels` (upstream `apf_filter.go`'s debug
//! endpoints): one line per priority level, in upstream's columns — active queues, whether it is
//! idle, whether it is quiescing (a removed level still finishing its requests; never listed
//! here), requests waiting and executing, and the dispatched, rejected, timed-out and cancelled
//! totals of its flows.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

const COLUMNS: &str = "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests";

/// The dump as text.
pub fn dump(fc: &super::FlowControl) -> String {
    let (levels, flows) = fc.snapshot();
    let mut out = format!("{COLUMNS}\n");
    for (name, level) in levels {
        let (active, waiting, executing) = level.occupancy();
        let ours = flows.iter().filter(|f| f.level == name);
        let (mut dispatched, mut rejected, mut timed_out, mut cancelled) = (0, 0, 0, 0);
        for f in ours {
            dispatched += f.dispatched_total();
            rejected += f.rejected_total("queue-full") + f.rejected_total("concurrency-limit");
            timed_out += f.rejected_total("time-out");
            cancelled += f.rejected_total("cancelled");
        }
        let idle = waiting == 0 && executing == 0;
        let _ = writeln!(
            out,
            "{name:<19}, {active:<12}, {idle:<6}, {:<11}, {waiting:<15}, {executing:<17}, {dispatched:<18}, {rejected:<16}, {timed_out:<16}, {cancelled:<17}",
            false
        );
    }
    out
}

/// The handler.
pub async fn dump_priority_levels(State(state): State<AppState>) -> Response {
    let mut r = dump(&state.flowcontrol).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_every_level_with_upstream_columns() {
        let fc = super::super::FlowControl::new(600);
        let text = super::dump(&fc);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(super::COLUMNS));
        let names: Vec<&str> = lines
            .filter_map(|l| l.split(',').next())
            .map(str::trim)
            .collect();
        assert_eq!(
            names,
            [
                "catch-all",
                "exempt",
                "global-default",
                "leader-election",
                "node-high",
                "system",
                "workload-high",
                "workload-low"
            ]
        );
        assert!(text.contains("global-default     , 0           , true  , false      , 0"));
    }
}
