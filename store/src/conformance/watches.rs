//! Contract checks of `watch`: from now, the past and the future, filters, concurrent writers,
//! slow watchers, compaction, and the T3 guarantees checker.

use super::*;

fn check_event(event: &Event, kind: EventKind, key: &str, value: Option<&str>, prev: Option<&str>) {
    assert_eq!(event.kind, kind, "{event:?}");
    assert_eq!(event.key, key, "{event:?}");
    assert_eq!(
        event.value.as_ref().map(|kv| kv.value.clone()),
        value.map(val),
        "{event:?}"
    );
    assert_eq!(
        event.prev.as_ref().map(|kv| kv.value.clone()),
        prev.map(val),
        "{event:?}"
    );
    if let Some(kv) = &event.value {
        assert_eq!(kv.mod_revision, event.revision);
        assert_eq!(kv.key, event.key);
    }
}

pub async fn watch_from_now_past_and_future<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    created(store, "/w/a", "1").await;
    updated(store, "/w/a", "2", None).await;
    let middle = store.current_revision();
    let mut now = watching(store, "/w/", middle, 64);
    let mut future = watching(store, "/w/", middle + 2, 64);
    ok(store.delete("/w/a", None).await, "delete");
    created(store, "/w/b", "1").await;
    created(store, "/w/c", "1").await;
    let mut past = watching(store, "/w/", start, 64);

    let e = next_event(&mut past).await;
    check_event(&e, EventKind::Put, "/w/a", Some("1"), None);
    assert!(e.is_create());
    assert_eq!(e.revision, start + 1);
    let e = next_event(&mut past).await;
    check_event(&e, EventKind::Put, "/w/a", Some("2"), Some("1"));
    for stream in [&mut past, &mut now] {
        let e = next_event(stream).await;
        check_event(&e, EventKind::Delete, "/w/a", None, Some("2"));
        assert_eq!(e.revision, middle + 1);
        let e = next_event(stream).await;
        check_event(&e, EventKind::Put, "/w/b", Some("1"), None);
    }
    // The future watch skips everything up to its revision.
    let e = next_event(&mut future).await;
    assert_eq!(e.revision, middle + 3);
    check_event(&e, EventKind::Put, "/w/c", Some("1"), None);
    for stream in [&mut past, &mut now] {
        assert_eq!(next_event(stream).await.revision, middle + 3);
    }
    // Resumable: a new watch after the last revision seen continues exactly there.
    created(store, "/w/d", "1").await;
    let mut resumed = watching(store, "/w/", now.last_revision(), 64);
    assert_eq!(next_event(&mut resumed).await.key, "/w/d");
    assert_eq!(next_event(&mut now).await.key, "/w/d");
    ok(store.flush_and_close().await, "close");
}

pub async fn watch_filters_by_prefix<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    let mut live = watching(store, "/f/a/", start, 16);
    for key in ["/f/b/1", "/f/a/1", "/f/ab", "/f/a/2"] {
        created(store, key, "v").await;
    }
    let mut replay = watching(store, "/f/a/", start, 16);
    for stream in [&mut live, &mut replay] {
        assert_eq!(next_event(stream).await.key, "/f/a/1");
        assert_eq!(next_event(stream).await.key, "/f/a/2");
    }
    ok(store.flush_and_close().await, "close");
}

pub async fn concurrent_writers_and_watchers<H: Harness>(harness: &H) {
    const WRITERS: usize = 16;
    const PER_WRITER: usize = 50;
    let store: Arc<dyn Store> = Arc::new(harness.open(StoreConfig::default()));
    let start = store.current_revision();
    let mut from_start = watching(&*store, "/c/", start, 4096);
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            for i in 0..PER_WRITER {
                let key = format!("/c/{w}/{i}");
                let kv = created(&*store, &key, &key).await;
                revisions.push(kv.mod_revision);
                if i % 5 == 0 {
                    revisions.push(
                        updated(&*store, &key, "u", Some(kv.mod_revision))
                            .await
                            .mod_revision,
                    );
                }
            }
            revisions
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        match task.await {
            Ok(revisions) => {
                assert!(
                    revisions.windows(2).all(|w| w[0] < w[1]),
                    "one writer's revisions must increase"
                );
                all.extend(revisions);
            }
            Err(error) => panic!("writer task failed: {error}"),
        }
    }
    all.sort_unstable();
    let total = WRITERS * PER_WRITER * 6 / 5;
    let expected: Vec<Revision> = (start + 1..=start + total as u64).collect();
    assert_eq!(
        all, expected,
        "acknowledged revisions must be exactly the dense range"
    );
    let mut from_past = watching(&*store, "/c/", start, 4096);
    for stream in [&mut from_start, &mut from_past] {
        for revision in &expected {
            assert_eq!(next_event(stream).await.revision, *revision);
        }
    }
    ok(store.flush_and_close().await, "close");
}

