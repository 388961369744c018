//! The loopback guard: an unauthenticated server on a loopback address answers only to local
//! clients, not to web pages a browser on the same machine happens to load (issue 21, item 6).
//!
//! Binding loopback keeps other machines out, but not a browser: any page can send requests to
//! `127.0.0.1:6443` (a POST without a `Content-Type` needs no CORS preflight), and a page whose
//! DNS name is rebound to 127.0.0.1 reads the answers too. Two checks close both doors:
//!
//! - **Origin.** Browsers send `Origin` on every cross-origin request that could change state
//!   and on every CORS read. A request whose `Origin` is present and is not a loopback origin
//!   (`http`/`https` with host `localhost`, a 127.0.0.0/8 address or `[::1]`, any port) is
//!   refused. Command-line clients (kubectl, client-go, kube-rs, the Python and JavaScript
//!   clients) send no `Origin`.
//! - **Host.** A DNS-rebound page sends its own name as `Host`. The `Host` header must name
//!   `localhost`, a 127.0.0.0/8 address or `[::1]`, with any port; what kubectl and kube-rs send
//!   for a server URL of `http://127.0.0.1:<port>` or `http://localhost:<port>`. A request
//!   without `Host` (HTTP/1.0; browsers always send one) passes.
//!
//! Refusals are 403 `Forbidden` Statuses saying why. The guard is a tower [`Layer`] in front of
//! every handler; on the good path it reads two headers in place and allocates nothing. It only
//! belongs on ports that serve without authentication (`Config::loopback_guard`); the kubelet
//! admin port and the controller manager's metrics port use it too.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::task::{Context, Poll};

use axum::http::{header, HeaderMap, Request};
use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready};
use tower::{Layer, Service};

use crate::error::ApiError;

/// Longest header value echoed back in a refusal (the rest is cut).
const ECHO_LIMIT: usize = 200;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `Origin` names a page that is not on a loopback origin.
    ForeignOrigin(String),
    /// `Host` names something other than a loopback address or `localhost`.
    ForeignHost(String),
}

impl Refusal {
    /// The message of the 403 Status.
    pub fn message(&self) -> String {
        match self {
            Refusal::ForeignOrigin(origin) => format!(
                "a cross-origin request from a browser (Origin {origin:?}) to an unauthenticated \
                 apiserver is refused: this server serves without authentication on a loopback \
                 address, so only pages on a loopback origin (http or https on localhost, \
                 127.0.0.1 or [::1], any port) may call it"
            ),
            Refusal::ForeignHost(host) => format!(
                "a request for Host {host:?} to an unauthenticated apiserver is refused: this \
                 server serves without authentication on a loopback address and answers only \
                 to Host localhost, 127.0.0.1 or [::1] (any port); any other name is a web \
                 page's DNS rebinding"
            ),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        ApiError::from(api::status::forbidden_request(&self.message())).into_response()
    }
}

/// Checks the `Origin` and `Host` headers of one request.
pub fn check(headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !is_loopback_origin(origin.as_bytes()) {
            return Err(Refusal::ForeignOrigin(echo(origin.as_bytes())));
        }
    }
    if let Some(host) = headers.get(header::HOST) {
        if !is_loopback_authority(host.as_bytes()) {
            return Err(Refusal::ForeignHost(echo(host.as_bytes())));
        }
    }
    Ok(())
}

fn echo(value: &[u8]) -> String {
    String::from_utf8_lossy(&value[..value.len().min(ECHO_LIMIT)]).into_owned()
}

/// `http://` or `https://` followed by a loopback authority, nothing else (an origin has no path).
/// `null` (sandboxed frames, `file:` pages) is not a loopback origin.
pub fn is_loopback_origin(origin: &[u8]) -> bool {
    let rest = strip_prefix_ignore_case(origin, b"http://")
        .or_else(|| strip_prefix_ignore_case(origin, b"https://"));
    rest.is_some_and(is_loopback_authority)
}

