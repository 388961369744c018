//! One opening of the sled database: sled's configuration, its panics and errors on open turned
//! into the store's, incomplete snapshots removed, the emergency ballast given up when the disk is
//! too full to open; and the I/O helpers the back end shares.

use std::path::Path;

use crate::{Error, Result};

/// One opening of the sled database.
pub(super) struct Opened {
    pub(super) db: sled::Db,
    pub(super) data: sled::Tree,
    /// sled's log file, opened again so each flush can end with `fdatasync` (see `flush`).
    pub(super) log_file: std::fs::File,
}

impl Opened {
    /// Opens the database in `path`; sled's panics on corrupt files become [`Error::Corrupt`].
    fn open(path: &Path, cache_bytes: u64) -> Result<Self> {
        remove_partial_snapshots(path)?;
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(cache_bytes)
            .flush_every_ms(None)
            .mode(sled::Mode::HighThroughput);
        // sled can panic on some corrupt files; refuse to start instead of aborting the process.
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || config.open()));
        let db = match opened {
            Ok(Ok(db)) => db,
            Ok(Err(sled::Error::Corruption { at, .. })) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    detail: format!("sled reports corruption at {at:?}"),
                })
            }
            Ok(Err(sled::Error::Io(io))) if crate::space::is_enospc(&io) => {
                return Err(Error::NoSpace {
                    detail: format!("opening the store failed: {io}"),
                })
            }
            Ok(Err(source)) => {
                return Err(Error::Open {
                    path: path.to_owned(),
                    source,
                })
            }
            Err(_) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    detail: "sled panicked while recovering the database".into(),
                })
            }
        };
        let data = db.open_tree("data").map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let log_path = path.join("db");
        let log_file = std::fs::File::open(&log_path).map_err(io_err(&log_path))?;
        Ok(Self { db, data, log_file })
    }

    /// [`Opened::open`]; on a disk too full for sled to open, once more after deleting the
    /// emergency ballast (`crate::space`).
    pub(super) fn open_or_release_ballast(path: &Path, cache_bytes: u64) -> Result<Self> {
        match Self::open(path, cache_bytes) {
            Err(Error::NoSpace { .. }) if crate::space::release_ballast(path) => {
                Self::open(path, cache_bytes)
            }
            other => other,
        }
    }
}

/// An I/O failure on `path`; "no space left on device" becomes [`Error::NoSpace`].
pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| {
        if crate::space::is_enospc(&source) {
            Error::NoSpace {
                detail: format!("writing {} failed: {source}", file_name(path)),
            }
        } else {
            Error::Io {
                path: path.to_owned(),
                source,
            }
        }
    }
}

/// sled writes a snapshot to `snap.<lsn>.generating`, then renames it to `snap.<lsn>`; a write cut
/// short (a full disk, a crash) leaves the first behind, and sled 0.34 then reads it as the newest
/// snapshot and reports corruption. Such a file is incomplete by construction (the older snapshot
/// is only deleted after the rename), so it is removed before sled opens; sled then recovers from
/// the older snapshot and its log.
fn remove_partial_snapshots(path: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io_err(path)(error)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err(path))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            let file = entry.path();
            std::fs::remove_file(&file).map_err(io_err(&file))?;
            tracing::warn!(path = %file.display(), "removed an incomplete sled snapshot");
        }
    }
    Ok(())
}

/// The last component of `path` (what a client may see of it).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// fsync a directory, so the entries of files created in it survive power loss.
pub(super) fn sync_dir(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(io_err(path))
}
