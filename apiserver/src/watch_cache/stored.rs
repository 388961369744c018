//! How an object's text is kept in the store: as JSON, or as LZ4-compressed JSON behind a
//! prefix, as upstream keeps values behind a transformer's prefix (`k8s:enc:<provider>:v1:`,
//! `k8s.io/apiserver/pkg/storage/value`) and reads both prefixed and unprefixed values.
//!
//! The store's index and the watch cache share each stored text (one `Bytes`), and a text is
//! held for as long as its object exists: a running pod's 4.2 KB of JSON takes jemalloc's 5 KiB
//! size class, and 2.1 KB compressed takes the 2.5 KiB one. Decompressing a pod's text takes
//! about a microsecond, a twentieth of parsing it, so a LIST or a watch event pays little.
//!
//! Guarantees:
//! - [`plain`] reads every value this module writes, and every value written before it existed
//!   (JSON never starts with a NUL byte, which the prefix does).
//! - A compressed text never stands for JSON larger than [`store::MAX_VALUE_SIZE`]: a text over
//!   it is stored as JSON, and the store refuses it as it refuses it on any back end. Reading a
//!   value that claims more is refused before anything is allocated.

use std::borrow::Cow;

/// Marks a compressed value: NUL (no JSON text starts with it), the codec's name and a version.
const LZ4_PREFIX: &[u8] = b"\0lz4:";

/// How this apiserver writes object texts to its store. Reads accept either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StoredText {
    /// JSON as served (in memory, where compression would only cost time, and on etcd, where
    /// other tools read the values).
    #[default]
    Json,
    /// [`LZ4_PREFIX`], the JSON's length (4 bytes, little-endian), then an LZ4 block of it.
    Lz4,
}

/// A stored value that is neither JSON nor a text [`StoredText::Lz4`] wrote.
#[derive(Debug, thiserror::Error)]
pub enum CorruptValue {
    #[error("a compressed value claims {0} bytes, more than a value may hold")]
    TooLarge(usize),
    #[error("a compressed value does not decompress: {0}")]
    Lz4(#[from] lz4_flex::block::DecompressError),
    #[error("a compressed value is cut short")]
    Truncated,
}

impl StoredText {
    /// `json` as this codec stores it.
    pub(super) fn store(self, json: Vec<u8>) -> Vec<u8> {
        match self {
            StoredText::Json => json,
            StoredText::Lz4 => compress(&json).unwrap_or(json),
        }
    }
}

/// `json` compressed behind the prefix, in one allocation; `None` if it is over the value limit
/// (then it is stored as JSON, and the store refuses it as on any back end).
pub(super) fn compress(json: &[u8]) -> Option<Vec<u8>> {
    if json.len() > store::MAX_VALUE_SIZE {
        return None;
    }
    let len = u32::try_from(json.len()).ok()?;
    let header = LZ4_PREFIX.len() + 4;
    let mut out = vec![0; header + lz4_flex::block::get_maximum_output_size(json.len())];
    out[..LZ4_PREFIX.len()].copy_from_slice(LZ4_PREFIX);
    out[LZ4_PREFIX.len()..header].copy_from_slice(&len.to_le_bytes());
    // The output has the block's maximum size: this cannot run out of room.
    let n = lz4_flex::block::compress_into(json, &mut out[header..]).ok()?;
    out.truncate(header + n);
    Some(out)
}

/// Whether `stored` is a compressed text.
pub fn is_compressed(stored: &[u8]) -> bool {
    stored.starts_with(LZ4_PREFIX)
}

/// The JSON text of the stored value `stored`, borrowed when it is stored as JSON.
pub fn plain(stored: &[u8]) -> Result<Cow<'_, [u8]>, CorruptValue> {
    let Some(rest) = stored.strip_prefix(LZ4_PREFIX) else {
        return Ok(Cow::Borrowed(stored));
    };
    let (len, block) = rest
        .split_first_chunk::<4>()
        .ok_or(CorruptValue::Truncated)?;
    let len = usize::try_from(u32::from_le_bytes(*len)).unwrap_or(usize::MAX);
    if len > store::MAX_VALUE_SIZE {
        return Err(CorruptValue::TooLarge(len));
    }
    let json = lz4_flex::block::decompress(block, len)?;
    if json.len() != len {
        return Err(CorruptValue::Truncated);
    }
    Ok(Cow::Owned(json))
}

/// Parses the stored value `stored` (either form); `None` if it is not a JSON document.
pub fn parse<T: serde::de::DeserializeOwned>(stored: &[u8]) -> Option<T> {
    let json = plain(stored)
        .inspect_err(|e| tracing::error!(error = %e, "a stored value does not decode"))
        .ok()?;
    serde_json::from_slice(&json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn json_is_stored_as_it_is() {
        let json = br#"{"metadata":{"name":"a"}}"#.to_vec();
        assert_eq!(StoredText::Json.store(json.clone()), json);
        assert!(matches!(plain(&json), Ok(Cow::Borrowed(b)) if b == json.as_slice()));
    }

    #[test]
    fn a_pod_compresses_and_decompresses_to_its_json() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-62p2s", "generateName": "web-", "namespace": "default",
                "labels": {"app": "web"}, "uid": "3360c95c-e77a-4b56-b4ce-fa1c6d5436d7"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                "tolerations": [
                    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                     "operator": "Exists", "tolerationSeconds": 300},
                    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
                     "operator": "Exists", "tolerationSeconds": 300}]},
            "status": {"conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"}]}
        });
        let json = serde_json::to_vec(&pod).unwrap();
        let stored = StoredText::Lz4.store(json.clone());
        assert!(is_compressed(&stored));
        // A running pod's whole text (4.2 KB) compresses to about half; this short one less.
        assert!(
            stored.len() * 4 < json.len() * 3,
            "{} of {}",
            stored.len(),
            json.len()
        );
        assert_eq!(plain(&stored).unwrap().as_ref(), json.as_slice());
        assert_eq!(parse::<serde_json::Value>(&stored), Some(pod));
    }

    #[test]
    fn a_text_over_the_value_limit_stays_json() {
        // Compressible to almost nothing, but as JSON over the limit: the store refuses it as it
        // would on a back end that does not compress.
        let json = format!("\"{}\"", "a".repeat(store::MAX_VALUE_SIZE)).into_bytes();
        assert_eq!(StoredText::Lz4.store(json.clone()), json);
    }

    #[test]
    fn corrupt_values_are_refused_without_allocating_their_claim() {
        let mut claims_4gb = LZ4_PREFIX.to_vec();
        claims_4gb.extend_from_slice(&u32::MAX.to_le_bytes());
        claims_4gb.extend_from_slice(b"\x10a");
        assert!(matches!(plain(&claims_4gb), Err(CorruptValue::TooLarge(_))));
        assert!(matches!(plain(LZ4_PREFIX), Err(CorruptValue::Truncated)));
        let mut stored =
            StoredText::Lz4.store(br#"{"a":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}"#.to_vec());
        stored.truncate(stored.len() - 3);
        assert!(plain(&stored).is_err());
        assert_eq!(parse::<serde_json::Value>(&stored), None);
    }

    proptest! {
        #[test]
        fn every_text_round_trips(text in prop::collection::vec(any::<u8>(), 0..3000)) {
            let stored = StoredText::Lz4.store(text.clone());
            let back = plain(&stored).unwrap();
            prop_assert_eq!(back.as_ref(), text.as_slice());
        }
    }
}
