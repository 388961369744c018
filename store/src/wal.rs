//! The write-ahead log in front of sled, as etcd keeps one in front of bbolt.
//!
//! A group of writes is durable once its frame is on disk: the flusher appends one frame per group
//! to the current segment file (one `write`, one `fdatasync`) and only then acknowledges. sled is
//! brought up to date behind the log by the sled back end's checkpointer thread (one atomic batch
//! for everything logged since the previous checkpoint, sled's flush, `fdatasync` of its log,
//! `fsync` of new blobs); afterwards the segments holding nothing newer than that checkpoint are
//! deleted ([`Wal::remove_through`]). At start-up every logged event after sled's revision is
//! applied to sled again, in order ([`Replay`]).
//!
//! Format: a directory `wal/` of segments `<sequence, 16 hex digits>.wal`, each a sequence of frames
//! `[payload length: u32 LE][CRC-32 of payload: u32 LE][payload]`. A payload is one or more batches,
//! each `[commit time ms: u64 LE][event count: u32 LE]` and per event
//! `[revision: u64 LE][length: u32 LE][codec::encode_event_without_prev bytes]`.
//!
//! Guarantees:
//! - A frame is written by one `write` after the previous frame's `fdatasync` returned. So only the
//!   newest frame of the newest segment can be incomplete after a crash (a torn tail: its writes
//!   were never acknowledged); it is ignored. A bad frame *followed by a good one*, or a bad frame in
//!   an older segment, is corruption and fails the open with [`Error::Corrupt`], never a reset.
//! - Revisions in the log are dense and ascending across frames and segments, or the log is corrupt.
//! - After a replay the caller checkpoints and deletes every segment ([`Wal::clear`]), so nothing
//!   is ever appended after a torn tail. Deletions are made durable (the directory is synced), so a
//!   power loss cannot bring back a segment older than one kept.

use std::path::{Path, PathBuf};

use crate::{codec, Error, Event, Result, Revision};

/// Size at which the flusher starts a new segment: etcd's `SegmentSizeBytes` (`server/storage/wal/wal.go`).
pub(crate) const SEGMENT_BYTES: u64 = 64 * 1000 * 1000;

const FRAME_HEADER: usize = 8;

