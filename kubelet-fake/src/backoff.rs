//! The kubelet's restart and image-pull back-off, as pure functions of time.
//!
//! Constants are the kubelet's (`pkg/kubelet/kubelet.go`: `backOffPeriod = 10 * time.Second`,
//! `MaxContainerBackOff = 300 * time.Second`; both the crash-loop and the image-pull back-off are a
//! `flowcontrol.Backoff(backOffPeriod, MaxContainerBackOff)`). The semantics follow client-go's
//! `util/flowcontrol.Backoff` as the kubelet drives it (`kuberuntime_manager.go` `doBackOff`):
//!
//! * on a container exit, if the container has no back-off entry (or the exit is more than
//!   `2 × max` after the entry's last update, the restart: `hasExpired` treats it as gone) the
//!   kubelet restarts it at once and records a 10 s entry (`Next`);
//! * otherwise it waits until `finishedAt + entry` and then doubles the entry (capped at 5 min).
//!
//! So a container that always crashes is restarted immediately once, then after 10 s, 20 s, 40 s,
//! … 300 s, 300 s. [`RestartTimeline::at`] computes where such a container is at any instant in
//! O(number of cycles until back-off saturates), jumping over saturated periods arithmetically.

use std::time::Duration;

/// `backOffPeriod` in `pkg/kubelet/kubelet.go`: the first back-off step.
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// `MaxContainerBackOff` in `pkg/kubelet/kubelet.go`: the back-off cap.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// `flowcontrol.Backoff.hasExpired`: an entry untouched for `2 × max` is forgotten.
pub const BACKOFF_EXPIRY: Duration = Duration::from_secs(600);

/// A container that runs for `run_for` and then exits, over and over, restarted with back-off.
/// Times are offsets from the first start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartTimeline {
    /// How long each run lasts.
    pub run_for: Duration,
    /// Whether the kubelet restarts the container after it exits (`restartPolicy` and exit code).
    pub restarts: bool,
}

/// Where a [`RestartTimeline`] container is at some instant. Offsets are from the first start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    /// Running since `started`, after `restart_count` restarts. `previous` is the last run, if any.
    Running {
        started: Duration,
        restart_count: i32,
        previous: Option<Run>,
    },
    /// Exited (`last`) and waiting in back-off until `restart_at`; the message's back-off is
    /// `backoff`.
    BackOff {
        last: Run,
        restart_count: i32,
        restart_at: Duration,
        backoff: Duration,
    },
    /// Exited and never restarted (`restarts == false`).
    Exited { last: Run, restart_count: i32 },
}

/// One finished run: `[started, finished)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub started: Duration,
    pub finished: Duration,
}

impl RunState {
    /// The next offset at which the state changes, if it ever does.
    pub fn next_change(&self, run_for: Duration) -> Option<Duration> {
        match self {
            RunState::Running { started, .. } => Some(*started + run_for),
            RunState::BackOff { restart_at, .. } => Some(*restart_at),
            RunState::Exited { .. } => None,
        }
    }
}

impl RestartTimeline {
    /// The state at offset `t` from the first start.
    pub fn at(&self, t: Duration) -> RunState {
        let mut started = Duration::ZERO;
        let mut restart_count: i32 = 0;
        let mut previous: Option<Run> = None;
        // The flowcontrol entry: (current back-off, lastUpdate).
        let mut entry: Option<(Duration, Duration)> = None;
        loop {
            let finished = started + self.run_for;
            if t < finished {
                return RunState::Running {
                    started,
                    restart_count,
                    previous,
                };
            }
            let last = Run { started, finished };
            if !self.restarts {
                return RunState::Exited {
                    last,
                    restart_count,
                };
            }
            // doBackOff: IsInBackOffSince(key, finishedAt) is false without a live entry.
            let live = entry.filter(|(_, last_update)| finished - *last_update <= BACKOFF_EXPIRY);
            let (restart_at, next_entry) = match live {
                None => (finished, BACKOFF_INITIAL),
                Some((backoff, _)) => (finished + backoff, (backoff * 2).min(BACKOFF_MAX)),
            };
            if t < restart_at {
                let backoff = live.map(|(b, _)| b).unwrap_or(BACKOFF_INITIAL);
                return RunState::BackOff {
                    last,
                    restart_count,
                    restart_at,
                    backoff,
                };
            }
            // Saturated: every further cycle is run_for + max long with the same entry, so skip
            // whole cycles arithmetically (keeping one to rebuild `previous`).
            if let Some((backoff, _)) = live {
                if backoff == BACKOFF_MAX && next_entry == BACKOFF_MAX {
                    let period = self.run_for + BACKOFF_MAX;
                    let elapsed = t - restart_at;
                    let skip = (elapsed.as_nanos() / period.as_nanos().max(1)).saturating_sub(1);
                    if skip > 0 {
                        let skip32 = u32::try_from(skip).unwrap_or(u32::MAX);
                        let jump = period * skip32;
                        let new_start = restart_at + jump;
                        restart_count = restart_count.saturating_add(
                            i32::try_from(skip32).unwrap_or(i32::MAX).saturating_add(1),
                        );
                        previous = Some(Run {
                            started: new_start - period,
                            finished: new_start - BACKOFF_MAX,
                        });
                        entry = Some((BACKOFF_MAX, new_start));
                        started = new_start;
                        continue;
                    }
                }
            }
            // flowcontrol.Next stamps lastUpdate with the clock, i.e. the restart instant.
            entry = Some((next_entry, restart_at));
            previous = Some(last);
            restart_count = restart_count.saturating_add(1);
            started = restart_at;
        }
    }
}

