//! The sled back end's write-ahead log at work: replay over a sled behind or ahead of the log, torn
//! tails, corruption, checkpoints, crashes between the log and a checkpoint, reads across sled and
//! the tail, and the reopen after a failed write.

use super::*;
use crate::KeyValue;

const NEVER: Duration = Duration::from_secs(3600);

fn put(revision: Revision, value: &str) -> Arc<Event> {
    Arc::new(Event {
        kind: EventKind::Put,
        key: format!("/k{revision}"),
        revision,
        value: Some(KeyValue {
            key: format!("/k{revision}"),
            value: bytes::Bytes::from(value.to_owned()),
            create_revision: revision,
            mod_revision: revision,
        }),
        prev: None,
    })
}

fn open(dir: &Path, segment_bytes: u64) -> Result<SledBackend> {
    SledBackend::open_with(dir, 1 << 20, true, 0, segment_bytes, NEVER)
}

/// A store whose sled holds revisions `1..=upto` (checkpointed) and no log.
fn sled_at(dir: &Path, upto: Revision) {
    let backend = open(dir, wal::SEGMENT_BYTES).unwrap();
    let events: Vec<_> = (1..=upto).map(|r| put(r, "sled")).collect();
    backend.apply(&events, 1).unwrap();
    backend.flush().unwrap();
}

/// Writes a log of `revisions`, one frame per revision, as the flusher would.
fn forge_log(dir: &Path, revisions: std::ops::RangeInclusive<Revision>) -> PathBuf {
    let mut log = Wal::new(&dir.join("wal"), wal::SEGMENT_BYTES, false);
    for revision in revisions {
        let event = put(revision, "wal");
        let mut payload = Vec::new();
        wal::encode_batch(&mut payload, std::iter::once(&*event), 7);
        log.append(&payload, revision).unwrap();
    }
    dir.join("wal").join(format!("{:016x}.wal", 0))
}

/// Ends `backend` as a crash would leave its files: no checkpoint after the last flush (sled
/// holds only what earlier checkpoints gave it), the log as written.
fn crash(backend: SledBackend) {
    backend.stop_checkpointer();
    backend.inner.progress.lock().failure = Some(Error::Failed);
    drop(backend);
}

fn value_of(backend: &SledBackend, revision: Revision) -> Option<String> {
    backend
        .load()
        .unwrap()
        .items
        .into_iter()
        .find(|kv| kv.key == format!("/k{revision}"))
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("wal"))
        .map(|entries| entries.count())
        .unwrap_or(0)
}

#[test]
fn replays_the_log_over_a_sled_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    sled_at(dir.path(), 5);
    forge_log(dir.path(), 6..=10);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, 10);
    assert_eq!(value_of(&backend, 5).as_deref(), Some("sled"));
    assert_eq!(value_of(&backend, 6).as_deref(), Some("wal"));
    let log = backend.read_log(0, 10, 100).unwrap();
    assert_eq!(log.len(), 10);
    assert_eq!(segment_files(dir.path()), 0, "the replayed log is deleted");
}

#[test]
fn skips_logged_events_sled_already_holds() {
    let dir = tempfile::tempdir().unwrap();
    sled_at(dir.path(), 10);
    forge_log(dir.path(), 3..=12);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, 12);
    assert_eq!(value_of(&backend, 10).as_deref(), Some("sled"));
    assert_eq!(value_of(&backend, 11).as_deref(), Some("wal"));
}

#[test]
fn a_log_starting_after_sled_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    sled_at(dir.path(), 10);
    forge_log(dir.path(), 15..=16);
    assert!(matches!(
        open(dir.path(), wal::SEGMENT_BYTES),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn a_torn_tail_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    sled_at(dir.path(), 5);
    let segment = forge_log(dir.path(), 6..=8);
    // A frame whose header claims more than was written: its write never completed.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut file, &[100, 0, 0, 0, 1, 2, 3, 4, 5, 6]).unwrap();
    drop(file);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, 8);
}

#[test]
fn a_bad_frame_before_good_ones_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    sled_at(dir.path(), 5);
    let segment = forge_log(dir.path(), 6..=8);
    let mut bytes = std::fs::read(&segment).unwrap();
    // Flip a byte in the first frame's payload; the two frames after it stay valid.
    bytes[20] ^= 0xff;
    std::fs::write(&segment, bytes).unwrap();
    match open(dir.path(), wal::SEGMENT_BYTES) {
        Err(Error::Corrupt { detail, .. }) => assert!(detail.contains("followed by a valid")),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the store opened"),
    }
}

