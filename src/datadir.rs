//! The data directory: where it defaults to, and the lock that keeps a second `up` away from it.
//!
//! Layout: `<dir>/store` (the sled database), `<dir>/kubeconfig`, `<dir>/minik8s.lock`. The lock is an
//! exclusive advisory lock (flock) held for the life of the process; the OS releases it when the process
//! dies, even by SIGKILL, so a crash never leaves a stale lock behind.

use std::fs::File;
use std::path::{Path, PathBuf};

use fs2::FileExt;

/// Errors opening the data directory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create data directory {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "data directory {path} is in use by another minik8s process (lock {lock} is held); \
         stop it or pass a different --data-dir"
    )]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("cannot lock {lock}: {source}")]
    Lock {
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The per-user default: `$XDG_DATA_HOME/minik8s` (usually `~/.local/share/minik8s`).
pub fn default_dir() -> PathBuf {
    dirs::data_local_dir()
        .or_else(dirs::home_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("minik8s")
}

/// An opened, exclusively locked data directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates `path` if needed and takes its lock, or says clearly who holds it.
    pub fn open(path: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(path).map_err(|source| Error::Create {
            path: path.to_path_buf(),
            source,
        })?;
        let lock_path = path.join("minik8s.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| Error::Lock {
                lock: lock_path.clone(),
                source,
            })?;
        match lock.try_lock_exclusive() {
            Ok(()) => Ok(Self {
                path: path.to_path_buf(),
                _lock: lock,
            }),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock || e.raw_os_error() == Some(11) =>
            {
                Err(Error::Locked {
                    path: path.to_path_buf(),
                    lock: lock_path,
                })
            }
            Err(source) => Err(Error::Lock {
                lock: lock_path,
                source,
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the sled database lives.
    pub fn store_path(&self) -> PathBuf {
        self.path.join("store")
    }

    /// Where `up` writes its kubeconfig unless told otherwise.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.path.join("kubeconfig")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_of_the_same_dir_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDir::open(dir.path()).unwrap();
        let err = DataDir::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        assert!(err
            .to_string()
            .contains("in use by another minik8s process"));
        drop(first);
        DataDir::open(dir.path()).unwrap();
    }
}
