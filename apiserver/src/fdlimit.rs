//! The process's file-descriptor limit, raised at start-up, and the connection bound sized from it.
//!
//! Every open connection costs the server one file descriptor, and so do the store's files, the
//! webhook and conversion clients' connections and, inside `minik8s up`, the controller manager's
//! and the fake kubelets' client connections. A kube-apiserver has no connection cap: it serves as
//! many connections as the process may open, and service managers run it with a high
//! `LimitNOFILE`. Here the soft `RLIMIT_NOFILE` is raised to the hard limit once per process
//! ([`raise`]), the result is logged and exported as `process_max_fds`, and the only connection
//! bound left ([`connection_bound`]) is the limit minus a reserve for those other descriptors: it
//! exists so that a flood of connections makes the accept loop wait (excess connections stay in the
//! kernel backlog) instead of taking the descriptors the store needs to write, and it is reached
//! only when the descriptors would have run out anyway. Ordinary watches and stalled clients (the
//! latter closed by the header and body deadlines) cannot fill it before the fd limit does.
//!
//! Guarantees: [`raise`] never lowers a limit, runs its system calls once per process, and never
//! fails (a refused raise keeps the old limit with a WARN line).

use std::sync::OnceLock;

use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};

/// Descriptors kept out of the connection bound at the least (store files, logs, outgoing clients).
pub const MIN_RESERVE: u64 = 64;

/// The ceiling used when the hard limit is unlimited and the kernel's `nr_open` cannot be read
/// (Linux's default `nr_open`).
const FALLBACK_CEILING: u64 = 1 << 20;

static LIMIT: OnceLock<u64> = OnceLock::new();

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (once per process) and returns the soft
/// limit in force afterwards.
pub fn raise() -> u64 {
    *LIMIT.get_or_init(raise_once)
}

/// The soft limit in force, if [`raise`] ran; otherwise read now without changing it.
pub fn current() -> u64 {
    LIMIT.get().copied().unwrap_or_else(|| {
        getrlimit(Resource::RLIMIT_NOFILE)
            .map(|(soft, _)| soft)
            .unwrap_or(0)
    })
}

/// The limit assumed when it cannot be read (Linux's usual default soft limit).
const FALLBACK_LIMIT: u64 = 1024;

fn raise_once() -> u64 {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => {
            // Unknown: assume the common default soft limit rather than 0 (which would bound the
            // server to one connection).
            tracing::warn!(error = %e, assumed = FALLBACK_LIMIT, "reading the file descriptor limit failed");
            return FALLBACK_LIMIT;
        }
    };
    let target = target_limit(hard, kernel_ceiling());
    if target <= soft {
        tracing::info!(limit = soft, "file descriptor limit");
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        Ok(()) => {
            tracing::info!(
                limit = target,
                previous = soft,
                "raised the file descriptor limit"
            );
            target
        }
        Err(e) => {
            tracing::warn!(error = %e, limit = soft, wanted = target,
                "raising the file descriptor limit failed; keeping the current limit");
            soft
        }
    }
}

/// The soft limit to ask for: the hard limit, or the kernel's ceiling when the hard limit is
/// unlimited (the kernel refuses an unlimited soft `RLIMIT_NOFILE`).
pub fn target_limit(hard: u64, ceiling: u64) -> u64 {
    if hard == RLIM_INFINITY {
        ceiling
    } else {
        hard
    }
}

/// The kernel's per-process ceiling (`/proc/sys/fs/nr_open` on Linux; `OPEN_MAX` on macOS).
fn kernel_ceiling() -> u64 {
    if cfg!(target_os = "macos") {
        return 10_240;
    }
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(FALLBACK_CEILING)
}

/// Connections served at once with `limit` descriptors: the limit less a reserve of a tenth
/// (at least [`MIN_RESERVE`]) for everything else the process opens; at least one.
pub fn connection_bound(limit: u64) -> usize {
    let reserve = (limit / 10).max(MIN_RESERVE);
    usize::try_from(limit.saturating_sub(reserve).max(1)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_keeps_a_reserve_and_scales_with_the_limit() {
        assert_eq!(connection_bound(20_000), 18_000);
        assert_eq!(connection_bound(1_048_576), 943_719);
        // Small limits keep the minimum reserve; a tiny one still serves.
        assert_eq!(connection_bound(1024), 922);
        assert_eq!(connection_bound(500), 436);
        assert_eq!(connection_bound(10), 1);
    }

    #[test]
    fn an_unlimited_hard_limit_asks_for_the_kernel_ceiling() {
        assert_eq!(target_limit(RLIM_INFINITY, 1 << 20), 1 << 20);
        assert_eq!(target_limit(524_288, 1 << 20), 524_288);
    }

    #[test]
    fn raise_never_lowers_and_is_idempotent() {
        let before = getrlimit(Resource::RLIMIT_NOFILE).map(|(s, _)| s).unwrap();
        let after = raise();
        assert!(after >= before);
        assert_eq!(raise(), after);
        assert_eq!(current(), after);
        let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(soft, after);
    }
}