pub async fn slow_watcher_is_closed_without_blocking_writers<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    let mut slow = watching(store, "/s/", start, 8);
    let mut fast = watching(store, "/s/", start, 1024);
    // Let both subscribe (they catch up to the head on their first poll).
    created(store, "/s/first", "v").await;
    assert_eq!(next_event(&mut slow).await.key, "/s/first");
    assert_eq!(next_event(&mut fast).await.key, "/s/first");
    for i in 0..100 {
        created(store, &format!("/s/{i}"), "v").await;
    }
    let mut delivered = 0;
    loop {
        match next_item(&mut slow).await {
            Some(WatchItem::Event(_)) => delivered += 1,
            Some(WatchItem::Closed(WatchClosedReason::FellBehind { buffer })) => {
                assert_eq!(buffer, 8);
                break;
            }
            other => panic!("expected FellBehind, got {other:?}"),
        }
    }
    assert!(
        delivered <= 8,
        "a slow watcher got {delivered} events past a buffer of 8"
    );
    assert_eq!(next_item(&mut slow).await, None);
    for i in 0..100 {
        assert_eq!(next_event(&mut fast).await.key, format!("/s/{i}"));
    }
    ok(store.flush_and_close().await, "close");
}

pub async fn compaction_expires_old_watches_and_lists<H: Harness>(harness: &H) {
    let cfg = StoreConfig {
        event_log_max_events: 10,
        compaction_interval: Duration::from_millis(20),
        ..StoreConfig::default()
    };
    let store = harness.open(cfg);
    let store: &dyn Store = &store;
    let start = store.current_revision();
    for i in 0..5 {
        created(store, &format!("/x/{i}"), "v").await;
    }
    let first_page = listed(
        store,
        "/x/",
        ListOptions {
            limit: Some(2),
            ..Default::default()
        },
    )
    .await;
    let Some(token) = first_page.continue_token.clone() else {
        panic!("expected a continue token")
    };
    // Behind from the start (it has five events to replay), and it never reads until compaction ran.
    let mut lagging = watching(store, "/x/", start, 1024);
    for i in 0..40 {
        updated(store, &format!("/x/{}", i % 5), &i.to_string(), None).await;
    }
    let head = store.current_revision();
    let head_before_compaction = head;
    wait_until("compaction reaches the count bound", || {
        store.compacted_revision() >= head - 10
    })
    .await;
    assert!(store.compacted_revision() <= head);
    match ok(store.watch("/x/", start, 16), "old watch") {
        WatchOutcome::Expired { compacted } => assert!(compacted > start),
        WatchOutcome::Watching(_) => panic!("a watch from a compacted revision must expire"),
    }
    match ok(
        store
            .list(
                "/x/",
                ListOptions {
                    limit: Some(2),
                    continue_token: Some(token),
                    revision: None,
                },
            )
            .await,
        "old token",
    ) {
        ListOutcome::Expired { compacted } => assert!(compacted > first_page.revision),
        other => panic!("expected Expired for a compacted continue token, got {other:?}"),
    }
    match ok(
        store
            .list(
                "/x/",
                ListOptions {
                    revision: Some(start + 1),
                    ..Default::default()
                },
            )
            .await,
        "old list",
    ) {
        ListOutcome::Expired { .. } => {}
        other => panic!("expected Expired, got {other:?}"),
    }
    // A watcher that never read before its events were compacted is told so, never given a gap;
    // one whose stream read ahead has every event, in order.
    if harness.watch_reads_ahead() {
        // Either it read everything before compaction got there, or it is told so, after a
        // gap-free beginning (etcd cancels a watcher still catching up when its start is compacted).
        let mut expect = start + 1;
        while expect <= head_before_compaction {
            match next_item(&mut lagging).await {
                Some(WatchItem::Event(event)) => {
                    assert_eq!(
                        event.revision, expect,
                        "a gap or reorder in a read-ahead watch"
                    );
                    expect += 1;
                }
                Some(WatchItem::Closed(WatchClosedReason::Compacted { compacted })) => {
                    assert!(compacted > start);
                    break;
                }
                other => panic!("expected an event or Compacted, got {other:?}"),
            }
        }
    } else {
        match next_item(&mut lagging).await {
            Some(WatchItem::Closed(WatchClosedReason::Compacted { compacted })) => {
                assert!(compacted > start)
            }
            other => panic!("expected Compacted, got {other:?}"),
        }
    }
    // Watching from the compacted revision itself still works and is gap-free. No writes follow, so
    // compaction stays where it is while the watcher replays.
    updated(store, "/x/0", "after", None).await;
    let head = store.current_revision();
    wait_until("compaction settles", || {
        store.compacted_revision() == head - 10
    })
    .await;
    let compacted = store.compacted_revision();
    let mut recent = watching(store, "/x/", compacted, 1024);
    let mut expect = compacted + 1;
    while expect <= head {
        assert_eq!(next_event(&mut recent).await.revision, expect);
        expect += 1;
    }
    ok(store.flush_and_close().await, "close");
}

