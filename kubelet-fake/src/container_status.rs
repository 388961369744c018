//! Container statuses: where one container is at an instant, as the kubelet reports it.
//!
//! [`Ctx::container`] evaluates a [`ContainerPlan`] started at some offset: running (with
//! `startedAt`, `containerID` per instance, normalized `image` and `imageID`), waiting
//! (`ContainerCreating`, `PodInitializing`, `ErrImagePull`/`ImagePullBackOff`,
//! `CrashLoopBackOff` with the kubelet's message) or terminated (`Completed`/`Error`), plus when
//! its readiness last changed and when it will next change. [`terminate_for_deletion`] is the
//! overlay of a graceful deletion. Pure functions; all times are whole seconds.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::backoff::{image_pull_attempt, RestartTimeline, Run, RunState};
use crate::config::format_go_duration;
use crate::ids::{container_id, ImageRef};
use crate::plan::{Behavior, ContainerPlan, RestartPolicy};
use crate::pod_status::{add, api_time};

/// How long `ErrImagePull` is shown after a failed pull before the next sync reports
/// `ImagePullBackOff` (the kubelet resyncs a pod in error within about a second).
pub const ERR_IMAGE_PULL_VISIBLE: Duration = Duration::from_secs(1);

/// What a container evaluation found, beyond the API status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Waiting and never ran (image pull, ContainerCreating, PodInitializing).
    Waiting,
    /// Waiting in back-off after at least one run.
    BackOff,
    Running,
    Terminated(i32),
}

pub(crate) struct ContainerEval {
    pub(crate) status: ContainerStatus,
    pub(crate) kind: Kind,
    /// When `ready` last changed, offset from acceptance.
    pub(crate) ready_changed: Duration,
    pub(crate) next: Option<Duration>,
}

/// Identity of the pod for kubelet-style messages: `name_namespace(uid)`.
pub(crate) struct PodRef<'a> {
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) uid: &'a str,
}

pub(crate) struct Ctx<'a> {
    pub(crate) pod: PodRef<'a>,
    pub(crate) accepted: Timestamp,
    pub(crate) policy: RestartPolicy,
}