#[test]
fn a_checkpoint_deletes_the_segments_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    // One-byte segments: every frame starts a new one.
    let backend = open(dir.path(), 1).unwrap();
    for revision in 1..=3 {
        backend.apply(&[put(revision, "v")], 1).unwrap();
        backend.flush().unwrap();
    }
    assert_eq!(backend.inner.wal.lock().segment_count(), 3);
    assert_eq!(segment_files(dir.path()), 3);
    backend.checkpoint_now().unwrap();
    // The current segment stays (the next frame goes there); the finished ones are gone.
    assert_eq!(segment_files(dir.path()), 1);
    drop(backend);
    let backend = open(dir.path(), 1).unwrap();
    assert_eq!(backend.load().unwrap().revision, 3);
}

#[test]
fn reopen_after_a_failed_write_replays_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    backend
        .apply(&[put(1, "a"), put(2, "a"), put(3, "a")], 1)
        .unwrap();
    backend.flush().unwrap();
    // Applied, but its flush never happened (the store failed).
    backend.apply(&[put(4, "a")], 1).unwrap();
    backend.reopen().unwrap();
    let loaded = backend.load().unwrap();
    assert!(loaded.revision >= 3, "acknowledged writes survive a reopen");
    assert_eq!(
        backend.read_log(0, loaded.revision, 100).unwrap().len() as u64,
        loaded.revision
    );
    assert_eq!(segment_files(dir.path()), 0);
    let next = loaded.revision + 1;
    backend.apply(&[put(next, "b")], 1).unwrap();
    backend.flush().unwrap();
    drop(backend);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, next);
    assert_eq!(value_of(&backend, next).as_deref(), Some("b"));
}

fn kv(key: &str, value: &str, created: Revision, modified: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: bytes::Bytes::from(value.to_owned()),
        create_revision: created,
        mod_revision: modified,
    }
}

#[test]
fn replay_restores_previous_values_the_log_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let event =
        |kind, revision, value: Option<KeyValue>, prev: Option<KeyValue>, key: &str| Event {
            kind,
            key: key.to_owned(),
            revision,
            value,
            prev,
        };
    let v = |value: &str, modified| kv("/a", value, 1, modified);
    {
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        let first = event(EventKind::Put, 1, Some(v("v1", 1)), None, "/a");
        backend.apply(&[Arc::new(first)], 1).unwrap();
        backend.flush().unwrap();
    }
    let frames = [
        vec![
            event(EventKind::Put, 2, Some(v("v2", 2)), Some(v("v1", 1)), "/a"),
            event(EventKind::Put, 3, Some(v("v3", 3)), Some(v("v2", 2)), "/a"),
        ],
        vec![
            event(EventKind::Delete, 4, None, Some(v("v3", 3)), "/a"),
            event(EventKind::Put, 5, Some(kv("/b", "b", 5, 5)), None, "/b"),
        ],
    ];
    let mut log = Wal::new(&dir.path().join("wal"), wal::SEGMENT_BYTES, false);
    for events in &frames {
        let mut payload = Vec::new();
        wal::encode_batch(&mut payload, events.iter(), 7);
        let last = events.last().map_or(0, |e| e.revision);
        log.append(&payload, last).unwrap();
    }
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    let replayed = backend.read_log(1, 5, 100).unwrap();
    let prevs: Vec<_> = replayed.iter().map(|e| e.prev.clone()).collect();
    let expected: Vec<_> = frames.iter().flatten().map(|e| e.prev.clone()).collect();
    assert_eq!(prevs, expected);
    let logged: Vec<_> = replayed.iter().map(|e| e.value.clone()).collect();
    let written: Vec<_> = frames.iter().flatten().map(|e| e.value.clone()).collect();
    assert_eq!(logged, written);
}

#[test]
fn a_crash_between_the_log_and_a_checkpoint_loses_nothing_logged() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    backend.apply(&[put(1, "a"), put(2, "a")], 1).unwrap();
    backend.flush().unwrap();
    backend.apply(&[put(3, "a")], 1).unwrap();
    backend.flush().unwrap();
    // Applied, never logged: not acknowledged, and gone after the crash.
    backend.apply(&[put(4, "a")], 1).unwrap();
    crash(backend);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    let loaded = backend.load().unwrap();
    assert_eq!(loaded.revision, 3);
    assert_eq!(loaded.items.len(), 3);
    assert_eq!(backend.read_log(0, 3, 100).unwrap().len(), 3);
    assert_eq!(segment_files(dir.path()), 0, "the replayed log is deleted");
}

#[test]
fn a_checkpoint_then_a_crash_replays_only_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), 1).unwrap();
    backend.apply(&[put(1, "a"), put(2, "a")], 1).unwrap();
    backend.flush().unwrap();
    backend.checkpoint_now().unwrap();
    backend
        .apply(
            &[Arc::new(Event {
                kind: EventKind::Delete,
                key: "/k1".into(),
                revision: 3,
                value: None,
                prev: Some(kv("/k1", "a", 1, 1)),
            })],
            1,
        )
        .unwrap();
    backend.apply(&[put(4, "b")], 1).unwrap();
    backend.flush().unwrap();
    crash(backend);
    let backend = open(dir.path(), 1).unwrap();
    let loaded = backend.load().unwrap();
    assert_eq!(loaded.revision, 4);
    assert_eq!(
        value_of(&backend, 1),
        None,
        "the logged delete was replayed"
    );
    assert_eq!(value_of(&backend, 4).as_deref(), Some("b"));
    let log = backend.read_log(0, 4, 100).unwrap();
    assert_eq!(log.len(), 4);
    // The replayed delete's previous value comes from what the checkpoint left in sled.
    assert_eq!(log[2].prev, Some(kv("/k1", "a", 1, 1)));
}

