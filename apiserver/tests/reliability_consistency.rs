//! T2 (concurrent conflicting updates / linearizability, API level) and T3 (watch guarantees)
//! of spec/reliability.md, sized for CI.
//!
//! Eight sequential clients drive GET/LIST/PUT(rv)/CREATE/DELETE on ten keys with unique values
//! while eight watchers record every event. The checker verifies the order the server claims
//! (dense revisions) instead of searching for one: (a) acked write revisions are unique, (b)
//! real-time order holds, (c) replaying the watch history reproduces every read and every 409,
//! at most one update succeeds per (key, base revision). Watch streams must be ordered, unique,
//! gap-free, resumable, bookmark-consistent, type-correct and filter-correct. A lost-update
//! counter (8 × 200 increments with retry on 409) must end at exactly 1,600.
//!
//! Randomized: prints its seed; replay with `TEST_SEED=<n>`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const KEYS: usize = 10;
const CLIENTS: usize = 8;
const MIX_DURATION: Duration = Duration::from_secs(6);
const MAX_OPS_PER_CLIENT: usize = 3_000;
const NS: &str = "t2";

#[derive(Debug, Clone)]
enum Outcome {
    /// A write was acknowledged at this revision.
    Wrote(u64),
    /// A read saw this (revision, value) or nothing.
    Read(Option<(u64, String)>),
    Conflict,
    AlreadyExists,
    NotFound,
    /// A delete was acknowledged (its revision comes from the watch history).
    Deleted,
}

#[derive(Debug, Clone)]
struct Op {
    kind: &'static str,
    key: String,
    base: Option<u64>,
    value: Option<String>,
    invoke: Instant,
    ret: Instant,
    outcome: Outcome,
}

#[derive(Debug, Clone)]
struct WatchEvent {
    ty: String,
    rv: u64,
    key: String,
    value: Option<String>,
    parity: Option<String>,
}

fn seed() -> u64 {
    let seed = std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("TEST_SEED={seed}");
    seed
}

fn cm_value(obj: &Value) -> Option<String> {
    obj.pointer("/data/v")
        .and_then(Value::as_str)
        .map(String::from)
}

fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn body(key: &str, value: &str, seq: u64, rv: Option<u64>) -> Value {
    let mut meta = json!({ "name": key, "labels": { "parity": if seq.is_multiple_of(2) { "even" } else { "odd" } } });
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv.to_string());
    }
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": { "v": value } })
}

async fn client_loop(url: String, id: usize, seed: u64, deadline: Instant) -> Vec<Op> {
    let http = reqwest::Client::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(id as u64));
    let mut known: HashMap<String, u64> = HashMap::new();
    let mut ops = Vec::new();
    let base = format!("{url}/api/v1/namespaces/{NS}/configmaps");
    let mut seq = 0u64;
    while Instant::now() < deadline && ops.len() < MAX_OPS_PER_CLIENT {
        let key = format!("k{}", rng.gen_range(0..KEYS));
        let dice = rng.gen_range(0..100);
        seq += 1;
        let value = format!("c{id}-{seq}");
        let invoke = Instant::now();
        let (kind, base_rv, val, outcome) = if dice < 30 {
            let r = http.get(format!("{base}/{key}")).send().await.unwrap();
            let code = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            let out = match code {
                200 => {
                    known.insert(key.clone(), rv_of(&v));
                    Outcome::Read(Some((rv_of(&v), cm_value(&v).unwrap_or_default())))
                }
                404 => {
                    known.remove(&key);
                    Outcome::Read(None)
                }
                c => panic!("GET answered {c}: {v}"),
            };
            ("get", None, None, out)
        } else if dice < 40 {
            let r = http.get(&base).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let v: Value = r.json().await.unwrap();
            for item in v["items"].as_array().unwrap() {
                let k = item["metadata"]["name"].as_str().unwrap().to_string();
                known.insert(k, rv_of(item));
            }
            ("list", None, None, Outcome::Read(None))
        } else if dice < 85 {
            let Some(b) = known.get(&key).copied() else {
                continue;
            };
            let r = http
                .put(format!("{base}/{key}"))
                .json(&body(&key, &value, seq, Some(b)))
                .send()
                .await
                .unwrap();
            let code = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            let out = match code {
                200 => {
                    known.insert(key.clone(), rv_of(&v));
                    Outcome::Wrote(rv_of(&v))
                }
                409 => {
                    assert_eq!(v["reason"], "Conflict", "{v}");
                    known.remove(&key);
                    Outcome::Conflict
                }
                404 => {
                    known.remove(&key);
                    Outcome::NotFound
                }
                c => panic!("PUT answered {c}: {v}"),
            };
            ("put", Some(b), Some(value), out)
        } else if dice < 95 {
            let r = http
                .post(&base)
                .json(&body(&key, &value, seq, None))
                .send()
                .await
                .unwrap();
            let code = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            let out = match code {
                201 => {
                    known.insert(key.clone(), rv_of(&v));
                    Outcome::Wrote(rv_of(&v))
                }
                409 => Outcome::AlreadyExists,
                c => panic!("POST answered {c}: {v}"),
            };
            ("create", None, Some(value), out)
        } else {
            let b = known.get(&key).copied();
            let opts = match b {
                Some(b) => json!({ "preconditions": { "resourceVersion": b.to_string() } }),
                None => json!({}),
            };
            let r = http
                .delete(format!("{base}/{key}"))
                .json(&opts)
                .send()
                .await
                .unwrap();
            let code = r.status().as_u16();
            known.remove(&key);
            let out = match code {
                200 => Outcome::Deleted,
                404 => Outcome::NotFound,
                409 => Outcome::Conflict,
                c => panic!("DELETE answered {c}"),
            };
            ("delete", b, None, out)
        };
        ops.push(Op {
            kind,
            key,
            base: base_rv,
            value: val,
            invoke,
            ret: Instant::now(),
            outcome,
        });
    }
    ops
}