/// Appends one batch of `events` (ascending), committed at `at_ms`, to a frame's payload.
pub(crate) fn encode_batch<'a>(
    out: &mut Vec<u8>,
    events: impl ExactSizeIterator<Item = &'a Event>,
    at_ms: u64,
) {
    out.extend_from_slice(&at_ms.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(events.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for event in events {
        // Without the previous value: replay reads it from the state it replays over, and a pod
        // write's frame is half the size.
        let encoded = codec::encode_event_without_prev(event, at_ms);
        out.extend_from_slice(&event.revision.to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(encoded.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        out.extend_from_slice(&encoded);
    }
}

/// The open end of the log: the segment being appended to, and the finished ones not yet deleted.
pub(crate) struct Wal {
    dir: PathBuf,
    segment_bytes: u64,
    fsync: bool,
    current: Option<Segment>,
    /// Finished segments and the last revision each holds, oldest first.
    finished: Vec<(PathBuf, Revision)>,
    next_sequence: u64,
}

struct Segment {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
    last: Revision,
}

impl Wal {
    /// The log in `dir`, which must hold no segments (after [`Wal::clear`]).
    pub(crate) fn new(dir: &Path, segment_bytes: u64, fsync: bool) -> Self {
        Self {
            dir: dir.to_owned(),
            segment_bytes,
            fsync,
            current: None,
            finished: Vec::new(),
            next_sequence: 0,
        }
    }

    /// Appends `payload` (batches from [`encode_batch`], ending at revision `last`) as one frame and
    /// makes it durable. Starts a segment first if there is none or the current one is full.
    pub(crate) fn append(&mut self, payload: &[u8], last: Revision) -> Result<()> {
        if payload.is_empty() {
            return Ok(());
        }
        if self
            .current
            .as_ref()
            .is_none_or(|segment| segment.len >= self.segment_bytes)
        {
            self.start_segment()?;
        }
        let Some(segment) = self.current.as_mut() else {
            return Err(Error::Failed);
        };
        let mut frame = Vec::with_capacity(FRAME_HEADER + payload.len());
        frame.extend_from_slice(
            &u32::try_from(payload.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        frame.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        frame.extend_from_slice(payload);
        let path = &segment.path;
        std::io::Write::write_all(&mut segment.file, &frame).map_err(io_err(path))?;
        if self.fsync {
            segment.file.sync_data().map_err(io_err(path))?;
        }
        segment.len += frame.len() as u64;
        segment.last = last;
        Ok(())
    }

    fn start_segment(&mut self) -> Result<()> {
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&self.dir)
            .map_err(io_err(&self.dir))?;
        let path = self.dir.join(format!("{:016x}.wal", self.next_sequence));
        // Owner-only, as the rest of the store: the log holds every Secret written.
        let file = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().create_new(true).append(true),
            0o600,
        )
        .open(&path)
        .map_err(io_err(&path))?;
        if self.fsync {
            sync_dir(&self.dir)?;
        }
        self.next_sequence += 1;
        if let Some(old) = self.current.replace(Segment {
            path,
            file,
            len: 0,
            last: 0,
        }) {
            self.finished.push((old.path, old.last));
        }
        Ok(())
    }

    /// Deletes the finished segments whose events are all at or below `upto` (durable in sled).
    pub(crate) fn remove_through(&mut self, upto: Revision) -> Result<()> {
        let done = self
            .finished
            .iter()
            .take_while(|(_, last)| *last <= upto)
            .count();
        if done == 0 {
            return Ok(());
        }
        for (path, _) in self.finished.drain(..done) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_err(&path)(error)),
            }
        }
        if self.fsync {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Deletes every segment in the directory (after a replay and a checkpoint covered them all).
    pub(crate) fn clear(&mut self) -> Result<()> {
        self.current = None;
        self.finished.clear();
        let found = segments(&self.dir)?;
        for (sequence, path) in &found {
            std::fs::remove_file(path).map_err(io_err(path))?;
            // Numbers are never reused, so a segment is never confused with an older namesake.
            self.next_sequence = self.next_sequence.max(sequence + 1);
        }
        if self.fsync && !found.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Number of segment files the log holds (finished and current).
    #[cfg(test)]
    pub(crate) fn segment_count(&self) -> usize {
        self.finished.len() + usize::from(self.current.is_some())
    }
}

/// The segments in `dir`, by sequence.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_err(dir)(error)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(sequence) = name
            .strip_suffix(".wal")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        {
            found.push((sequence, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Reading the log back at start-up.
pub(crate) struct Replay;

impl Replay {
    /// Calls `apply` with every logged batch's events after revision `after`, in order, with the
    /// batch's commit time; returns the last revision replayed (`after` if none). Stops at a torn
    /// tail; corruption, a gap in the revisions or a log starting beyond `after + 1` is
    /// [`Error::Corrupt`].
    pub(crate) fn run(
        dir: &Path,
        after: Revision,
        mut apply: impl FnMut(Vec<Event>, u64) -> Result<()>,
    ) -> Result<Revision> {
        let segments = segments(dir)?;
        let count = segments.len();
        let mut previous: Option<Revision> = None;
        let mut replayed = after;
        for (index, (_, path)) in segments.into_iter().enumerate() {
            let bytes = std::fs::read(&path).map_err(io_err(&path))?;
            let corrupt = |detail: String| Error::Corrupt {
                path: path.clone(),
                detail,
            };
            let mut offset = 0;
            while offset < bytes.len() {
                let payload = match frame_at(&bytes, offset) {
                    Ok(payload) => payload,
                    Err(why) => {
                        let last_segment = index + 1 == count;
                        let next = offset + FRAME_HEADER + why.claimed;
                        if !last_segment {
                            return Err(corrupt(format!("{} at offset {offset}", why.reason)));
                        }
                        if why.claimed > 0 && next < bytes.len() && frame_at(&bytes, next).is_ok() {
                            return Err(corrupt(format!(
                                "{} at offset {offset}, followed by a valid frame",
                                why.reason
                            )));
                        }
                        tracing::warn!(path = %path.display(), offset, reason = why.reason,
                            "ignoring the torn tail of the write-ahead log (never acknowledged)");
                        break;
                    }
                };
                offset += FRAME_HEADER + payload.len();
                for (at_ms, events) in decode_payload(payload)
                    .ok_or_else(|| corrupt(format!("frame at offset {offset} does not decode")))?
                {
                    for event in &events {
                        if previous.is_some_and(|p| event.revision != p + 1) {
                            return Err(corrupt(format!(
                                "revision {} follows {} in the write-ahead log",
                                event.revision,
                                previous.unwrap_or_default()
                            )));
                        }
                        previous = Some(event.revision);
                    }
                    let events: Vec<Event> =
                        events.into_iter().filter(|e| e.revision > after).collect();
                    let Some(last) = events.last().map(|e| e.revision) else {
                        continue;
                    };
                    if events.first().is_some_and(|e| e.revision != replayed + 1) {
                        return Err(corrupt(format!(
                            "the write-ahead log continues at revision {} but the store is at {replayed}",
                            events.first().map_or(0, |e| e.revision)
                        )));
                    }
                    apply(events, at_ms)?;
                    replayed = last;
                }
            }
        }
        Ok(replayed)
    }
}

struct BadFrame {
    reason: &'static str,
    /// The payload length the header claims (0 when there is no whole header).
    claimed: usize,
}

fn frame_at(bytes: &[u8], offset: usize) -> std::result::Result<&[u8], BadFrame> {
    let header = bytes.get(offset..offset + FRAME_HEADER).ok_or(BadFrame {
        reason: "incomplete frame header",
        claimed: 0,
    })?;
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let claimed = usize::try_from(word(0)).unwrap_or(usize::MAX);
    let crc = word(4);
    if claimed == 0 {
        return Err(BadFrame {
            reason: "empty frame",
            claimed,
        });
    }
    let start = offset + FRAME_HEADER;
    let payload = bytes
        .get(start..start.saturating_add(claimed))
        .ok_or(BadFrame {
            reason: "incomplete frame",
            claimed,
        })?;
    if crc32fast::hash(payload) != crc {
        return Err(BadFrame {
            reason: "frame checksum mismatch",
            claimed,
        });
    }
    Ok(payload)
}

type Batch = (u64, Vec<Event>);

fn decode_payload(mut payload: &[u8]) -> Option<Vec<Batch>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if bytes.len() < n {
            return None;
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Some(head)
    }
    fn u64_le(bytes: &mut &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(take(bytes, 8)?.try_into().ok()?))
    }
    fn u32_le(bytes: &mut &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(take(bytes, 4)?.try_into().ok()?))
    }
    let mut batches = Vec::new();
    while !payload.is_empty() {
        let at_ms = u64_le(&mut payload)?;
        let count = u32_le(&mut payload)?;
        let mut events = Vec::new();
        for _ in 0..count {
            let revision = u64_le(&mut payload)?;
            let len = usize::try_from(u32_le(&mut payload)?).ok()?;
            events.push(codec::decode_event(revision, take(&mut payload, len)?)?);
        }
        batches.push((at_ms, events));
    }
    Some(batches)
}

/// An I/O failure on `path`; "no space left on device" becomes [`Error::NoSpace`].
fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| {
        if crate::space::is_enospc(&source) {
            Error::NoSpace {
                detail: format!("writing the write-ahead log failed: {source}"),
            }
        } else {
            Error::Io {
                path: path.to_owned(),
                source,
            }
        }
    }
}

fn sync_dir(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};

    fn batch(revisions: std::ops::RangeInclusive<Revision>) -> Vec<u8> {
        let events: Vec<Event> = revisions
            .map(|revision| Event {
                kind: EventKind::Put,
                key: format!("/k{revision}"),
                revision,
                value: Some(KeyValue {
                    key: format!("/k{revision}"),
                    value: bytes::Bytes::from_static(b"v"),
                    create_revision: revision,
                    mod_revision: revision,
                }),
                prev: None,
            })
            .collect();
        let mut out = Vec::new();
        encode_batch(&mut out, events.iter(), 5);
        out
    }

    fn replayed(dir: &Path, after: Revision) -> Result<Vec<Revision>> {
        let mut seen = Vec::new();
        Replay::run(dir, after, |events, at_ms| {
            assert_eq!(at_ms, 5);
            seen.extend(events.iter().map(|e| e.revision));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn frames_replay_in_order_across_segments_after_the_given_revision() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::new(dir.path(), 1, false);
        wal.append(&batch(1..=2), 2).unwrap();
        wal.append(&batch(3..=5), 5).unwrap();
        assert_eq!(wal.segment_count(), 2);
        assert_eq!(replayed(dir.path(), 0).unwrap(), [1, 2, 3, 4, 5]);
        // A batch partly at or below the revision replays only what is after it.
        assert_eq!(replayed(dir.path(), 3).unwrap(), [4, 5]);
        assert_eq!(replayed(dir.path(), 5).unwrap(), Vec::<Revision>::new());
        wal.remove_through(2).unwrap();
        assert_eq!(replayed(dir.path(), 2).unwrap(), [3, 4, 5]);
        wal.clear().unwrap();
        assert_eq!(replayed(dir.path(), 0).unwrap(), Vec::<Revision>::new());
    }

    #[test]
    fn a_bad_frame_in_an_older_segment_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::new(dir.path(), 1, false);
        wal.append(&batch(1..=1), 1).unwrap();
        wal.append(&batch(2..=2), 2).unwrap();
        let first = dir.path().join(format!("{:016x}.wal", 0));
        let bytes = std::fs::read(&first).unwrap();
        // Cut the first segment's only frame short: a torn tail anywhere but the newest segment.
        std::fs::write(&first, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(
            replayed(dir.path(), 0),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn a_gap_in_the_revisions_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::new(dir.path(), SEGMENT_BYTES, false);
        wal.append(&batch(1..=2), 2).unwrap();
        wal.append(&batch(4..=4), 4).unwrap();
        assert!(matches!(
            replayed(dir.path(), 0),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn a_torn_header_and_an_empty_frame_end_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::new(dir.path(), SEGMENT_BYTES, false);
        wal.append(&batch(1..=2), 2).unwrap();
        let segment = dir.path().join(format!("{:016x}.wal", 0));
        let mut bytes = std::fs::read(&segment).unwrap();
        let whole = bytes.len();
        bytes.extend_from_slice(&[0; 3]);
        std::fs::write(&segment, &bytes).unwrap();
        assert_eq!(replayed(dir.path(), 0).unwrap(), [1, 2]);
        bytes.truncate(whole);
        bytes.extend_from_slice(&[0; 64]);
        std::fs::write(&segment, &bytes).unwrap();
        assert_eq!(replayed(dir.path(), 0).unwrap(), [1, 2]);
    }
}