impl Ctx<'_> {
    pub(crate) fn time(&self, offset: Duration) -> Time {
        api_time(add(self.accepted, offset))
    }

    pub(crate) fn waiting(
        &self,
        c: &ContainerPlan,
        reason: &str,
        message: Option<String>,
    ) -> ContainerEval {
        ContainerEval {
            status: ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone(),
                image_id: String::new(),
                ready: false,
                started: Some(false),
                restart_count: 0,
                state: Some(ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(reason.to_string()),
                        message,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            kind: Kind::Waiting,
            ready_changed: Duration::ZERO,
            next: None,
        }
    }

    fn terminated_state(
        &self,
        c: &ContainerPlan,
        run: Run,
        start: Duration,
        restart: i32,
        code: i32,
    ) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(container_id(self.pod.uid, &c.name, restart)),
                exit_code: code,
                reason: Some(if code == 0 { "Completed" } else { "Error" }.to_string()),
                started_at: Some(self.time(start + run.started)),
                finished_at: Some(self.time(start + run.finished)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pulled(
        &self,
        c: &ContainerPlan,
        restart_count: i32,
        cid: Option<String>,
    ) -> ContainerStatus {
        let image = ImageRef::parse(&c.image);
        ContainerStatus {
            name: c.name.clone(),
            image: image.status_image(),
            image_id: image.image_id(),
            container_id: cid,
            restart_count,
            ..Default::default()
        }
    }

    /// A container that runs until deleted.
    fn run(
        &self,
        c: &ContainerPlan,
        start: Duration,
        t: Duration,
        ready_after: Duration,
        not_ready_after: Option<Duration>,
    ) -> ContainerEval {
        let ready_at = start + ready_after;
        let unready_at = not_ready_after.map(|d| start + d);
        let ready = t >= ready_at && unready_at.is_none_or(|u| t < u);
        let (ready_changed, next) = match unready_at {
            Some(u) if t >= u => (u.max(start), None),
            Some(u) if t >= ready_at => (ready_at, Some(u)),
            Some(u) => (start, Some(u.min(ready_at))),
            None if t >= ready_at => (ready_at, None),
            None => (start, Some(ready_at)),
        };
        let mut status = self.pulled(c, 0, Some(container_id(self.pod.uid, &c.name, 0)));
        status.ready = ready;
        status.started = Some(true);
        status.state = Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(self.time(start)),
            }),
            ..Default::default()
        });
        ContainerEval {
            status,
            kind: Kind::Running,
            ready_changed,
            next,
        }
    }

    /// A container that exits after `run_for` and may be restarted with back-off.
    fn exit(
        &self,
        c: &ContainerPlan,
        start: Duration,
        t: Duration,
        timeline: RestartTimeline,
        code: i32,
        ready_after: Duration,
    ) -> ContainerEval {
        let run_for = timeline.run_for;
        let state = timeline.at(t.saturating_sub(start));
        let next = state.next_change(run_for).map(|n| start + n);
        match state {
            RunState::Running {
                started,
                restart_count,
                previous,
            } => {
                let cid = container_id(self.pod.uid, &c.name, restart_count);
                let mut status = self.pulled(c, restart_count, Some(cid));
                let ready_at = start + started + ready_after;
                let ready = t >= ready_at && ready_after < run_for;
                status.ready = ready;
                status.started = Some(true);
                status.state = Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(self.time(start + started)),
                    }),
                    ..Default::default()
                });
                status.last_state = previous
                    .map(|run| self.terminated_state(c, run, start, restart_count - 1, code));
                let next = if !ready && ready_after < run_for {
                    Some(ready_at)
                } else {
                    next
                };
                ContainerEval {
                    status,
                    kind: Kind::Running,
                    ready_changed: if ready { ready_at } else { start + started },
                    next,
                }
            }
            RunState::BackOff {
                last,
                restart_count,
                backoff,
                ..
            } => {
                let cid = container_id(self.pod.uid, &c.name, restart_count);
                let mut status = self.pulled(c, restart_count, Some(cid));
                status.started = Some(false);
                status.state = Some(ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some("CrashLoopBackOff".to_string()),
                        message: Some(format!(
                            "back-off {} restarting failed container={} pod={}_{}({})",
                            format_go_duration(backoff),
                            c.name,
                            self.pod.name,
                            self.pod.namespace,
                            self.pod.uid
                        )),
                    }),
                    ..Default::default()
                });
                status.last_state =
                    Some(self.terminated_state(c, last, start, restart_count, code));
                ContainerEval {
                    status,
                    kind: Kind::BackOff,
                    ready_changed: start + last.finished,
                    next,
                }
            }
            RunState::Exited {
                last,
                restart_count,
            } => {
                let cid = container_id(self.pod.uid, &c.name, restart_count);
                let mut status = self.pulled(c, restart_count, Some(cid));
                status.started = Some(false);
                status.state = Some(self.terminated_state(c, last, start, restart_count, code));
                ContainerEval {
                    status,
                    kind: Kind::Terminated(code),
                    ready_changed: start + last.finished,
                    next: None,
                }
            }
        }
    }

    /// A container whose image never pulls.
    fn image_pull_error(
        &self,
        c: &ContainerPlan,
        start: Duration,
        t: Duration,
        message: Option<&str>,
    ) -> ContainerEval {
        let offset = t.saturating_sub(start);
        let (_, attempt_at, next_attempt) = image_pull_attempt(offset);
        let image = ImageRef::parse(&c.image).status_image();
        let (reason, msg, next) = if offset < attempt_at + ERR_IMAGE_PULL_VISIBLE {
            let msg = message.map(str::to_string).unwrap_or_else(|| {
                format!(
                    "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": \
                     failed to resolve reference \"{image}\": {image}: not found"
                )
            });
            (
                "ErrImagePull",
                msg,
                start + attempt_at + ERR_IMAGE_PULL_VISIBLE,
            )
        } else {
            (
                "ImagePullBackOff",
                format!("Back-off pulling image \"{}\"", c.image),
                start + next_attempt,
            )
        };
        let mut e = self.waiting(c, reason, Some(msg));
        e.ready_changed = start;
        e.next = Some(next);
        e
    }

    pub(crate) fn container(
        &self,
        c: &ContainerPlan,
        start: Duration,
        t: Duration,
        init: bool,
    ) -> ContainerEval {
        match &c.behavior {
            Behavior::Run {
                ready_after,
                not_ready_after,
            } => self.run(c, start, t, *ready_after, *not_ready_after),
            Behavior::Exit {
                run_for,
                exit_code,
                ready_after,
            } => {
                let restarts = if init {
                    self.policy.restarts_init(*exit_code)
                } else {
                    self.policy.restarts(*exit_code)
                };
                let timeline = RestartTimeline {
                    run_for: *run_for,
                    restarts,
                };
                self.exit(c, start, t, timeline, *exit_code, *ready_after)
            }
            Behavior::ImagePullError { message } => {
                self.image_pull_error(c, start, t, message.as_deref())
            }
        }
    }
}

/// Marks every container of a pod being deleted as exited at `at` (offset).
pub(crate) fn terminate_for_deletion(ctx: &Ctx<'_>, e: &mut ContainerEval, at: Duration) {
    let state = e.status.state.take().unwrap_or_default();
    let new_state = if let Some(running) = state.running {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: e.status.container_id.clone(),
                exit_code: 0,
                reason: Some("Completed".to_string()),
                started_at: running.started_at,
                finished_at: Some(ctx.time(at)),
                ..Default::default()
            }),
            ..Default::default()
        }
    } else if state.terminated.is_some() {
        state
    } else if let Some(last) = e
        .status
        .last_state
        .as_ref()
        .filter(|l| l.terminated.is_some())
    {
        // In back-off: the last instance is what remains.
        last.clone()
    } else {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("ContainerStatusUnknown".to_string()),
                message: Some(
                    "The container could not be located when the pod was terminated".to_string(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let code = new_state.terminated.as_ref().map_or(0, |t| t.exit_code);
    e.status.state = Some(new_state);
    e.status.ready = false;
    e.status.started = Some(false);
    e.kind = Kind::Terminated(code);
    e.ready_changed = at;
    e.next = None;
}
