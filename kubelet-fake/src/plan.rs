//! Stage selection: what the lifecycle configuration means for one particular pod.
//!
//! [`PodPlan::resolve`] applies a [`LifecycleConfig`] to a pod's spec: it samples every delay (a
//! pure function of the config seed and the pod UID, see [`crate::ids::unit_sample`]) and picks, for
//! each container, the first [`Rule`](crate::config::Rule) that selects it. The plan is cheap to
//! recompute, so the runtime keeps no per-pod copy: it re-resolves whenever it evaluates a pod, and
//! the answer is identical every time (also across kubelet restarts).

use std::time::Duration;

use crate::config::{
    parse_duration, Action, LifecycleConfig, EXIT_CODE_ANNOTATION, MAX_CONFIG_DURATION,
    RUN_FOR_ANNOTATION,
};
use crate::ids::unit_sample;
use crate::transform::{KubeletContainer, KubeletPod};

/// The pod's `spec.restartPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// Parses the spec field; absent or unknown means `Always`, the API default.
    pub fn from_spec(value: Option<&str>) -> Self {
        match value {
            Some("OnFailure") => Self::OnFailure,
            Some("Never") => Self::Never,
            _ => Self::Always,
        }
    }

    /// Whether a regular container that exited with `code` is restarted.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => code != 0,
            Self::Never => false,
        }
    }

    /// Whether an init container that exited with `code` is restarted (init containers are
    /// retried on failure unless the pod's policy is `Never`).
    pub fn restarts_init(self, code: i32) -> bool {
        code != 0 && self != Self::Never
    }
}

/// How one container behaves over time, offsets from its start.
#[derive(Clone, Debug, PartialEq)]
pub enum Behavior {
    /// Runs until the pod is deleted. Ready `ready_after` its start; not ready again from
    /// `not_ready_after`, if set.
    Run {
        ready_after: Duration,
        not_ready_after: Option<Duration>,
    },
    /// Exits with `exit_code` after `run_for`; restarted (with back-off) as the policy says. Ready
    /// `ready_after` after each start while running.
    Exit {
        run_for: Duration,
        exit_code: i32,
        ready_after: Duration,
    },
    /// The image never pulls.
    ImagePullError { message: Option<String> },
}

/// One container's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    pub behavior: Behavior,
    /// An init container with `restartPolicy: Always` (a sidecar): it starts in init order but
    /// keeps running, and the next init container starts once it has started.
    pub sidecar: bool,
    /// Name of the rule that chose the behaviour, for logs (`None`: the default lifecycle).
    pub rule: Option<String>,
}

/// The resolved lifecycle of one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodPlan {
    /// From the node accepting the pod to its sandbox being ready.
    pub sandbox_after: Duration,
    pub init_containers: Vec<ContainerPlan>,
    pub containers: Vec<ContainerPlan>,
    /// From seeing the `deletionTimestamp` to the containers having exited (before the cap to half
    /// the remaining grace period, which [`crate::pod_status`] applies).
    pub termination_delay: Duration,
    pub restart_policy: RestartPolicy,
    pub satisfy_readiness_gates: bool,
}

