//! WATCH (spec §7.3): chunked JSON lines `{"type":…,"object":…}`, one event per line, served from
//! the watch cache.
//!
//! Each watch is one task that reads its resource's shared live log
//! ([`LiveEvents`](crate::watch_cache::LiveEvents)) and owns a bounded response channel. Every
//! event already there when the task wakes goes out in one chunk (one write and one wake-up of the
//! client per burst, and no event waits for a later one); an event whose object goes out
//! unchanged is the cache's shared JSON text, copied into the chunk, never serialised again per
//! watcher. Namespace and selectors are checked on the cached object before anything is encoded.
//! It ends when `timeoutSeconds` (or the default lifetime) elapses, when the client goes away,
//! when the watcher falls more than the log's length behind (the client re-watches from its last
//! resourceVersion), or at server shutdown — always with a clean end of the chunked body.
//! Selector transitions are delivered as ADDED/DELETED, as the apiserver's cacher does.
//!
//! A custom resource whose CRD converts through a webhook: the events that go out together
//! (at most [`MAX_CONVERTED_BATCH`]) are converted to the watch's version in one review before
//! they are written. A failed conversion ends the watch with an ERROR event (500
//! `Internal error occurred: <the webhook's error>`), as upstream's storage watch ends on an
//! event it cannot decode; the client re-watches or relists. Nothing else is affected.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::error::Result;
use crate::http::negotiate::Output;
use crate::http::query::{IncludeObject, ListOptions};
use crate::http::render::{output, write_presented};
use crate::http::request::Ctx;
use crate::registry::conversion::Batch;
use crate::registry::store::WatchOpened;
use crate::registry::Resource;
use crate::table;
use crate::watch_cache::{CacheEvent, EventType, Select, WatchFrom, WatchStart};

/// Frames in flight between the watch task and hyper: small, the cache queue is the buffer.
const RESPONSE_CHANNEL: usize = 16;

/// Events queued together are sent as one chunk of at most about this many bytes.
const MAX_CHUNK: usize = 64 * 1024;

/// Most events held for conversion before they are converted and sent: one review's worth.
const MAX_CONVERTED_BATCH: usize = crate::registry::conversion::MAX_OBJECTS_PER_REVIEW;

struct Encoder {
    resource: Arc<Resource>,
    out: Output,
    include: IncludeObject,
    first_table: bool,
    /// Events held for one conversion (resources with a webhook converter only).
    pending: Vec<(EventType, Arc<CacheEvent>)>,
    /// The watch's `apiVersion`: under a converter, events already in it need no conversion.
    api_version: String,
}

impl Encoder {
    fn new(resource: Arc<Resource>, out: Output, include: IncludeObject) -> Self {
        Encoder {
            api_version: resource.info.api_version(),
            resource,
            out,
            include,
            first_table: true,
            pending: Vec::new(),
        }
    }