/// Reads a watch stream into `events` until `stop` or the stream ends. Records bookmarks as
/// `BOOKMARK` events.
async fn watch_into(
    url: String,
    query: String,
    events: Arc<Mutex<Vec<WatchEvent>>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let http = reqwest::Client::new();
    let r = http
        .get(format!(
            "{url}/api/v1/namespaces/{NS}/configmaps?watch=true&allowWatchBookmarks=true&{query}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut stream = r.bytes_stream();
    let mut buf = Vec::new();
    loop {
        let chunk = tokio::select! {
            _ = stop.cancelled() => return,
            c = stream.next() => c,
        };
        let Some(Ok(chunk)) = chunk else { return };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let v: Value = serde_json::from_slice(&line).unwrap();
            let obj = &v["object"];
            events.lock().push(WatchEvent {
                ty: v["type"].as_str().unwrap().to_string(),
                rv: rv_of(obj),
                key: obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                value: cm_value(obj),
                parity: obj
                    .pointer("/metadata/labels/parity")
                    .and_then(Value::as_str)
                    .map(String::from),
            });
        }
    }
}

async fn counter_client(url: String, id: usize, increments: usize) -> usize {
    let http = reqwest::Client::new();
    let uri = format!("{url}/api/v1/namespaces/t2c/configmaps/counter");
    let mut conflicts = 0;
    for _ in 0..increments {
        loop {
            let mut cm: Value = http.get(&uri).send().await.unwrap().json().await.unwrap();
            let n: u64 = cm["data"]["n"].as_str().unwrap().parse().unwrap();
            cm["data"]["n"] = json!((n + 1).to_string());
            cm["data"]["last"] = json!(format!("client-{id}"));
            let r = http.put(&uri).json(&cm).send().await.unwrap();
            match r.status().as_u16() {
                200 => break,
                409 => conflicts += 1,
                c => panic!("counter PUT answered {c}"),
            }
        }
    }
    conflicts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_t3_linearizable_writes_and_watch_guarantees() {
    let seed = seed();
    let server = common::start_with(apiserver::Config {
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let url = server.url();
    let http = reqwest::Client::new();
    for ns in [NS, "t2c"] {
        let r = http
            .post(format!("{url}/api/v1/namespaces"))
            .json(&json!({"metadata":{"name":ns}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    // Some history before the watchers start, so that "past" watchers have something to replay.
    for i in 0..KEYS {
        let key = format!("k{i}");
        let r = http
            .post(format!("{url}/api/v1/namespaces/{NS}/configmaps"))
            .json(&body(&key, &format!("init-{i}"), i as u64, None))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    let r = http
        .post(format!("{url}/api/v1/namespaces/t2c/configmaps"))
        .json(&json!({"metadata":{"name":"counter"},"data":{"n":"0"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let list: Value = http
        .get(format!("{url}/api/v1/namespaces/{NS}/configmaps"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r0 = rv_of(&json!({"metadata": list["metadata"]}));
    let initial: BTreeMap<String, (u64, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_string(),
                (rv_of(i), cm_value(i).unwrap()),
            )
        })
        .collect();

    let stop = tokio_util::sync::CancellationToken::new();
    let past = r0 - 5;
    let future = r0 + 10;
    let specs: Vec<(&str, String)> = vec![
        ("now", format!("resourceVersion={r0}")),
        ("now", format!("resourceVersion={r0}")),
        ("now", format!("resourceVersion={r0}")),
        ("now", format!("resourceVersion={r0}")),
        ("past", format!("resourceVersion={past}")),
        ("past", format!("resourceVersion={past}")),
        ("future", format!("resourceVersion={future}")),
        (
            "even",
            format!("resourceVersion={r0}&labelSelector=parity%3Deven"),
        ),
    ];
    let mut watchers = Vec::new();
    for (kind, q) in &specs {
        let events = Arc::new(Mutex::new(Vec::new()));
        let h = tokio::spawn(watch_into(
            url.clone(),
            q.clone(),
            events.clone(),
            stop.clone(),
        ));
        watchers.push((*kind, events, h));
    }
    let deadline = Instant::now() + MIX_DURATION;
    let mut clients = Vec::new();
    for id in 0..CLIENTS {
        clients.push(tokio::spawn(client_loop(url.clone(), id, seed, deadline)));
    }
    let started = Instant::now();
    let mut counters = Vec::new();
    for id in 0..CLIENTS {
        counters.push(tokio::spawn(counter_client(url.clone(), id, 200)));
    }
    let mut ops: Vec<Op> = Vec::new();
    for c in clients {
        ops.extend(c.await.unwrap());
    }
    let mut conflicts = 0;
    for c in counters {
        conflicts += c.await.unwrap();
    }
    eprintln!("writers done after {:?}", started.elapsed());
    eprintln!(
        "mix ops: {}, counter conflicts retried: {conflicts}",
        ops.len()
    );
    let counter: Value = http
        .get(format!("{url}/api/v1/namespaces/t2c/configmaps/counter"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        counter["data"]["n"], "1600",
        "lost updates ({conflicts} conflicts retried)"
    );

    // Every watcher must reach a bookmark at or after the final revision.
    let fin: Value = http
        .get(format!("{url}/api/v1/namespaces/{NS}/configmaps"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let final_rv = rv_of(&json!({"metadata": fin["metadata"]}));
    let reached = common::eventually(Duration::from_secs(15), || {
        let watchers = &watchers;
        async move {
            watchers.iter().all(|(_, ev, _)| {
                ev.lock()
                    .iter()
                    .any(|e| e.ty == "BOOKMARK" && e.rv >= final_rv)
            })
        }
    })
    .await;
    stop.cancel();
    assert!(reached, "some watcher never reached revision {final_rv}");
    for (_, _, h) in watchers.iter_mut() {
        let _ = h.await;
    }

    // Reference history: the first "now" watcher, with the pre-watch state.
    let reference: Vec<WatchEvent> = watchers[0]
        .1
        .lock()
        .iter()
        .filter(|e| e.ty != "BOOKMARK" && e.rv <= final_rv)
        .cloned()
        .collect();
    let n_ops = ops.len();
    let violations = check(&ops, &reference, &initial, r0);
    for (kind, events, _) in &watchers {
        let events = events.lock().clone();
        check_stream(kind, &events, &reference, past, future, &initial, final_rv)
            .unwrap_or_else(|e| panic!("{kind} watcher: {e}"));
    }
    assert!(
        violations.is_empty(),
        "{} violations over {n_ops} ops: {:#?}",
        violations.len(),
        &violations[..violations.len().min(10)]
    );
    assert!(
        n_ops > 200,
        "too little traffic for a meaningful check: {n_ops} ops"
    );
    server.stop().await.unwrap();
}

/// Per-key state history from the reference stream: (rv, value or None for deleted).
fn key_history(
    reference: &[WatchEvent],
    initial: &BTreeMap<String, (u64, String)>,
) -> HashMap<String, Vec<(u64, Option<String>)>> {
    let mut h: HashMap<String, Vec<(u64, Option<String>)>> = HashMap::new();
    for (k, (rv, v)) in initial {
        h.entry(k.clone()).or_default().push((*rv, Some(v.clone())));
    }
    for e in reference {
        let state = if e.ty == "DELETED" {
            None
        } else {
            e.value.clone()
        };
        h.entry(e.key.clone()).or_default().push((e.rv, state));
    }
    h
}

fn check(
    ops: &[Op],
    reference: &[WatchEvent],
    initial: &BTreeMap<String, (u64, String)>,
    r0: u64,
) -> Vec<String> {
    let mut v = Vec::new();
    let hist = key_history(reference, initial);
    let by_rv: HashMap<u64, &WatchEvent> = reference.iter().map(|e| (e.rv, e)).collect();
    // (a) unique acked write revisions, each present in the history with the written value.
    let mut seen = HashMap::new();
    for op in ops {
        if let Outcome::Wrote(rv) = op.outcome {
            if let Some(prev) = seen.insert(rv, op.key.clone()) {
                v.push(format!("revision {rv} acked twice ({prev}, {})", op.key));
            }
            match by_rv.get(&rv) {
                Some(e) if e.key == op.key && e.value == op.value => {}
                other => v.push(format!(
                    "acked {} {} at {rv} not in history as written: {other:?}",
                    op.kind, op.key
                )),
            }
        }
    }
    // (b) real-time order of acked writes: sweep by return time.
    let mut writes: Vec<(&Op, u64)> = ops
        .iter()
        .filter_map(|o| match o.outcome {
            Outcome::Wrote(rv) => Some((o, rv)),
            _ => None,
        })
        .collect();
    let mut by_ret = writes.clone();
    by_ret.sort_by_key(|(o, _)| o.ret);
    writes.sort_by_key(|(o, _)| o.invoke);
    let mut max_before = r0;
    let mut j = 0;
    let mut max_before_at = Vec::new();
    for (o, rv) in &writes {
        while j < by_ret.len() && by_ret[j].0.ret < o.invoke {
            max_before = max_before.max(by_ret[j].1);
            j += 1;
        }
        if *rv <= max_before {
            v.push(format!(
                "write {} at {rv} invoked after a write at {max_before} returned",
                o.key
            ));
        }
        max_before_at.push((o.invoke, max_before));
    }
    let floor_at = |t: Instant| -> u64 {
        let i = max_before_at.partition_point(|(inv, _)| *inv <= t);
        if i == 0 {
            r0
        } else {
            max_before_at[i - 1].1
        }
    };
    // (c) reads and 409s against the history.
    for op in ops {
        let empty = Vec::new();
        let h = hist.get(&op.key).unwrap_or(&empty);
        let floor = floor_at(op.invoke);
        match (op.kind, &op.outcome) {
            ("get", Outcome::Read(Some((rv, val)))) => match h.iter().position(|(r, _)| r == rv) {
                Some(i) if h[i].1.as_deref() == Some(val.as_str()) => {
                    if let Some((next, _)) = h.get(i + 1) {
                        if *next <= floor {
                            v.push(format!(
                                "stale GET {}: saw {rv} but {next} was acked before the read",
                                op.key
                            ));
                        }
                    }
                }
                _ => v.push(format!(
                    "GET {} saw ({rv}, {val}) which no write produced",
                    op.key
                )),
            },
            ("get", Outcome::Read(None)) => {
                let last = h.iter().rev().find(|(r, _)| *r <= floor);
                if let Some((r, Some(_))) = last {
                    if !h.iter().any(|(r2, s)| r2 > r && s.is_none()) {
                        v.push(format!(
                            "GET {} said NotFound but it existed since {r}",
                            op.key
                        ));
                    }
                }
            }
            ("put", Outcome::Wrote(rv)) => {
                let i = h.iter().position(|(r, _)| r == rv);
                match i.and_then(|i| i.checked_sub(1)).map(|p| h[p].0) {
                    Some(prev) if Some(prev) == op.base => {}
                    other => v.push(format!(
                        "PUT {} at {rv} based on {:?} but the previous state was {other:?}",
                        op.key, op.base
                    )),
                }
            }
            ("put", Outcome::Conflict) => {
                let base = op.base.unwrap_or(0);
                if !h.iter().any(|(r, _)| *r > base) {
                    v.push(format!(
                        "PUT {} based on {base} got 409 but nothing changed it",
                        op.key
                    ));
                }
            }
            _ => {}
        }
    }
    // At most one successful update per (key, base).
    let mut per_base: HashMap<(String, u64), usize> = HashMap::new();
    for op in ops {
        if let (Some(b), Outcome::Wrote(_)) = (op.base, &op.outcome) {
            *per_base.entry((op.key.clone(), b)).or_default() += 1;
        }
    }
    for ((k, b), n) in per_base {
        if n > 1 {
            v.push(format!("{n} updates of {k} succeeded from base {b}"));
        }
    }
    v
}

fn check_stream(
    kind: &str,
    events: &[WatchEvent],
    reference: &[WatchEvent],
    past: u64,
    future: u64,
    initial: &BTreeMap<String, (u64, String)>,
    final_rv: u64,
) -> Result<(), String> {
    let mut last = 0;
    let mut last_bookmark = 0;
    for e in events {
        if e.ty == "BOOKMARK" {
            if e.rv < last {
                return Err(format!("bookmark {} after event {last}", e.rv));
            }
            last_bookmark = e.rv;
            continue;
        }
        if e.rv <= last {
            return Err(format!("event {} not after {last} (ordered/unique)", e.rv));
        }
        if e.rv <= last_bookmark {
            return Err(format!("event {} after bookmark {last_bookmark}", e.rv));
        }
        last = e.rv;
    }
    let got: Vec<(String, u64, String)> = events
        .iter()
        .filter(|e| e.ty != "BOOKMARK" && e.rv <= final_rv)
        .map(|e| (e.ty.clone(), e.rv, e.key.clone()))
        .collect();
    let expected: Vec<(String, u64, String)> = match kind {
        "now" => reference
            .iter()
            .map(|e| (e.ty.clone(), e.rv, e.key.clone()))
            .collect(),
        "future" => reference
            .iter()
            .filter(|e| e.rv > future)
            .map(|e| (e.ty.clone(), e.rv, e.key.clone()))
            .collect(),
        "past" => {
            // The replayed prefix (past, r0] are the initial creates of the last keys.
            let mut pre: Vec<(String, u64, String)> = initial
                .iter()
                .filter(|(_, (rv, _))| *rv > past)
                .map(|(k, (rv, _))| ("ADDED".to_string(), *rv, k.clone()))
                .collect();
            pre.sort_by_key(|e| e.1);
            pre.extend(
                reference
                    .iter()
                    .map(|e| (e.ty.clone(), e.rv, e.key.clone())),
            );
            pre
        }
        "even" => {
            // Parity of the initial objects: seq = key index.
            let mut state: HashMap<String, Option<String>> = HashMap::new();
            for k in initial.keys() {
                let i: u64 = k[1..].parse().unwrap();
                let parity = if i.is_multiple_of(2) { "even" } else { "odd" };
                state.insert(k.clone(), Some(parity.to_string()));
            }
            let mut out = Vec::new();
            for e in reference {
                let before = state.get(&e.key).cloned().flatten().as_deref() == Some("even");
                let after_state = if e.ty == "DELETED" {
                    None
                } else {
                    e.parity.clone()
                };
                let after = after_state.as_deref() == Some("even");
                state.insert(e.key.clone(), after_state);
                let ty = match (before, after, e.ty.as_str()) {
                    (_, _, "DELETED") if before => Some("DELETED"),
                    (_, _, "DELETED") => None,
                    (false, true, _) => Some("ADDED"),
                    (true, true, _) => Some("MODIFIED"),
                    (true, false, _) => Some("DELETED"),
                    (false, false, _) => None,
                };
                if let Some(ty) = ty {
                    out.push((ty.to_string(), e.rv, e.key.clone()));
                }
            }
            out
        }
        _ => unreachable!(),
    };
    if got != expected {
        let first = got.iter().zip(expected.iter()).position(|(a, b)| a != b);
        return Err(format!(
            "stream differs from the history (got {}, expected {}; first difference at {first:?}: {:?} vs {:?})",
            got.len(),
            expected.len(),
            first.map(|i| &got[i]),
            first.map(|i| &expected[i]),
        ));
    }
    // Type correctness on the full history: ADDED iff absent before, DELETED carries the last value.
    if kind == "now" {
        let mut present: HashMap<String, Option<String>> = initial
            .iter()
            .map(|(k, (_, v))| (k.clone(), Some(v.clone())))
            .collect();
        for e in reference {
            let before = present.get(&e.key).cloned().flatten();
            match e.ty.as_str() {
                "ADDED" if before.is_some() => {
                    return Err(format!("ADDED {} at {} while present", e.key, e.rv))
                }
                "MODIFIED" if before.is_none() => {
                    return Err(format!("MODIFIED {} at {} while absent", e.key, e.rv))
                }
                "DELETED" if before != e.value => {
                    return Err(format!(
                        "DELETED {} at {} without its last state",
                        e.key, e.rv
                    ))
                }
                _ => {}
            }
            present.insert(
                e.key.clone(),
                if e.ty == "DELETED" {
                    None
                } else {
                    e.value.clone()
                },
            );
        }
    }
    Ok(())
}
