//! sled-specific guarantees: restart continuity, persisted compaction, refusing bad directories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use store::conformance::{next_item, wait_until};
use store::{CreateOutcome, Error, SledStore, Store, StoreConfig, WatchItem, WatchOutcome};

fn open(path: &std::path::Path, cfg: StoreConfig) -> SledStore {
    SledStore::open(path, cfg).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

async fn create(store: &SledStore, key: &str, value: &str) -> u64 {
    match store
        .create(key, Bytes::from(value.to_owned()))
        .await
        .unwrap()
    {
        CreateOutcome::Created(kv) => kv.mod_revision,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_continues_revision_data_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default());
    for i in 0..10 {
        create(&store, &format!("/a/{i}"), "v").await;
    }
    store.delete("/a/3", None).await.unwrap();
    assert_eq!(store.current_revision(), 11);
    store.flush_and_close().await.unwrap();
    drop(store);

    let store = open(dir.path(), StoreConfig::default());
    assert_eq!(store.current_revision(), 11);
    assert_eq!(store.get("/a/3").await.unwrap(), None);
    assert_eq!(
        store.get("/a/4").await.unwrap().map(|kv| kv.mod_revision),
        Some(5)
    );
    assert_eq!(
        create(&store, "/a/new", "v").await,
        12,
        "the revision continues, never skips"
    );
    // The log survived the restart: a watch from 0 replays everything.
    let WatchOutcome::Watching(mut watch) = store.watch("", 0, 64).unwrap() else {
        panic!("expired")
    };
    for revision in 1..=12 {
        match next_item(&mut watch).await {
            Some(WatchItem::Event(e)) => assert_eq!(e.revision, revision),
            other => panic!("{other:?}"),
        }
    }
    drop(watch);
    store.flush_and_close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_is_remembered_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        event_log_max_events: 5,
        compaction_interval: Duration::from_millis(20),
        ..StoreConfig::default()
    };
    let store = open(dir.path(), cfg.clone());
    for i in 0..20 {
        create(&store, &format!("/c/{i}"), "v").await;
    }
    wait_until("compacted to the count bound", || {
        store.compacted_revision() == 15
    })
    .await;
    store.flush_and_close().await.unwrap();
    drop(store);
    let store = open(dir.path(), StoreConfig::default());
    assert_eq!(store.compacted_revision(), 15);
    assert!(matches!(
        store.watch("", 14, 8).unwrap(),
        WatchOutcome::Expired { compacted: 15 }
    ));
    assert!(matches!(
        store.watch("", 15, 8).unwrap(),
        WatchOutcome::Watching(_)
    ));
    store.flush_and_close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_bound_compacts_old_events() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        event_log_max_age: Duration::from_millis(50),
        compaction_interval: Duration::from_millis(20),
        ..StoreConfig::default()
    };
    let store = open(dir.path(), cfg);
    for i in 0..5 {
        create(&store, &format!("/age/{i}"), "v").await;
    }
    wait_until("every event aged out", || store.compacted_revision() == 5).await;
    assert!(matches!(
        store.watch("", 4, 8).unwrap(),
        WatchOutcome::Expired { compacted: 5 }
    ));
    // Data is unaffected by log compaction.
    assert_eq!(
        store.get("/age/0").await.unwrap().map(|kv| kv.mod_revision),
        Some(1)
    );
    store.flush_and_close().await.unwrap();
}

fn error_names_path(error: &Error, path: &std::path::Path) {
    let text = format!("{error}");
    assert!(
        text.contains(&path.display().to_string()),
        "error {text:?} does not name {}",
        path.display()
    );
}

#[test]
fn a_file_instead_of_a_directory_fails_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    std::fs::write(&path, b"not a directory").unwrap();
    let error = SledStore::open(&path, StoreConfig::default())
        .err()
        .expect("must fail");
    error_names_path(&error, &path);
}

#[test]
fn a_foreign_sled_database_is_refused_not_reset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path()).unwrap();
        db.insert(b"someone", b"else's data").unwrap();
        db.flush().unwrap();
    }
    let error = SledStore::open(dir.path(), StoreConfig::default())
        .err()
        .expect("must fail");
    assert!(matches!(error, Error::Corrupt { .. }), "{error}");
    error_names_path(&error, dir.path());
    // Still there: nothing was reset. (sled's threads of the refused open let go of its file lock
    // a moment after it returns: retry on that error only, for at most 10 s.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let db = loop {
        match sled::open(dir.path()) {
            Ok(db) => break db,
            Err(e)
                if format!("{e:?}").contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("reopening: {e:?}"),
        }
    };
    assert_eq!(
        db.get(b"someone").unwrap().as_deref(),
        Some(&b"else's data"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_object_fails_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default());
    create(&store, "/k", "v").await;
    store.flush_and_close().await.unwrap();
    drop(store);
    {
        let db = sled::open(dir.path()).unwrap();
        db.open_tree("data")
            .unwrap()
            .insert(b"o/k", b"\x09garbage")
            .unwrap();
        db.flush().unwrap();
    }
    let error = SledStore::open(dir.path(), StoreConfig::default())
        .err()
        .expect("must fail");
    assert!(matches!(error, Error::Corrupt { .. }), "{error}");
    error_names_path(&error, dir.path());
}

#[test]
fn garbage_files_fail_start_up_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        db.flush().unwrap();
    }
    // Overwrite every file sled wrote with garbage.
    for entry in walk(dir.path()) {
        std::fs::write(&entry, vec![0xA5u8; 4096]).unwrap();
    }
    let error = SledStore::open(dir.path(), StoreConfig::default())
        .err()
        .expect("must fail");
    error_names_path(&error, dir.path());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// spec/reliability.md T4 (2) at the store level: a watcher that stops reading while 5,000 writes
/// happen is closed at its buffer bound, never slows the writers down to its pace, and holds no more
/// than its buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_closed_at_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(open(dir.path(), StoreConfig::default()));
    let WatchOutcome::Watching(mut stalled) = store.watch("", 0, 100).unwrap() else {
        panic!("expired")
    };
    assert_eq!(store.watcher_count(), 1);
    let mut writers = Vec::new();
    for w in 0..16 {
        let store = std::sync::Arc::clone(&store);
        writers.push(tokio::spawn(async move {
            for i in 0..5_000 / 16 {
                create(&store, &format!("/t4/{w}/{i}"), "v").await;
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    assert_eq!(
        store.watcher_count(),
        0,
        "the stalled watcher must have been dropped"
    );
    let mut delivered = 0;
    loop {
        match next_item(&mut stalled).await {
            Some(WatchItem::Event(_)) => delivered += 1,
            Some(WatchItem::Closed(store::WatchClosedReason::FellBehind { buffer: 100 })) => break,
            other => panic!("expected FellBehind, got {other:?}"),
        }
    }
    assert!(
        delivered <= 100,
        "delivered {delivered} past a buffer of 100"
    );
    store.flush_and_close().await.unwrap();
}

/// Values over sled's blob threshold (~128 KiB) live in separate blob files; they must survive a
/// restart like any other value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_values_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default());
    let big = Bytes::from(vec![b'b'; store::MAX_VALUE_SIZE]);
    assert!(matches!(
        store.create("/big", big.clone()).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    store.flush_and_close().await.unwrap();
    drop(store);
    let store = open(dir.path(), StoreConfig::default());
    assert_eq!(
        store.get("/big").await.unwrap().map(|kv| kv.value),
        Some(big)
    );
    store.flush_and_close().await.unwrap();
}
