//! `/readyz`: the named readiness checks of kube-apiserver (`k8s.io/apiserver/pkg/server/healthz`),
//! with the store standing where etcd stands there.
//!
//! - `GET /readyz` answers `ok` while every check passes. When one fails it answers 500 with one
//!   line per check (`[+]ping ok`, `[-]etcd failed: reason withheld`) and `readyz check failed`;
//!   the reason itself is logged, not sent, as upstream does.
//! - `?verbose` lists the checks on success too, ending `readyz check passed`; `?exclude=<name>`
//!   (repeatable) leaves a check out.
//! - `GET /readyz/<name>` runs one check: `ok`, or 500 `internal server error: <reason>`.
//!
//! Checks: `ping` and `log` (the server answers), `etcd` and `etcd-readiness` (the store takes
//! writes: not failed, room on its disk; [`store::Store::health`]), `shutdown` (fails once the
//! server is shutting down, so load balancers stop sending). Every check is cheap: a probe costs
//! at most one look at the file system.

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// A named readiness check: `Err(reason)` when failing.
type Check = fn(&AppState) -> Result<(), String>;

fn passes(_: &AppState) -> Result<(), String> {
    Ok(())
}

fn store_takes_writes(state: &AppState) -> Result<(), String> {
    state.store.health().map_err(|e| e.to_string())
}

fn not_shutting_down(state: &AppState) -> Result<(), String> {
    if state.shutdown.is_cancelled() {
        Err("process is shutting down".to_string())
    } else {
        Ok(())
    }
}

/// The checks of `/readyz`, in kube-apiserver's order.
const READYZ: [(&str, Check); 5] = [
    ("ping", passes),
    ("log", passes),
    ("etcd", store_takes_writes),
    ("etcd-readiness", store_takes_writes),
    ("shutdown", not_shutting_down),
];

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The outcome of the checks not excluded: `(status, body)`.
pub fn render(
    results: &[(&str, Result<(), String>)],
    verbose: bool,
    excluded: &[&str],
) -> (StatusCode, String) {
    let mut lines = String::new();
    let mut failed = false;
    for (name, result) in results {
        if excluded.contains(name) {
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match result {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                failed = true;
                // Debug, as upstream's V(2): probes poll; the store logs its own failures.
                tracing::debug!(check = name, %reason, "readyz check failed");
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    if failed {
        // `http.Error` ends the body with a newline.
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{lines}readyz check failed\n"),
        )
    } else if verbose {
        (StatusCode::OK, format!("{lines}readyz check passed\n"))
    } else {
        (StatusCode::OK, "ok".to_string())
    }
}

/// `GET /readyz`.
pub async fn readyz(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let query = crate::http::query::Query::parse(query.as_deref());
    let verbose = query.get("verbose").is_some();
    let excluded: Vec<&str> = query.all("exclude").collect();
    let results: Vec<(&str, Result<(), String>)> = READYZ
        .iter()
        .map(|(name, check)| (*name, check(&state)))
        .collect();
    let (code, body) = render(&results, verbose, &excluded);
    text(code, body)
}

/// `GET /readyz/<name>`.
pub async fn readyz_check(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    match READYZ.iter().find(|(n, _)| *n == name) {
        Some((_, check)) => match check(&state) {
            Ok(()) => text(StatusCode::OK, "ok".to_string()),
            Err(reason) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {reason}\n"),
            ),
        },
        None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_passing_is_ok_and_verbose_lists_the_checks() {
        let results = [("ping", Ok(())), ("etcd", Ok(()))];
        assert_eq!(
            render(&results, false, &[]),
            (StatusCode::OK, "ok".to_string())
        );
        assert_eq!(
            render(&results, true, &[]),
            (
                StatusCode::OK,
                "[+]ping ok\n[+]etcd ok\nreadyz check passed\n".to_string()
            )
        );
    }

    #[test]
    fn a_failing_check_is_500_with_its_reason_withheld() {
        let results = [
            ("ping", Ok(())),
            ("etcd", Err("the store has no space left: x".to_string())),
        ];
        let (code, body) = render(&results, false, &[]);
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"
        );
    }

    #[test]
    fn an_excluded_failing_check_does_not_fail() {
        let results = [("etcd", Err("down".to_string()))];
        let (code, body) = render(&results, true, &["etcd"]);
        assert_eq!(code, StatusCode::OK);
        assert_eq!(body, "[+]etcd excluded: ok\nreadyz check passed\n");
    }
}