/// `host[:port]` where host is `localhost`, a 127.0.0.0/8 address or `[::1]`.
pub fn is_loopback_authority(authority: &[u8]) -> bool {
    let Ok(authority) = std::str::from_utf8(authority) else {
        return false;
    };
    let port = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((ip, after)) = bracketed.split_once(']') else {
            return false;
        };
        if !ip.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()) {
            return false;
        }
        if after.is_empty() {
            return true;
        }
        match after.strip_prefix(':') {
            Some(port) => port,
            None => return false,
        }
    } else {
        let (host, port) = authority.split_once(':').unwrap_or((authority, ""));
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return false;
        }
        port
    };
    port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

fn strip_prefix_ignore_case<'a>(value: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (value.len() >= prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &value[prefix.len()..])
}

/// The layer that puts [`LoopbackGuard`] in front of a service.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopbackGuardLayer;

impl<S> Layer<S> for LoopbackGuardLayer {
    type Service = LoopbackGuard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LoopbackGuard { inner }
    }
}

/// Refuses browser requests from foreign origins and foreign `Host`s; passes the rest to `inner`.
#[derive(Debug, Clone)]
pub struct LoopbackGuard<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for LoopbackGuard<S>
where
    S: Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match check(req.headers()) {
            Ok(()) => Either::Right(self.inner.call(req)),
            Err(refusal) => {
                // Debug only: a page can send thousands a second; the apiserver's failure log
                // (rate-limited) carries the 403 and its message.
                tracing::debug!(reason = %refusal.message(), "request refused by the loopback guard");
                Either::Left(futures::future::ready(Ok(refusal.into_response())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts_pass_with_and_without_port() {
        for host in [
            "localhost",
            "LOCALHOST:6443",
            "127.0.0.1",
            "127.0.0.1:6443",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:6443",
            "[0:0:0:0:0:0:0:1]:1",
        ] {
            assert!(is_loopback_authority(host.as_bytes()), "{host}");
        }
    }

    #[test]
    fn foreign_hosts_are_refused() {
        for host in [
            "evil.example",
            "evil.example:6443",
            "localhost.evil.example",
            "10.0.0.1:6443",
            "0.0.0.0:6443",
            "[::]:6443",
            "[::1]x",
            "[::1]:64x",
            "127.0.0.1:6443:1",
            "[::1",
            "",
        ] {
            assert!(!is_loopback_authority(host.as_bytes()), "{host}");
        }
    }

    #[test]
    fn loopback_origins_pass_and_others_are_refused() {
        for origin in [
            "http://localhost:3000",
            "https://localhost",
            "http://127.0.0.1:8080",
            "http://[::1]:8080",
        ] {
            assert!(is_loopback_origin(origin.as_bytes()), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "null",
            "file://",
            "ftp://localhost",
            "http://localhost/path",
            "http://127.0.0.1.evil.example",
        ] {
            assert!(!is_loopback_origin(origin.as_bytes()), "{origin}");
        }
    }

    #[test]
    fn check_refuses_a_foreign_origin_before_looking_at_host() {
        let h = headers(&[
            (header::HOST, "127.0.0.1:6443"),
            (header::ORIGIN, "http://evil.example"),
        ]);
        let refusal = check(&h).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::ForeignOrigin("http://evil.example".into())
        );
        assert!(refusal
            .message()
            .contains("cross-origin request from a browser"));
    }

    #[test]
    fn check_refuses_a_rebound_host_and_passes_plain_clients() {
        let rebound = headers(&[(header::HOST, "evil.example:6443")]);
        assert_eq!(
            check(&rebound),
            Err(Refusal::ForeignHost("evil.example:6443".into()))
        );
        assert_eq!(check(&headers(&[(header::HOST, "localhost:6443")])), Ok(()));
        assert_eq!(check(&HeaderMap::new()), Ok(()));
    }

    #[test]
    fn a_long_foreign_value_is_cut_in_the_message() {
        let long = format!("http://{}.example", "a".repeat(1000));
        let h = headers(&[(header::ORIGIN, &long)]);
        let Err(Refusal::ForeignOrigin(echoed)) = check(&h) else {
            panic!("not refused");
        };
        assert_eq!(echoed.len(), ECHO_LIMIT);
    }
}
