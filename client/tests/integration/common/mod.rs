//! A small Kubernetes-shaped HTTP object server for the client's HTTP-level tests (axum on
//! 127.0.0.1:0). It stores JSON objects per collection path with a global resourceVersion,
//! optimistic concurrency on PUT, JSON merge patch (also used for strategic patches), LIST with
//! limit/continue, canned WATCH bodies (sent in several chunks), request recording, and injected
//! responses served ahead of normal handling.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub user_agent: Option<String>,
    pub body: Value,
}

#[derive(Clone, Debug)]
pub struct Injected {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: Option<Value>,
}

#[derive(Default)]
pub struct ServerState {
    /// collection path → name → object
    objects: Mutex<BTreeMap<String, BTreeMap<String, Value>>>,
    rv: AtomicU64,
    pub requests: Mutex<Vec<Recorded>>,
    pub inject: Mutex<VecDeque<Injected>>,
    pub watch_lines: Mutex<Vec<String>>,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub state: Arc<ServerState>,
    shutdown: CancellationToken,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl TestServer {
    pub async fn start() -> TestServer {
        let state = Arc::new(ServerState::default());
        state.rv.store(100, Ordering::SeqCst);
        let st = state.clone();
        let app = Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
            let st = st.clone();
            async move { handle(st, m, u, h, b) }
        });
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("bind: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("local_addr: {e}"),
        };
        let shutdown = CancellationToken::new();
        let s2 = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s2.cancelled().await })
                .await;
        });
        TestServer {
            addr,
            state,
            shutdown,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn inject(&self, status: u16, retry_after: Option<u64>) {
        self.state.inject.lock().push_back(Injected {
            status,
            retry_after,
            body: None,
        });
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().clone()
    }

    pub fn clear_requests(&self) {
        self.state.requests.lock().clear();
    }

    pub fn object(&self, collection: &str, name: &str) -> Option<Value> {
        self.state
            .objects
            .lock()
            .get(collection)
            .and_then(|c| c.get(name))
            .cloned()
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// Splits `/api/v1/namespaces/ns/pods/name/sub` into (collection, name, sub).
fn split(path: &str) -> Option<(String, Option<String>, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let prefix = match segs.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => return None,
    };
    let rest = segs.get(prefix..)?;
    let ns_len = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        2
    } else {
        0
    };
    let res_idx = prefix + ns_len;
    let collection = format!("/{}", segs.get(..=res_idx)?.join("/"));
    let name = segs.get(res_idx + 1).map(|s| s.to_string());
    let sub = segs.get(res_idx + 2).map(|s| s.to_string());
    Some((collection, name, sub))
}

