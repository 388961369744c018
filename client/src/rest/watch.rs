//! Watch events and the newline-delimited JSON decoder of a watch response.
//!
//! Wire format (spec informer.md §1.9): one `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
//! "object": {...}}` per line. `BOOKMARK` objects carry only `metadata.resourceVersion`, so they are
//! decoded loosely (never as `K`); `ERROR` objects are `metav1.Status`.
//!
//! Bounds: a line may not exceed [`MAX_LINE`] bytes; past it the stream yields
//! [`Error::WatchLineTooLong`] and ends. A transport or decode error is yielded once, then the stream
//! ends (a watch never continues past a broken frame). The client-side request bound expiring
//! ends the stream like a normal server close.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::{Error, Result};

/// Largest accepted watch line (one serialized object), 16 MiB — above etcd's 1.5 MiB object limit.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// One decoded watch event.
// Objects are large and bookmarks small; boxing every object would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    /// The resourceVersion the server has progressed to.
    Bookmark(String),
    /// The server ended the watch with this status (e.g. 410 Expired).
    Error(Status),
}

/// A stream of watch events; ends when the server closes the response.
pub struct WatchStream<K> {
    inner: BoxStream<'static, Result<WatchEvent<K>>>,
}

impl<K> WatchStream<K> {
    /// Wraps any stream of events (used by in-process [`ListerWatcher`](crate::ListerWatcher)s).
    pub fn new(s: impl Stream<Item = Result<WatchEvent<K>>> + Send + 'static) -> Self {
        WatchStream { inner: s.boxed() }
    }
}

impl<K> Stream for WatchStream<K> {
    type Item = Result<WatchEvent<K>>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

#[derive(Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "type", borrow)]
    type_: std::borrow::Cow<'a, str>,
}

