//! etcd's put rate through its JSON gateway (`POST /v3/kv/put`, grpc-gateway), the baseline that
//! `minik8s bench creates --etcd-gateway URL` prints beside each of its runs: the same writer count,
//! the same load time and 1 KiB values, over HTTP/1.1 with JSON bodies as our creates are, so the
//! two rates compare like for like (issue 17: durable creates at least twice etcd's puts/s).
//!
//! Every writer puts fresh keys under a prefix unique to the run in a closed loop; each put is
//! bounded by the deadline and by a count. A put counts when etcd answers 200 (etcd acknowledges
//! a put after its raft entry is fsynced to its WAL: durable, as our 201). Loopback only.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::Error;

/// What one gateway run measured.
pub(crate) struct PutRate {
    /// Puts answered 200.
    pub puts: u64,
    /// Answers other than 200 and transport errors.
    pub errors: u64,
    /// The run's length.
    pub took: Duration,
}

impl PutRate {
    pub(crate) fn per_second(&self) -> f64 {
        self.puts as f64 / self.took.as_secs_f64().max(f64::EPSILON)
    }
}

/// `writers` concurrent clients putting `value_len`-byte values through the gateway at `url` (an
/// etcd client URL such as `http://127.0.0.1:2379`) for `load`, under `prefix`.
pub(crate) async fn put_rate(
    url: &str,
    prefix: &str,
    writers: usize,
    load: Duration,
    value_len: usize,
) -> Result<PutRate, Error> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let put_url = format!("{}/v3/kv/put", url.trim_end_matches('/'));
    let value = b64.encode(vec![b'x'; value_len]);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(writers)
        .build()?;
    let (put_url, value): (Arc<str>, Arc<str>) = (put_url.into(), value.into());
    let prefix = prefix.to_owned();
    let op = move |w: usize, i: u64| {
        let (http, put_url) = (http.clone(), put_url.clone());
        let body =
            serde_json::json!({"key": b64.encode(format!("{prefix}{w}-{i}")), "value": &*value});
        async move {
            match http.post(&*put_url).json(&body).send().await {
                // The answer read whole, so its connection goes back to the pool.
                Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                _ => false,
            }
        }
    };
    let (puts, errors, took) = super::closed_loop(writers, load, op).await;
    Ok(PutRate { puts, errors, took })
}