/// One acknowledged write, as its writer saw it.
#[derive(Debug, Clone)]
struct Acked {
    kind: EventKind,
    key: String,
    value: Option<Bytes>,
}

/// spec/reliability.md T3 at the store level: while writers run, watchers from now, from the past,
/// from a future revision and with a narrow prefix record every event; then every stream is checked
/// against the history the writers were acknowledged (all writes in the store come from them):
/// ordered, unique, reliable (exactly the filtered history, no gap), resumable (a stream broken
/// mid-way and resumed from its last revision continues exactly), `prev` and create-ness correct, and
/// a future watch delivers nothing at or before its revision.
pub async fn watch_guarantees_checker<H: Harness>(harness: &H, seed: u64) {
    const WRITERS: u64 = 4;
    const OPS: u64 = 300;
    const KEYS: u64 = 10;
    tracing::info!(seed, "watch checker");
    let store: Arc<dyn Store> = Arc::new(harness.open(StoreConfig::default()));
    let base = store.current_revision();
    let history = Arc::new(parking_lot::Mutex::new(BTreeMap::<Revision, Acked>::new()));

    async fn write(
        store: &dyn Store,
        rng: &mut SeededRng,
        tag: &str,
        history: &parking_lot::Mutex<BTreeMap<Revision, Acked>>,
    ) {
        let key = match rng.next() % 8 {
            0 => format!("/other/k{}", rng.next() % 3),
            _ => format!("/t3/k{}", rng.next() % KEYS),
        };
        let value = Bytes::from(format!("{tag}-{}", rng.next()));
        let current = ok(store.get(&key).await, "get");
        let acked = match (current, rng.next() % 10) {
            (None, _) => match ok(store.create(&key, value.clone()).await, "create") {
                CreateOutcome::Created(kv) => Some((kv.mod_revision, EventKind::Put, Some(value))),
                CreateOutcome::AlreadyExists(_) => None,
            },
            (Some(kv), 0..=1) => {
                match ok(store.delete(&key, Some(kv.mod_revision)).await, "delete") {
                    DeleteOutcome::Deleted { revision, .. } => {
                        Some((revision, EventKind::Delete, None))
                    }
                    _ => None,
                }
            }
            (Some(kv), _) => match ok(
                store
                    .update(&key, value.clone(), Some(kv.mod_revision))
                    .await,
                "update",
            ) {
                UpdateOutcome::Updated { kv, .. } => {
                    Some((kv.mod_revision, EventKind::Put, Some(value)))
                }
                _ => None,
            },
        };
        if let Some((revision, kind, value)) = acked {
            history.lock().insert(revision, Acked { kind, key, value });
        }
    }

    // Some history before the watchers start, so "from the past" has something to replay.
    let mut rng = SeededRng(seed | 1);
    for _ in 0..60 {
        write(&*store, &mut rng, "pre", &history).await;
    }
    let head = store.current_revision();
    let past_offset = 1 + rng.next() % (head - base);
    let specs: Vec<(&str, Revision, &str)> = vec![
        ("", head, "now-all"),
        ("/t3/", head, "now-t3"),
        ("/t3/", head, "now-t3-b"),
        ("", head, "now-all-b"),
        ("/t3/", head - past_offset, "past-random"),
        ("", base, "past-start"),
        ("/t3/", head + 10, "future"),
        ("/t3/k1", head - past_offset / 2, "filtered"),
    ];
    let sentinel = "/t3/k1~end";
    let mut watchers = Vec::new();
    for (prefix, after, name) in specs.iter().cloned() {
        let mut stream = watching(&*store, prefix, after, 1 << 16);
        // One stream of the from-now ones is broken mid-way and resumed from its last revision.
        let break_after = (name == "now-t3-b").then_some(100usize);
        let store = Arc::clone(&store);
        watchers.push(tokio::spawn(async move {
            let mut events = Vec::new();
            loop {
                if Some(events.len()) == break_after {
                    let resume = stream.last_revision();
                    stream = watching(&*store, prefix, resume, 1 << 16);
                }
                let event = next_event(&mut stream).await;
                let done = event.key == sentinel;
                events.push(event);
                if done {
                    return (name, prefix, after, events);
                }
            }
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        let history = Arc::clone(&history);
        let mut rng = SeededRng(seed.wrapping_add(w + 1).wrapping_mul(0x9E37_79B9) | 1);
        writers.push(tokio::spawn(async move {
            for _ in 0..OPS {
                write(&*store, &mut rng, &format!("w{w}"), &history).await;
            }
        }));
    }
    for writer in writers {
        if let Err(error) = writer.await {
            panic!("seed {seed}: writer failed: {error}");
        }
    }
    let end = created(&*store, sentinel, "end").await;
    history.lock().insert(
        end.mod_revision,
        Acked {
            kind: EventKind::Put,
            key: sentinel.into(),
            value: Some(val("end")),
        },
    );
    let history = history.lock().clone();
    let last = end.mod_revision;
    let expected_all: Vec<Revision> = (base + 1..=last).collect();
    assert_eq!(
        history.keys().copied().collect::<Vec<_>>(),
        expected_all,
        "seed {seed}: acknowledged revisions are not dense"
    );

    // The state of every key before each revision, to check `prev` and create-ness.
    let mut state: HashMap<String, (Bytes, Revision)> = HashMap::new();
    let mut before: HashMap<Revision, Option<(Bytes, Revision)>> = HashMap::new();
    for (revision, acked) in &history {
        before.insert(*revision, state.get(&acked.key).cloned());
        match &acked.value {
            Some(value) => state.insert(acked.key.clone(), (value.clone(), *revision)),
            None => state.remove(&acked.key),
        };
    }
    for watcher in watchers {
        let (name, prefix, after, events) = match watcher.await {
            Ok(result) => result,
            Err(error) => panic!("seed {seed}: watcher failed: {error}"),
        };
        let expected: Vec<Revision> = history
            .range(after + 1..)
            .filter(|(_, a)| a.key.starts_with(prefix))
            .map(|(r, _)| *r)
            .collect();
        let got: Vec<Revision> = events.iter().map(|e| e.revision).collect();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: {name}: not strictly ordered / unique"
        );
        assert_eq!(
            got, expected,
            "seed {seed}: {name}: not exactly the filtered history after {after}"
        );
        for event in &events {
            let Some(acked) = history.get(&event.revision) else {
                panic!(
                    "seed {seed}: {name}: event at unknown revision {}",
                    event.revision
                )
            };
            assert_eq!(
                (event.kind, &event.key),
                (acked.kind, &acked.key),
                "seed {seed}: {name}"
            );
            assert_eq!(
                event.value.as_ref().map(|kv| kv.value.clone()),
                acked.value,
                "seed {seed}: {name}"
            );
            let prev = event
                .prev
                .as_ref()
                .map(|kv| (kv.value.clone(), kv.mod_revision));
            let expected_prev = before.get(&event.revision).cloned().flatten();
            assert_eq!(
                prev, expected_prev,
                "seed {seed}: {name}: prev at {}",
                event.revision
            );
            assert_eq!(
                event.is_create(),
                event.kind == EventKind::Put && expected_prev.is_none()
            );
        }
        if name == "future" {
            assert!(
                got.iter().all(|r| *r > after),
                "seed {seed}: future watch delivered old events"
            );
        }
    }
    ok(store.flush_and_close().await, "close");
}