#[test]
fn a_torn_frame_after_a_crash_is_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    backend.apply(&[put(1, "a")], 1).unwrap();
    backend.flush().unwrap();
    backend.apply(&[put(2, "a")], 1).unwrap();
    backend.flush().unwrap();
    crash(backend);
    // The second frame's write was cut short: its fdatasync never returned, so never acknowledged.
    let segment = dir.path().join("wal").join(format!("{:016x}.wal", 0));
    let bytes = std::fs::read(&segment).unwrap();
    std::fs::write(&segment, &bytes[..bytes.len() - 3]).unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, 1);
    // Writing goes on after the torn frame's revision, in a new segment.
    backend.apply(&[put(2, "b")], 1).unwrap();
    backend.flush().unwrap();
    crash(backend);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    assert_eq!(backend.load().unwrap().revision, 2);
    assert_eq!(value_of(&backend, 2).as_deref(), Some("b"));
}

#[test]
fn reads_span_sled_and_the_events_not_yet_checkpointed() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    backend.apply(&[put(1, "a"), put(2, "a")], 100).unwrap();
    backend.flush().unwrap();
    backend.checkpoint_now().unwrap();
    backend.apply(&[put(3, "a"), put(4, "a")], 200).unwrap();
    backend.flush().unwrap();
    backend.apply(&[put(5, "a")], 300).unwrap();
    let revisions = |events: Vec<Event>| events.iter().map(|e| e.revision).collect::<Vec<_>>();
    assert_eq!(
        revisions(backend.read_log(0, 5, 100).unwrap()),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(revisions(backend.read_log(1, 4, 100).unwrap()), [2, 3, 4]);
    assert_eq!(revisions(backend.read_log(0, 5, 3).unwrap()), [1, 2, 3]);
    assert_eq!(revisions(backend.read_log(3, 5, 1).unwrap()), [4]);
    assert_eq!(backend.last_committed_before(150, 5).unwrap(), Some(2));
    assert_eq!(backend.last_committed_before(250, 5).unwrap(), Some(4));
    assert_eq!(backend.last_committed_before(250, 3).unwrap(), Some(3));
    assert_eq!(backend.last_committed_before(100, 5).unwrap(), None);
}

#[test]
fn a_compaction_ahead_of_sled_keeps_the_checkpoint_from_logging_compacted_events() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    backend.apply(&[put(1, "a"), put(2, "a")], 1).unwrap();
    backend.flush().unwrap();
    backend.checkpoint_now().unwrap();
    backend.apply(&[put(3, "a"), put(4, "a")], 1).unwrap();
    backend.flush().unwrap();
    let revisions = |events: Vec<Event>| events.iter().map(|e| e.revision).collect::<Vec<_>>();
    backend.compact(3).unwrap();
    // Compacted while still in the tail: gone for readers already.
    assert_eq!(revisions(backend.read_log(0, 4, 100).unwrap()), [4]);
    backend.checkpoint_now().unwrap();
    let in_sled = |revision| {
        let open = backend.inner.opened().unwrap();
        open.data.get(log_key(revision)).unwrap().is_some()
    };
    assert!(!in_sled(3), "a compacted event was logged in sled");
    assert!(in_sled(4));
    assert_eq!(revisions(backend.read_log(0, 4, 100).unwrap()), [4]);
    drop(backend);
    let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
    let loaded = backend.load().unwrap();
    assert_eq!((loaded.revision, loaded.compacted), (4, 3));
    assert_eq!(loaded.items.len(), 4);
}

#[test]
fn the_checkpointer_brings_sled_up_to_date_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let backend =
        SledBackend::open_with(dir.path(), 1 << 20, true, 0, 1, Duration::from_millis(1)).unwrap();
    for revision in 1..=3 {
        backend.apply(&[put(revision, "v")], 1).unwrap();
        backend.flush().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend.inner.progress.lock().checkpointed < 3 {
        assert!(Instant::now() < deadline, "no checkpoint within 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(backend.inner.tail.lock().is_empty());
    // The finished segments went; only the current one stays.
    assert_eq!(segment_files(dir.path()), 1);
    crash(backend);
    let backend = open(dir.path(), 1).unwrap();
    assert_eq!(backend.load().unwrap().revision, 3);
}