impl PodPlan {
    /// Applies `cfg` to `pod`.
    pub fn resolve(cfg: &LifecycleConfig, pod: &KubeletPod) -> Self {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = pod.metadata.labels.as_ref();
        let sample = |slot: &str| unit_sample(cfg.seed, uid, slot);
        let spec = pod.spec.as_ref();
        let restart_policy =
            RestartPolicy::from_spec(spec.and_then(|s| s.restart_policy.as_deref()));

        // The pod's own say (annotations), then the rules, then the default lifecycle.
        let annotations = pod.metadata.annotations.as_ref();
        let annotated_run_for = annotations
            .and_then(|a| a.get(RUN_FOR_ANNOTATION))
            .and_then(|d| parse_duration(d).ok())
            .filter(|d| *d <= MAX_CONFIG_DURATION);
        let annotated_exit_code = annotations
            .and_then(|a| a.get(EXIT_CODE_ANNOTATION))
            .and_then(|c| c.trim().parse::<i32>().ok());
        let annotated = (annotated_run_for.is_some() || annotated_exit_code.is_some()).then(|| {
            (
                annotated_run_for.unwrap_or(Duration::from_secs(1)),
                annotated_exit_code.unwrap_or(0),
            )
        });
        let plan_container = |c: &KubeletContainer, init: bool| -> ContainerPlan {
            let sidecar = init && c.restart_policy.as_deref() == Some("Always");
            let image = c.image.clone().unwrap_or_default();
            let ready_after = cfg
                .container_ready_delay
                .sample(sample(&format!("ready/{}", c.name)));
            let default = if init && !sidecar {
                Behavior::Exit {
                    run_for: cfg
                        .init_container_duration
                        .sample(sample(&format!("init/{}", c.name))),
                    exit_code: 0,
                    ready_after,
                }
            } else if !init && restart_policy != RestartPolicy::Always {
                Behavior::Exit {
                    run_for: cfg
                        .completion_duration
                        .sample(sample(&format!("complete/{}", c.name))),
                    exit_code: 0,
                    ready_after,
                }
            } else {
                Behavior::Run {
                    ready_after,
                    not_ready_after: None,
                }
            };
            if let (false, Some((run_for, exit_code))) = (init, annotated) {
                return ContainerPlan {
                    name: c.name.clone(),
                    image,
                    behavior: Behavior::Exit {
                        run_for,
                        exit_code,
                        ready_after,
                    },
                    sidecar,
                    rule: Some("annotations".to_string()),
                };
            }
            let rule = cfg.rules.iter().find(|r| {
                r.selector.matches_pod(namespace, labels)
                    && r.selector.matches_container(&image, init)
            });
            let behavior = match rule.map(|r| &r.action) {
                None => default,
                Some(Action::ImagePullError(e)) => Behavior::ImagePullError {
                    message: e.message.clone(),
                },
                Some(Action::CrashLoop(c)) => Behavior::Exit {
                    run_for: c.run_for,
                    exit_code: c.exit_code,
                    ready_after,
                },
                Some(Action::Complete(c)) => Behavior::Exit {
                    run_for: c.after,
                    exit_code: c.effective_exit_code(),
                    ready_after,
                },
                // A one-shot init container has no readiness to lose.
                Some(Action::NotReady(_)) if init && !sidecar => default,
                Some(Action::NotReady(n)) => Behavior::Run {
                    ready_after,
                    not_ready_after: Some(n.after),
                },
            };
            ContainerPlan {
                name: c.name.clone(),
                image,
                behavior,
                sidecar,
                rule: rule.map(|r| r.name.clone()),
            }
        };

        Self {
            sandbox_after: cfg.pod_start_delay.sample(sample("sandbox")),
            init_containers: spec
                .and_then(|s| s.init_containers.as_ref())
                .map(|cs| cs.iter().map(|c| plan_container(c, true)).collect())
                .unwrap_or_default(),
            containers: spec
                .map(|s| {
                    s.containers
                        .iter()
                        .map(|c| plan_container(c, false))
                        .collect()
                })
                .unwrap_or_default(),
            termination_delay: cfg.termination_delay.sample(sample("termination")),
            restart_policy,
            satisfy_readiness_gates: cfg.satisfy_readiness_gates,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CrashLoop, Delay};
    use crate::Result;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> KubeletPod {
        match serde_json::from_value(v) {
            Ok(p) => p,
            Err(e) => panic!("bad pod: {e}"),
        }
    }

    fn web_pod(uid: &str) -> KubeletPod {
        pod(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": uid, "labels": {"app": "web"}},
            "spec": {
                "initContainers": [
                    {"name": "setup", "image": "busybox"},
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
                ],
                "containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "log", "image": "fluentd"}]
            }
        }))
    }

    #[test]
    fn default_plan_runs_everything() {
        let cfg = LifecycleConfig::default();
        let plan = PodPlan::resolve(&cfg, &web_pod("u1"));
        assert_eq!(plan.restart_policy, RestartPolicy::Always);
        assert!(plan.sandbox_after >= Duration::from_millis(100));
        assert!(plan.sandbox_after < Duration::from_millis(300));
        assert_eq!(plan.init_containers.len(), 2);
        assert!(matches!(
            plan.init_containers[0].behavior,
            Behavior::Exit { exit_code: 0, run_for, .. } if run_for == Duration::from_millis(200)
        ));
        assert!(plan.init_containers[1].sidecar);
        assert!(matches!(
            plan.init_containers[1].behavior,
            Behavior::Run {
                not_ready_after: None,
                ..
            }
        ));
        assert_eq!(plan.containers.len(), 2);
        assert!(plan.containers.iter().all(|c| c.rule.is_none()));
    }

    #[test]
    fn jitter_is_a_pure_function_of_seed_and_uid() {
        let cfg = LifecycleConfig {
            pod_start_delay: Delay {
                delay: Duration::ZERO,
                jitter: Duration::from_secs(10),
            },
            ..LifecycleConfig::default()
        };
        let a = PodPlan::resolve(&cfg, &web_pod("u1"));
        assert_eq!(a, PodPlan::resolve(&cfg, &web_pod("u1")));
        let others: Vec<Duration> = (0..20)
            .map(|i| PodPlan::resolve(&cfg, &web_pod(&format!("u{i}"))).sandbox_after)
            .collect();
        assert!(others.windows(2).any(|w| w[0] != w[1]));
        let reseeded = LifecycleConfig { seed: 9, ..cfg };
        assert_ne!(
            a.sandbox_after,
            PodPlan::resolve(&reseeded, &web_pod("u1")).sandbox_after
        );
    }

    #[test]
    fn first_matching_rule_wins_per_container() -> Result<()> {
        let cfg = LifecycleConfig::from_yaml(
            r#"
rules:
  - name: broken-fluentd
    match: {image: "fluentd*"}
    imagePullError: {message: "nope"}
  - name: crashy-web
    match: {labels: {app: web}}
    crashLoop: {runFor: 3s}
  - name: never-reached
    match: {labels: {app: web}}
    notReady: {after: 1s}
  - name: bad-setup
    match: {image: busybox}
    complete: {after: 2s, phase: Failed}
"#,
        )?;
        let plan = PodPlan::resolve(&cfg, &web_pod("u1"));
        let app = &plan.containers[0];
        assert_eq!(app.rule.as_deref(), Some("crashy-web"));
        assert!(matches!(
            app.behavior,
            Behavior::Exit { exit_code: 1, run_for, .. } if run_for == Duration::from_secs(3)
        ));
        let log = &plan.containers[1];
        assert_eq!(log.rule.as_deref(), Some("broken-fluentd"));
        assert_eq!(
            log.behavior,
            Behavior::ImagePullError {
                message: Some("nope".into())
            }
        );
        // Label-only rules do not touch init containers; image rules do.
        assert_eq!(plan.init_containers[0].rule.as_deref(), Some("bad-setup"));
        assert!(matches!(
            plan.init_containers[0].behavior,
            Behavior::Exit { exit_code: 1, .. }
        ));
        assert_eq!(plan.init_containers[1].rule, None);
        Ok(())
    }

    #[test]
    fn rules_respect_namespace_and_labels() {
        let cfg = LifecycleConfig {
            rules: vec![crate::config::Rule {
                name: "other-ns".into(),
                selector: crate::config::Match {
                    namespace: Some("prod".into()),
                    ..Default::default()
                },
                action: Action::CrashLoop(CrashLoop {
                    run_for: Duration::from_secs(1),
                    exit_code: 1,
                }),
            }],
            ..LifecycleConfig::default()
        };
        let plan = PodPlan::resolve(&cfg, &web_pod("u1"));
        assert!(plan.containers.iter().all(|c| c.rule.is_none()));
    }

    #[test]
    fn restart_policies() {
        assert_eq!(RestartPolicy::from_spec(None), RestartPolicy::Always);
        assert_eq!(
            RestartPolicy::from_spec(Some("Never")),
            RestartPolicy::Never
        );
        assert!(RestartPolicy::Always.restarts(0));
        assert!(!RestartPolicy::OnFailure.restarts(0));
        assert!(RestartPolicy::OnFailure.restarts(2));
        assert!(!RestartPolicy::Never.restarts(2));
        assert!(RestartPolicy::Always.restarts_init(1));
        assert!(!RestartPolicy::Always.restarts_init(0));
        assert!(!RestartPolicy::Never.restarts_init(1));
    }
}