fn handle(st: Arc<ServerState>, m: Method, u: Uri, h: HeaderMap, b: Bytes) -> Response {
    let query: BTreeMap<String, String> = u
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), urldecode(v)))
                .collect()
        })
        .unwrap_or_default();
    let hv = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
    st.requests.lock().push(Recorded {
        method: m.clone(),
        path: u.path().to_string(),
        query: query.clone(),
        content_type: hv("content-type"),
        authorization: hv("authorization"),
        user_agent: hv("user-agent"),
        body: body.clone(),
    });
    if let Some(inj) = st.inject.lock().pop_front() {
        let mut r = match inj.body {
            Some(b) => (
                StatusCode::from_u16(inj.status).unwrap_or(StatusCode::OK),
                axum::Json(b),
            )
                .into_response(),
            None => status(inj.status, "Injected", "injected failure"),
        };
        if let Some(s) = inj.retry_after {
            if let Ok(v) = s.to_string().parse() {
                r.headers_mut().insert("retry-after", v);
            }
        }
        return r;
    }
    let Some((coll, name, sub)) = split(u.path()) else {
        return status(404, "NotFound", "no such path");
    };
    let mut objects = st.objects.lock();
    let c = objects.entry(coll.clone()).or_default();
    let next_rv = || st.rv.fetch_add(1, Ordering::SeqCst) + 1;
    match (m, name, sub) {
        (Method::GET, None, _) if query.get("watch").map(String::as_str) == Some("true") => {
            // Canned lines newer than the requested RV, then the stream stays open until
            // `timeoutSeconds` (as a real server does).
            let from: u64 = query
                .get("resourceVersion")
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            let lines: Vec<String> = st
                .watch_lines
                .lock()
                .iter()
                .filter(|l| {
                    let v: Value = serde_json::from_str(l).unwrap_or(Value::Null);
                    let rv = v["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|r| r.parse::<u64>().ok());
                    rv.is_none_or(|rv| rv > from)
                })
                .cloned()
                .collect();
            let text = lines.join("\n") + "\n";
            // Deliver in uneven chunks so lines straddle chunk boundaries.
            let bytes = text.into_bytes();
            let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
                .chunks(37)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            let hold = query
                .get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0);
            let tail = futures::stream::once(async move {
                tokio::time::sleep(std::time::Duration::from_secs(hold)).await;
                Ok::<Bytes, std::io::Error>(Bytes::new())
            });
            Response::new(Body::from_stream(futures::StreamExt::chain(
                futures::stream::iter(chunks),
                tail,
            )))
        }
        (Method::GET, None, _) => {
            let mut all: Vec<Value> = c.values().cloned().collect();
            if !coll.contains("/namespaces/") {
                // A cluster-wide list of a namespaced resource spans every namespace.
                let (prefix, resource) = coll.rsplit_once('/').unwrap_or(("", ""));
                for (path, objs) in objects.iter() {
                    let ns_coll = path
                        .strip_prefix(prefix)
                        .and_then(|r| r.strip_prefix("/namespaces/"));
                    if ns_coll.is_some_and(|r| r.split('/').nth(1) == Some(resource)) {
                        all.extend(objs.values().cloned());
                    }
                }
            }
            let start: usize = query
                .get("continue")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let limit: usize = query
                .get("limit")
                .and_then(|s| s.parse().ok())
                .unwrap_or(usize::MAX);
            let end = start.saturating_add(limit).min(all.len());
            let items = all
                .get(start..end)
                .map(<[Value]>::to_vec)
                .unwrap_or_default();
            let mut meta = json!({"resourceVersion": st.rv.load(Ordering::SeqCst).to_string()});
            if end < all.len() {
                meta["continue"] = json!(end.to_string());
            }
            axum::Json(
                json!({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}),
            )
            .into_response()
        }
        (Method::POST, None, _) => {
            let mut obj = body;
            let n = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if c.contains_key(&n) {
                return status(409, "AlreadyExists", &format!("{n} already exists"));
            }
            obj["metadata"]["resourceVersion"] = json!(next_rv().to_string());
            obj["metadata"]["uid"] = json!(format!("uid-{n}"));
            c.insert(n, obj.clone());
            (StatusCode::CREATED, axum::Json(obj)).into_response()
        }
        (Method::POST, Some(n), Some(sub)) => {
            if !c.contains_key(&n) {
                return status(404, "NotFound", &format!("{n} not found"));
            }
            let _ = sub;
            (
                StatusCode::CREATED,
                axum::Json(json!({"kind": "Status", "status": "Success", "code": 201})),
            )
                .into_response()
        }
        (Method::GET, Some(n), _) => match c.get(&n) {
            Some(o) => axum::Json(o.clone()).into_response(),
            None => status(404, "NotFound", &format!("{n} not found")),
        },
        (Method::PUT, Some(n), _) => {
            let Some(cur) = c.get(&n) else {
                return status(404, "NotFound", &format!("{n} not found"));
            };
            let want = body["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            if !want.is_empty() && Some(want) != cur["metadata"]["resourceVersion"].as_str() {
                return status(409, "Conflict", "the object has been modified");
            }
            let mut obj = body.clone();
            obj["metadata"]["resourceVersion"] = json!(next_rv().to_string());
            c.insert(n, obj.clone());
            axum::Json(obj).into_response()
        }
        (Method::PATCH, Some(n), _) => {
            let Some(cur) = c.get_mut(&n) else {
                return status(404, "NotFound", &format!("{n} not found"));
            };
            merge(cur, &body);
            cur["metadata"]["resourceVersion"] = json!(next_rv().to_string());
            axum::Json(cur.clone()).into_response()
        }
        (Method::DELETE, Some(n), _) => match c.remove(&n) {
            Some(_) => axum::Json(json!({"kind": "Status", "status": "Success"})).into_response(),
            None => status(404, "NotFound", &format!("{n} not found")),
        },
        _ => status(405, "MethodNotAllowed", "unsupported"),
    }
}

fn urldecode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
