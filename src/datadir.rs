//! The data directory: where it defaults to, the lock that keeps a second `up` away from it, and
//! the permissions that keep other users out of it.
//!
//! Layout: `<dir>/store` (the sled database), `<dir>/pki` (the token key and CA), `<dir>/kubeconfig`,
//! `<dir>/minik8s.lock`. The lock is an exclusive advisory lock (flock) held for the life of the
//! process; the OS releases it when the process dies, even by SIGKILL, so a crash never leaves a stale
//! lock behind.
//!
//! Permissions (issue 21, item 7: the store holds every Secret), whatever the process umask, which a
//! library must not change:
//! - The directory is created 0700 before anything is written into it; an existing one with wider
//!   permissions is tightened to 0700 at open with one WARN line naming the path and the old mode.
//!   So every file in it, whatever its own mode, is unreachable to other users from the start.
//! - [`DataDir::restrict_contents`], called once everything has been created at start-up, sets every
//!   directory below it to 0700 and every file to 0600 (sled's `conf`, `db`, `blobs/` and `snap.*`
//!   files, which sled creates with the umask's mode, included). Files sled creates later (new
//!   snapshots, blobs) may carry the umask's mode until the next start, but stay inside the 0700
//!   directory.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
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
    #[error("cannot restrict the permissions of {path}: {source}")]
    Permissions {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot lock {lock}: {source}")]
    Lock {
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Mode of the data directory and of every directory in it: the owner's only.
const DIR_MODE: u32 = 0o700;
/// Mode of every file in the data directory.
const FILE_MODE: u32 = 0o600;
/// Permission bits of the group and of others.
const SHARED_BITS: u32 = 0o077;

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
    /// Creates `path` (0700) if needed or tightens it, and takes its lock, or says clearly who
    /// holds it.
    pub fn open(path: &Path) -> Result<Self, Error> {
        create_private_dir(path)?;
        let lock_path = path.join("minik8s.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(FILE_MODE)
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

    /// Sets every directory below the data directory to 0700 and every file to 0600 where they
    /// are wider (symbolic links are not followed). Called once start-up has created the store,
    /// the credentials and the kubeconfig.
    pub fn restrict_contents(&self) -> Result<(), Error> {
        let mut dirs = vec![self.path.clone()];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir).map_err(permissions_err(&dir))?;
            for entry in entries {
                let entry = entry.map_err(permissions_err(&dir))?;
                let path = entry.path();
                // `DirEntry::metadata` does not follow links.
                let meta = entry.metadata().map_err(permissions_err(&path))?;
                let mode = if meta.is_dir() {
                    dirs.push(path.clone());
                    DIR_MODE
                } else if meta.is_file() {
                    FILE_MODE
                } else {
                    continue;
                };
                if meta.permissions().mode() & SHARED_BITS != 0 {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                        .map_err(permissions_err(&path))?;
                }
            }
        }
        Ok(())
    }
}

fn permissions_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Permissions {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `path` with mode 0700 (its parents as usual), or tightens an existing one to 0700 with a
/// WARN naming the old mode. The mode is set explicitly after creation, since the umask may have
/// taken owner bits away.
fn create_private_dir(path: &Path) -> Result<(), Error> {
    let create_err = |source| Error::Create {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::metadata(path) {
        Ok(meta) => {
            let old = meta.permissions().mode() & 0o7777;
            if old & SHARED_BITS != 0 {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE))
                    .map_err(permissions_err(path))?;
                tracing::warn!(
                    component = "minik8s",
                    path = %path.display(),
                    old_mode = %format_args!("{old:04o}"),
                    "data directory was open to other users; tightened to 0700"
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(create_err)?;
            }
            match std::fs::DirBuilder::new().mode(DIR_MODE).create(path) {
                Ok(()) => {}
                // Created meanwhile by someone else: tightened below all the same.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(create_err(e)),
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE))
                .map_err(permissions_err(path))
        }
        Err(e) => Err(create_err(e)),
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

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_dir_is_0700_and_its_lock_0600() {
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join("a").join("data");
        let dir = DataDir::open(&path).unwrap();
        assert_eq!(mode(&path), 0o700);
        assert_eq!(mode(&path.join("minik8s.lock")), 0o600);
        drop(dir);
    }

    #[test]
    fn a_wide_dir_and_its_contents_are_tightened() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("data");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let nested = path.join("store").join("blobs");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o777)).unwrap();
        let file = nested.join("1");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let dir = DataDir::open(&path).unwrap();
        assert_eq!(mode(&path), 0o700);
        dir.restrict_contents().unwrap();
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&file), 0o600);
    }
}