#[derive(Deserialize)]
struct Typed<K> {
    object: K,
}

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
struct BookmarkMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// The framing Go's encoder (and our apiserver) writes: `type` first, then `object`, no spaces.
const FAST_PREFIXES: [(&[u8], EventKind); 3] = [
    (br#"{"type":"ADDED","object":"#, EventKind::Added),
    (br#"{"type":"MODIFIED","object":"#, EventKind::Modified),
    (br#"{"type":"DELETED","object":"#, EventKind::Deleted),
];

#[derive(Clone, Copy)]
enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One pass over the common case: the object is the slice between the known framing and the
/// closing brace, decoded straight into `K`. `None` when the line is framed any other way (the
/// general path then decides); a line this accepts decodes exactly as the general path would.
fn decode_framed<K: DeserializeOwned>(line: &[u8], strip: bool) -> Option<WatchEvent<K>> {
    let line = line.trim_ascii_end().strip_suffix(b"}")?;
    let (prefix, kind) = FAST_PREFIXES
        .iter()
        .find(|(p, _)| line.starts_with(p))
        .map(|(p, k)| (p.len(), *k))?;
    let object = line.get(prefix..)?;
    let obj: K = if strip {
        serde_json::from_slice(&super::strip::object_without_managed_fields(object)).ok()?
    } else {
        serde_json::from_slice(object).ok()?
    };
    Some(match kind {
        EventKind::Added => WatchEvent::Added(obj),
        EventKind::Modified => WatchEvent::Modified(obj),
        EventKind::Deleted => WatchEvent::Deleted(obj),
    })
}

/// What a watch event whose object does not decode is reported as.
const OBJECT_UNDECODABLE: &str = "watch event object";

/// Decodes one watch line.
pub fn decode_event<K: DeserializeOwned + crate::Object>(line: &[u8]) -> Result<WatchEvent<K>> {
    decode_line(line, false)
}

/// Decodes one watch line; `strip`: without the object's `metadata.managedFields`.
fn decode_line<K: DeserializeOwned + crate::Object>(
    line: &[u8],
    strip: bool,
) -> Result<WatchEvent<K>> {
    // Every informer decodes every event of its kind (about a tenth of `minik8s bench scale`'s
    // CPU under perf), so the common framing is parsed once, not once for the type and again for
    // the object.
    if let Some(ev) = decode_framed(line, strip) {
        return Ok(ev);
    }
    let dec = |what: &str, e| Error::Decode {
        what: what.to_string(),
        source: e,
    };
    let t: TypeOnly = serde_json::from_slice(line).map_err(|e| dec("watch event", e))?;
    match t.type_.as_ref() {
        "ADDED" | "MODIFIED" | "DELETED" => {
            let ty = t.type_.into_owned();
            let mut obj: Typed<K> =
                serde_json::from_slice(line).map_err(|e| dec(OBJECT_UNDECODABLE, e))?;
            if strip {
                // A line framed unlike our apiserver's: the entries were decoded; drop them.
                obj.object.meta_mut().managed_fields = None;
            }
            Ok(match ty.as_str() {
                "ADDED" => WatchEvent::Added(obj.object),
                "MODIFIED" => WatchEvent::Modified(obj.object),
                _ => WatchEvent::Deleted(obj.object),
            })
        }
        "BOOKMARK" => {
            let b: Typed<BookmarkObject> =
                serde_json::from_slice(line).map_err(|e| dec("bookmark", e))?;
            Ok(WatchEvent::Bookmark(b.object.metadata.resource_version))
        }
        "ERROR" => {
            let s: Typed<Status> =
                serde_json::from_slice(line).map_err(|e| dec("watch error status", e))?;
            Ok(WatchEvent::Error(s.object))
        }
        other => Err(dec(
            "watch event type",
            serde::de::Error::custom(format!("unknown watch event type {other:?}")),
        )),
    }
}

/// Turns a chunked HTTP body into decoded events.
pub(crate) fn decode_body<K, S>(body: S, strip_managed_fields: bool) -> WatchStream<K>
where
    K: DeserializeOwned + crate::Object + Send + 'static,
    S: Stream<Item = std::result::Result<bytes::Bytes, reqwest::Error>> + Send + 'static,
{
    struct St<S> {
        body: Pin<Box<S>>,
        buf: BytesMut,
        done: bool,
    }
    let st = St {
        body: Box::pin(body),
        buf: BytesMut::new(),
        done: false,
    };
    let decode = move |line: &[u8]| decode_line::<K>(line, strip_managed_fields);
    let s = futures::stream::unfold(st, move |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(pos) = st.buf.iter().position(|b| *b == b'\n') {
                let line = st.buf.split_to(pos + 1);
                let line = &line[..pos];
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let ev = decode(line);
                if let Err(Error::Decode { what, source }) = &ev {
                    if what == OBJECT_UNDECODABLE {
                        // Reported, then the watch ends: skipping the event would leave the
                        // object's last good version (or a deleted one) in the watcher's cache;
                        // a reflector relists, and the list skips the object (`undecodable`).
                        let event = serde_json::from_slice::<serde_json::Value>(line).ok();
                        let kind = std::any::type_name::<K>().rsplit("::").next().unwrap_or("");
                        let object = event.as_ref().and_then(|e| e.get("object"));
                        crate::rest::undecodable::report(kind, object, "watch", source);
                    }
                }
                if ev.is_err() {
                    st.done = true;
                }
                return Some((ev, st));
            }
            if st.buf.len() > MAX_LINE {
                st.done = true;
                return Some((Err(Error::WatchLineTooLong { limit: MAX_LINE }), st));
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.buf.extend_from_slice(chunk.chunk()),
                // The client-side bound on a watch (timeoutSeconds + grace) elapsed: the server
                // should have closed by now; treat it as a normal close so the caller re-watches
                // from its last RV instead of relisting.
                Some(Err(e)) if e.is_timeout() => return None,
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(Error::Http(e)), st));
                }
                None => {
                    st.done = true;
                    // A final line without a trailing newline is still an event.
                    if st.buf.iter().any(|b| !b.is_ascii_whitespace()) {
                        let ev = decode(&st.buf);
                        return Some((ev, st));
                    }
                    return None;
                }
            }
        }
    });
    WatchStream::new(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn decodes_every_event_type() -> Result<()> {
        let added = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}"#;
        match decode_event::<Pod>(added)? {
            WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some("a")),
            e => panic!("unexpected {e:?}"),
        }
        let bm =
            br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"9"}}}"#;
        assert_eq!(decode_event::<Pod>(bm)?, WatchEvent::Bookmark("9".into()));
        let err = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#;
        match decode_event::<Pod>(err)? {
            WatchEvent::Error(s) => assert_eq!(s.code, Some(410)),
            e => panic!("unexpected {e:?}"),
        }
        assert!(decode_event::<Pod>(br#"{"type":"WHAT","object":{}}"#).is_err());
        // The one-pass framing and any other spelling decode alike; a field after the object
        // falls back to the general path.
        let spaced = br#"{ "object": {"metadata":{"name":"a"}}, "type": "MODIFIED" }"#;
        let framed = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#;
        let trailing = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}},"x":1}"#;
        let want = decode_event::<Pod>(spaced)?;
        assert!(
            matches!(&want, WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some("a"))
        );
        assert_eq!(decode_event::<Pod>(framed)?, want);
        assert_eq!(decode_event::<Pod>(trailing)?, want);
        assert!(decode_event::<Pod>(br#"{"type":"ADDED","object":{"metadata":"#).is_err());
        assert!(decode_event::<Pod>(b"not json").is_err());
        Ok(())
    }

    #[test]
    fn stripping_drops_managed_fields_in_every_framing() -> Result<()> {
        let object = r#"{"metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]}}"#;
        let framed = format!(r#"{{"type":"MODIFIED","object":{object}}}"#);
        let spaced = format!(r#"{{ "object": {object}, "type": "MODIFIED" }}"#);
        for line in [&framed, &spaced] {
            let kept: WatchEvent<Pod> = decode_line(line.as_bytes(), false)?;
            assert!(
                matches!(&kept, WatchEvent::Modified(p) if p.metadata.managed_fields.is_some())
            );
            let cut: WatchEvent<Pod> = decode_line(line.as_bytes(), true)?;
            assert!(
                matches!(&cut, WatchEvent::Modified(p) if p.metadata.managed_fields.is_none() && p.metadata.name.as_deref() == Some("a")),
                "{line}"
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn an_undecodable_object_is_reported_and_ends_the_watch() {
        let lines = concat!(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#,
            "\n",
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"poison"},"spec":{"tolerations":5}}}"#,
            "\n",
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}"#,
            "\n",
        );
        let before = crate::rest::undecodable::undecodable_objects();
        let body = futures::stream::iter([Ok::<_, reqwest::Error>(bytes::Bytes::from_static(
            lines.as_bytes(),
        ))]);
        let events: Vec<Result<WatchEvent<Pod>>> = decode_body(body, false).collect().await;
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            matches!(&events[0], Ok(WatchEvent::Added(p)) if p.metadata.name.as_deref() == Some("a"))
        );
        assert!(
            matches!(&events[1], Err(Error::Decode { what, .. }) if *what == OBJECT_UNDECODABLE),
            "{:?}",
            events[1]
        );
        assert!(crate::rest::undecodable::undecodable_objects() > before);
    }
}
