//! A disk that really runs out under sled (`ENOSPC` in the middle of a commit, the reserve turned
//! off): the write fails by name, the store reports itself unhealthy, and once space is free it
//! reopens sled by itself and takes writes again, with every acknowledged write kept, in memory
//! and on disk; opened again on a disk with no byte free, it starts and serves reads. Runs on a small tmpfs; skipped, with the reason printed, where mounting one is
//! impossible (not root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::{CreateOutcome, Error, SledStore, Store, StoreConfig};

struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        match Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
        {
            Ok(out) if out.status.success() => Some(Self(dir)),
            Ok(out) => {
                eprintln!(
                    "skipping: cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipping: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a store thread still closing its files must not leave the mount behind.
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// Writes `path` until the file system refuses (tmpfs allocates on write).
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5a_u8; 64 * 1024];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // The last partial pages.
    for _ in 0..1024 {
        if file.write(&[0x5a; 512]).is_err() {
            break;
        }
    }
}

/// Opens the store at `path` once the previous instance has let go of sled's file lock: sled's
/// background threads (those of the instance the store replaced after ENOSPC too) release it a
/// moment after the last handle is dropped. Any other error, or the lock still held after 10 s,
/// fails the test.
async fn open_once_unlocked(path: &Path) -> SledStore {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match SledStore::open(path, StoreConfig::default()) {
            Ok(store) => return store,
            Err(e)
                if e.to_string().contains("could not acquire lock")
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("reopening: {e:?}"),
        }
    }
}

fn value(i: usize) -> Bytes {
    Bytes::from(format!("{i:08}").repeat(4 * 1024))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enospc_under_sled_fails_by_name_and_the_store_reopens_itself_once_space_is_free() {
    let Some(tmpfs) = Tmpfs::mount("24m") else {
        return;
    };
    let path = tmpfs.0.path().join("store");
    let cfg = StoreConfig {
        space_reserve_bytes: 0,
        ..StoreConfig::default()
    };
    let store = SledStore::open(&path, cfg).unwrap();
    let mut acknowledged = Vec::new();
    for i in 0..10 {
        let key = format!("/k/{i}");
        assert!(matches!(
            store.create(&key, value(i)).await.unwrap(),
            CreateOutcome::Created(_)
        ));
        acknowledged.push(key);
    }

    let filler = tmpfs.0.path().join("filler");
    fill(&filler);
    let mut failure = None;
    for i in 10..1000 {
        let key = format!("/k/{i}");
        match store.create(&key, value(i)).await {
            Ok(CreateOutcome::Created(_)) => acknowledged.push(key),
            Ok(other) => panic!("{other:?}"),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let failure = failure.expect("a full disk failed no write");
    assert!(matches!(failure, Error::NoSpace { .. }), "{failure:?}");
    assert!(
        failure
            .to_string()
            .starts_with("the store has no space left: "),
        "{failure}"
    );
    assert!(store.health().is_err());
    // Reads are served from memory meanwhile.
    assert!(store.get("/k/0").await.unwrap().is_some());

    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let revision = loop {
        match store.create("/after", Bytes::from_static(b"x")).await {
            Ok(CreateOutcome::Created(kv)) => break kv.mod_revision,
            Ok(other) => panic!("{other:?}"),
            Err(e) => {
                assert!(Instant::now() < deadline, "no recovery: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(store.health().is_ok());
    assert_eq!(store.current_revision(), revision);
    for key in &acknowledged {
        assert!(store.get(key).await.unwrap().is_some(), "{key} lost");
    }

    // Opened again on a disk with no byte free: it starts, and serves every acknowledged write.
    store.flush_and_close().await.unwrap();
    drop(store);
    fill(&filler);
    let store = open_once_unlocked(&path).await;
    assert_eq!(store.current_revision(), revision);
    for key in acknowledged.iter().chain([&"/after".to_string()]) {
        assert!(
            store.get(key).await.unwrap().is_some(),
            "{key} lost on disk"
        );
    }
    // With the default reserve it refuses to grow, and says so.
    let health = store.health().unwrap_err();
    assert!(matches!(health, Error::NoSpace { .. }), "{health:?}");
    let refused = store.create("/refused", value(0)).await.unwrap_err();
    assert!(matches!(refused, Error::NoSpace { .. }), "{refused:?}");
    assert!(store.get("/refused").await.unwrap().is_none());
}
