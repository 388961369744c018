//! Room on disk: the store stops growing before its file system is full, as etcd stops at its space
//! quota (`mvcc: database space exceeded`) rather than at the disk's end.
//!
//! A log-structured engine that runs into `ENOSPC` in the middle of a flush cannot tell what reached
//! the disk, and sled latches itself failed; so the writer checks the free space of the store's file
//! system before each batch and refuses, with [`Error::NoSpace`], what would grow the store once
//! less than [`StoreConfig::space_reserve_bytes`] is free:
//! - creates and updates need the whole reserve;
//! - deletes, which is how an operator frees space through the API, run until only a quarter of
//!   it is left (a delete appends a small record until compaction reclaims the space).
//!
//! Nothing is latched: the check runs again for every batch, so writes resume by themselves as soon
//! as space is free again. The same check is the store's readiness ([`crate::Store::health`]).
//!
//! sled cannot open without writing (it writes a snapshot file at start), so a disk filled to the
//! last byte by someone else would keep the store from starting, or from reopening after an
//! `ENOSPC`. For that the store keeps an emergency ballast, as CockroachDB does: a file of
//! [`BALLAST_BYTES`] allocated in its directory while the disk has room, deleted (with a WARN) when
//! opening finds no space, so the store starts and serves reads.
//!
//! [`StoreConfig::space_reserve_bytes`]: crate::StoreConfig::space_reserve_bytes

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::Error;

/// What a write needs from the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A create or an update: the store grows.
    Grow,
    /// A delete: the store shrinks once compacted.
    Shrink,
}

/// Size of the emergency ballast: room for sled's snapshot and a few log segments.
pub(crate) const BALLAST_BYTES: u64 = 4 * 1024 * 1024;

/// The ballast's name in the store's directory (sled ignores files it does not know).
const BALLAST: &str = "ballast";

/// Allocates the ballast in `dir` if it is missing and the disk has room for it beyond `reserve`.
/// Best effort: a store without a ballast works, it only cannot start on a disk that is full.
pub(crate) fn keep_ballast(dir: &Path, reserve: u64) {
    let path = dir.join(BALLAST);
    if path.exists() || available(dir).is_none_or(|free| free < reserve + BALLAST_BYTES) {
        return;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|file| {
            // Allocated, not sparse: the blocks are really taken from the file system.
            fs2::FileExt::allocate(&file, BALLAST_BYTES)?;
            file.sync_all()
        });
    if let Err(error) = created {
        tracing::debug!(path = %path.display(), %error, "cannot allocate the store's ballast");
        let _ = std::fs::remove_file(&path);
    }
}

/// Deletes the ballast in `dir`; whether there was one.
pub(crate) fn release_ballast(dir: &Path) -> bool {
    let path = dir.join(BALLAST);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            tracing::warn!(
                path = %path.display(),
                freed_bytes = BALLAST_BYTES,
                "the store's disk is full: deleted its emergency ballast to open; free disk space"
            );
            true
        }
        Err(_) => false,
    }
}

/// Free bytes on the file system of `path` (`None` when it cannot be read: then nothing is
/// refused, and a real `ENOSPC` still surfaces as [`Error::NoSpace`] from the back end).
pub(crate) fn available(path: &Path) -> Option<u64> {
    fs2::available_space(path).ok()
}

/// Whether a write that needs `need` may run with `free` bytes free and `reserve` kept back.
pub(crate) fn check(need: Need, free: u64, reserve: u64) -> Result<(), Error> {
    let floor = match need {
        Need::Grow => reserve,
        Need::Shrink => reserve / 4,
    };
    if free >= floor {
        return Ok(());
    }
    Err(Error::NoSpace {
        detail: format!(
            "{} free on its file system, less than the {} it keeps in reserve{}; free disk \
             space or delete objects",
            mib(free),
            mib(floor),
            match need {
                Need::Grow => " for creates and updates",
                Need::Shrink => " for deletes",
            },
        ),
    })
}

/// A size in MiB with one decimal, as `df -h` would round it.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Whether `error` is the operating system's "no space left on device".
pub(crate) fn is_enospc(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::StorageFull || error.raw_os_error() == Some(28)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn growth_needs_the_whole_reserve_and_deletes_a_quarter() {
        assert!(check(Need::Grow, 16 * MIB, 16 * MIB).is_ok());
        let refused = check(Need::Grow, 10 * MIB, 16 * MIB).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the store has no space left: 10.0 MiB free on its file system, less than the 16.0 MiB \
             it keeps in reserve for creates and updates; free disk space or delete objects"
        );
        assert!(check(Need::Shrink, 10 * MIB, 16 * MIB).is_ok());
        assert!(check(Need::Shrink, 4 * MIB, 16 * MIB).is_ok());
        let refused = check(Need::Shrink, 3 * MIB, 16 * MIB).unwrap_err();
        assert!(refused.to_string().contains("for deletes"), "{refused}");
    }

    #[test]
    fn a_zero_reserve_refuses_nothing() {
        assert!(check(Need::Grow, 0, 0).is_ok());
    }

    #[test]
    fn enospc_is_recognised_by_kind_and_by_number() {
        assert!(is_enospc(&std::io::Error::from_raw_os_error(28)));
        assert!(is_enospc(&std::io::Error::from(
            std::io::ErrorKind::StorageFull
        )));
        assert!(!is_enospc(&std::io::Error::from(
            std::io::ErrorKind::PermissionDenied
        )));
    }
}