    fn object(&mut self, obj: &Value) -> Value {
        let obj = self.resource.present(obj.clone());
        match self.out {
            Output::Table => {
                let first = std::mem::replace(&mut self.first_table, false);
                table::table(
                    &self.resource,
                    std::iter::once(&obj),
                    self.include,
                    json!({ "resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null) }),
                    first,
                )
            }
            Output::PartialObjectMetadata | Output::PartialObjectMetadataList => {
                table::partial_metadata(&obj)
            }
            Output::Json | Output::Yaml => obj,
        }
    }

    /// Appends the line of one cache event to `out`: the event's shared serialisation when the
    /// object goes out unchanged, else rendered for this watcher. Under a webhook converter an
    /// event in another version than the watch's is held for [`flush`](Self::flush) instead, and
    /// so is every event after a held one (order is kept); a watch of the storage version keeps
    /// the shared serialisation.
    fn write_event(&mut self, out: &mut Vec<u8>, kind: EventType, ev: &Arc<CacheEvent>) {
        if self.resource.converter().is_some() {
            let version = ev.object.get("apiVersion").and_then(Value::as_str);
            if !self.pending.is_empty() || version != Some(self.api_version.as_str()) {
                self.pending.push((kind, ev.clone()));
                return;
            }
        }
        if self.out != Output::Json {
            let object = self.object(&ev.output_object());
            out.extend_from_slice(&frame(kind.as_str(), &object));
            return;
        }
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_str().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.resource.is_presentable(&ev.object) {
            let object = ev.encoded_object();
            out.reserve(object.len() + 2);
            out.extend_from_slice(object);
        } else {
            write_presented(out, &self.resource, &ev.output_object());
        }
        out.extend_from_slice(b"}\n");
    }

    /// Whether as many events are held as one review converts.
    fn pending_full(&self) -> bool {
        self.pending.len() >= MAX_CONVERTED_BATCH
    }

    /// Converts the held events to the watch's version in one review and appends their lines
    /// to `out`; the ERROR event's Status when the conversion failed.
    async fn flush(&mut self, out: &mut Vec<u8>) -> Result<(), Value> {
        let Some(converter) = self.resource.converter().cloned() else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let objects: Vec<Arc<Value>> = pending
            .iter()
            .map(|(_, ev)| match ev.output_object() {
                std::borrow::Cow::Borrowed(_) => ev.object.clone(),
                std::borrow::Cow::Owned(o) => Arc::new(o),
            })
            .collect();
        let api_version = self.resource.info.api_version();
        let converted = converter
            .convert(&objects, &api_version, Batch::Items)
            .await
            .map_err(|e| api::status::to_json(&api::status::internal(&e.0)))?;
        for ((kind, _), obj) in pending.iter().zip(converted) {
            if self.out == Output::Json {
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(kind.as_str().as_bytes());
                out.extend_from_slice(b"\",\"object\":");
                write_presented(out, &self.resource, &obj);
                out.extend_from_slice(b"}\n");
            } else {
                let object = self.object(&obj);
                out.extend_from_slice(&frame(kind.as_str(), &object));
            }
        }
        Ok(())
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let obj = json!({
            "kind": self.resource.info.kind,
            "apiVersion": self.resource.info.api_version(),
            "metadata": meta,
        });
        frame("BOOKMARK", &obj)
    }

    fn error(&self, status: &Value) -> Bytes {
        let obj = if self.out == Output::Table {
            table::status_table(status)
        } else {
            status.clone()
        };
        frame("ERROR", &obj)
    }
}

/// Sends `chunk` (after converting the events held for conversion); false when the watch ends:
/// the client went away, the server shuts down, or a conversion failed (its ERROR event is sent
/// first).
async fn send_chunk(
    enc: &mut Encoder,
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
    chunk: &mut Vec<u8>,
    shutdown: &CancellationToken,
) -> bool {
    // The common case needs no wait: nothing to convert and room in the response channel.
    if enc.pending.is_empty() {
        if chunk.is_empty() {
            return true;
        }
        match tx.try_send(Ok(std::mem::take(chunk).into())) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
            Err(mpsc::error::TrySendError::Full(item)) => {
                // The client is slow: wait for room, or for shutdown.
                return tokio::select! {
                    sent = tx.send(item) => sent.is_ok(),
                    _ = shutdown.cancelled() => false,
                };
            }
        }
    }
    let flushed = tokio::select! {
        r = enc.flush(chunk) => r,
        _ = shutdown.cancelled() => return false,
        _ = tx.closed() => return false,
    };
    if let Err(status) = flushed {
        if !chunk.is_empty() {
            let _ = tx.send(Ok(std::mem::take(chunk).into())).await;
        }
        let _ = tx.send(Ok(enc.error(&status))).await;
        return false;
    }
    chunk.is_empty() || tx.send(Ok(std::mem::take(chunk).into())).await.is_ok()
}

fn frame(kind: &str, object: &Value) -> Bytes {
    let mut line =
        api::wire::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Appends the line of a live event to `chunk` if this watcher sends it (not at or before
/// `skip_through`, and passing [`translate`]); `last_rv` follows every event, sent or not.
fn append_live(
    enc: &mut Encoder,
    chunk: &mut Vec<u8>,
    ev: &Arc<CacheEvent>,
    prefix: &str,
    select: Select<'_>,
    skip_through: u64,
    last_rv: &mut u64,
) {
    *last_rv = (*last_rv).max(ev.revision);
    if ev.revision <= skip_through {
        return;
    }
    if let Some(kind) = translate(ev, prefix, select) {
        enc.write_event(chunk, kind, ev);
    }
}

/// What one cache event means to one watcher, after namespace and selector filtering.
fn translate(ev: &CacheEvent, prefix: &str, select: Select<'_>) -> Option<EventType> {
    if !ev.key.starts_with(prefix) {
        return None;
    }
    let now = select.matches(&ev.object);
    // Told on the previous state's view where the filter can: it is decoded only for a filter
    // that reads more than a view keeps.
    let before = ev.prev_passes(select);
    match ev.kind {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Modified => match (before, now) {
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Added),
            (true, false) => Some(EventType::Deleted),
            (false, false) => None,
        },
        EventType::Deleted => before.then_some(EventType::Deleted),
    }
}

fn stream_response(rx: mpsc::Receiver<Result<Bytes, Infallible>>, out: Output) -> Response {
    let ct = match out {
        Output::Table => crate::http::negotiate::TABLE_CONTENT_TYPE,
        _ => "application/json",
    };
    let mut resp = (StatusCode::OK, Body::from_stream(ReceiverStream::new(rx))).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    resp
}

/// WATCH.
pub async fn watch(ctx: Ctx, opts: ListOptions) -> Result<Response> {
    let store = ctx.store();
    let filter = store.filter(&opts)?;
    let out = match output(ctx.accept())? {
        Output::Yaml => Output::Json,
        o => o,
    };
    let send_initial = opts.send_initial_events == Some(true);
    let WatchOpened { from, start } = store.watch(&opts).await?;
    let mut enc = Encoder::new(ctx.target.resource.clone(), out, opts.include_object);
    let (tx, rx) = mpsc::channel(RESPONSE_CHANNEL);
    let mut watch = match start {
        WatchStart::Watching(w) => w,
        WatchStart::Expired { oldest } => {
            let requested = opts.resource_version.unwrap_or(0);
            let status = api::status::to_json(&api::status::gone_expired(&format!(
                "too old resource version: {requested} ({oldest})"
            )));
            let _ = tx.try_send(Ok(enc.error(&status)));
            drop(tx);
            return Ok(stream_response(rx, out));
        }
    };
    let prefix = store.collection_prefix();
    let state = ctx.state.clone();
    let lifetime = opts
        .timeout_seconds
        .filter(|t| *t > 0)
        .map(Duration::from_secs)
        .unwrap_or(state.config.default_watch_timeout);
    let bookmarks = opts.allow_bookmarks;
    let bookmark_every = state.config.bookmark_interval;
    tokio::spawn(async move {
        let _watcher = state.metrics.watcher();
        let deadline = tokio::time::sleep(lifetime);
        tokio::pin!(deadline);
        let mut last_rv = watch.revision.max(watch.skip_through);
        // How the selectors are told, decided once for the watch.
        let on_object = |o: &Value| filter.matches(o);
        let select = filter.select(&on_object);
        let snapshot = matches!(from, WatchFrom::Snapshot);
        let mut chunk = Vec::new();
        let mut initial = std::mem::take(&mut watch.initial);
        loop {
            for ev in initial {
                let item = if snapshot {
                    (ev.key.starts_with(&prefix) && select.matches(&ev.object))
                        .then_some(EventType::Added)
                } else {
                    translate(&ev, &prefix, select)
                };
                if !snapshot {
                    last_rv = last_rv.max(ev.revision);
                }
                if let Some(kind) = item {
                    enc.write_event(&mut chunk, kind, &ev);
                    if (chunk.len() >= MAX_CHUNK || enc.pending_full())
                        && !send_chunk(&mut enc, &tx, &mut chunk, &state.shutdown).await
                    {
                        return;
                    }
                }
            }
            // An uncached resource's snapshot comes a page at a time.
            let Some(pages) = watch.pages.as_mut() else {
                break;
            };
            initial = match pages.next().await {
                Some(Ok(page)) => page,
                None => break,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "the watch's initial events could not be read");
                    return;
                }
            };
        }
        if !send_chunk(&mut enc, &tx, &mut chunk, &state.shutdown).await {
            return;
        }
        if send_initial
            && tx
                .send(Ok(enc.bookmark(watch.revision, true)))
                .await
                .is_err()
        {
            return;
        }
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        // Made once: each registers its waker once, not on every wake-up of the loop (the
        // shutdown token is shared by every watch).
        let cancelled = state.shutdown.cancelled();
        tokio::pin!(cancelled);
        let closed = tx.closed();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                _ = &mut cancelled => break,
                _ = &mut closed => break,
                _ = &mut deadline => {
                    if bookmarks {
                        let rv = last_rv.max(watch.skip_through);
                        let _ = tx.send(Ok(enc.bookmark(rv, false))).await;
                    }
                    break;
                }
                _ = ticker.tick(), if bookmarks => {
                    // Every event ≤ `seen` is already in the live log: drain, then the bookmark
                    // is true. If this watcher fell behind the log, events after its end were
                    // lost to it: end the stream instead of sending a bookmark that would skip
                    // them.
                    let seen = watch.rx.complete_through(&state.cache);
                    let mut chunk = Vec::new();
                    loop {
                        match watch.rx.try_recv() {
                            Ok(ev) => {
                                let skip = watch.skip_through;
                                append_live(&mut enc, &mut chunk, &ev, &prefix, select, skip, &mut last_rv);
                                if (chunk.len() >= MAX_CHUNK || enc.pending_full())
                                    && !send_chunk(&mut enc, &tx, &mut chunk, &state.shutdown).await
                                {
                                    return;
                                }
                            }
                            Err(mpsc::error::TryRecvError::Empty) => break,
                            Err(mpsc::error::TryRecvError::Disconnected) => return,
                        }
                    }
                    if !send_chunk(&mut enc, &tx, &mut chunk, &state.shutdown).await {
                        return;
                    }
                    let rv = seen.max(last_rv).max(watch.skip_through);
                    if tx.send(Ok(enc.bookmark(rv, false))).await.is_err() {
                        return;
                    }
                }
                ev = watch.rx.recv() => {
                    let Some(ev) = ev else { break };
                    // Every event already queued goes out in the same chunk: one write (and one
                    // wake-up of the client) per burst instead of per event, and no event waits.
                    let mut chunk = Vec::new();
                    let mut next = Some(ev);
                    while let Some(ev) = next.take() {
                        let skip = watch.skip_through;
                        append_live(&mut enc, &mut chunk, &ev, &prefix, select, skip, &mut last_rv);
                        if chunk.len() < MAX_CHUNK && !enc.pending_full() {
                            next = watch.rx.try_recv().ok();
                        }
                    }
                    if !send_chunk(&mut enc, &tx, &mut chunk, &state.shutdown).await {
                        return;
                    }
                }
            }
        }
    });
    Ok(stream_response(rx, out))
}