/// The image-pull back-off: pull attempts at offsets 0, then after 10 s, 20 s, … 300 s. Returns
/// `(attempt number, attempt offset, next attempt offset)` for offset `t`.
pub fn image_pull_attempt(t: Duration) -> (u32, Duration, Duration) {
    let mut attempt = 0u32;
    let mut at = Duration::ZERO;
    let mut backoff = BACKOFF_INITIAL;
    loop {
        if backoff == BACKOFF_MAX {
            // Saturated: attempts are evenly spaced from here on.
            let n = (t.saturating_sub(at)).as_nanos() / BACKOFF_MAX.as_nanos();
            let n32 = u32::try_from(n).unwrap_or(u32::MAX);
            let at = at + BACKOFF_MAX * n32;
            return (attempt.saturating_add(n32), at, at + BACKOFF_MAX);
        }
        let next = at + backoff;
        if t < next {
            return (attempt, at, next);
        }
        at = next;
        attempt += 1;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn crash(run_for: u64) -> RestartTimeline {
        RestartTimeline {
            run_for: S(run_for),
            restarts: true,
        }
    }

    /// The offsets at which restarts happen, for the first `n` restarts.
    fn restart_offsets(tl: RestartTimeline, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let mut t = Duration::ZERO;
        while out.len() < n {
            match tl.at(t) {
                RunState::Running { started, .. }
                    if started > Duration::ZERO && out.last() != Some(&started.as_secs()) =>
                {
                    out.push(started.as_secs());
                }
                _ => {}
            }
            t += Duration::from_millis(500);
        }
        out
    }

    #[test]
    fn crash_loop_backoff_doubles_to_five_minutes() {
        // run 1 s: exits at 1, restarts at once; exits at 2, waits 10 s; exits at 13, waits 20 s...
        let offsets = restart_offsets(crash(1), 9);
        assert_eq!(offsets, vec![1, 12, 33, 74, 155, 316, 617, 918, 1219]);
        let gaps: Vec<u64> = offsets
            .windows(2)
            .map(|w| w[1] - w[0] - 1) // minus the 1 s run
            .collect();
        assert_eq!(gaps, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn states_carry_restart_counts_and_previous_runs() {
        let tl = crash(1);
        assert_eq!(
            tl.at(Duration::from_millis(500)),
            RunState::Running {
                started: S(0),
                restart_count: 0,
                previous: None
            }
        );
        assert_eq!(
            tl.at(Duration::from_millis(1500)),
            RunState::Running {
                started: S(1),
                restart_count: 1,
                previous: Some(Run {
                    started: S(0),
                    finished: S(1)
                })
            }
        );
        assert_eq!(
            tl.at(S(5)),
            RunState::BackOff {
                last: Run {
                    started: S(1),
                    finished: S(2)
                },
                restart_count: 1,
                restart_at: S(12),
                backoff: S(10)
            }
        );
        assert_eq!(tl.at(S(5)).next_change(tl.run_for), Some(S(12)));
    }

    #[test]
    fn saturated_jump_matches_stepwise_simulation() {
        let tl = crash(7);
        // Walk the timeline cycle by cycle and compare with direct evaluation far in the future.
        let t = S(86_400 * 3 + 123);
        let direct = tl.at(t);
        let mut stepped = tl.at(Duration::ZERO);
        let mut probe = Duration::ZERO;
        while let Some(next) = stepped.next_change(tl.run_for) {
            if next > t {
                break;
            }
            probe = next;
            stepped = tl.at(probe);
        }
        assert!(probe <= t);
        let (RunState::Running {
            restart_count: a, ..
        }
        | RunState::BackOff {
            restart_count: a, ..
        }) = direct
        else {
            panic!("unexpected {direct:?}");
        };
        let (RunState::Running {
            restart_count: b, ..
        }
        | RunState::BackOff {
            restart_count: b, ..
        }) = stepped
        else {
            panic!("unexpected {stepped:?}");
        };
        assert_eq!(a, b);
        assert!(a > 800, "three days of 5 min back-offs: {a}");
    }

    #[test]
    fn long_runs_expire_the_backoff_entry() {
        // A run longer than 2 x max forgets the entry: every restart is immediate.
        let tl = crash(700);
        assert!(matches!(
            tl.at(S(700 * 3 + 1)),
            RunState::Running {
                restart_count: 3,
                ..
            }
        ));
    }

    #[test]
    fn non_restarting_container_stays_exited() {
        let tl = RestartTimeline {
            run_for: S(10),
            restarts: false,
        };
        assert!(matches!(tl.at(S(9)), RunState::Running { .. }));
        assert_eq!(
            tl.at(S(1000)),
            RunState::Exited {
                last: Run {
                    started: S(0),
                    finished: S(10)
                },
                restart_count: 0
            }
        );
        assert_eq!(tl.at(S(1000)).next_change(tl.run_for), None);
    }

    #[test]
    fn image_pull_attempts_back_off() {
        assert_eq!(image_pull_attempt(S(0)), (0, S(0), S(10)));
        assert_eq!(image_pull_attempt(S(9)), (0, S(0), S(10)));
        assert_eq!(image_pull_attempt(S(10)), (1, S(10), S(30)));
        assert_eq!(image_pull_attempt(S(30)), (2, S(30), S(70)));
        // 10+20+40+80+160 = 310, then every 300 s.
        assert_eq!(image_pull_attempt(S(310)), (5, S(310), S(610)));
        assert_eq!(image_pull_attempt(S(700)), (6, S(610), S(910)));
        assert_eq!(image_pull_attempt(S(1000)), (7, S(910), S(1210)));
        assert_eq!(
            image_pull_attempt(S(1000)).2 - image_pull_attempt(S(1000)).1,
            S(300)
        );
    }
}
