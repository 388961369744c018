//! Lifecycle configuration: how simulated pods behave, as data rather than code (kwok's `Stage`s).
//!
//! A [`LifecycleConfig`] is read from YAML (every field optional, defaults below) and validated once.
//! It holds the delays of the default lifecycle (each a base plus a uniform jitter) and an ordered
//! list of [`Rule`]s. For every container of a pod the **first** rule whose [`Match`] selects it
//! decides how that container behaves; containers no rule selects follow the default lifecycle
//! (start, become ready, run forever). A rule with an `image` pattern can select init and regular
//! containers; a rule without one selects the regular containers of the pods it matches.
//!
//! ```yaml
//! podStartDelay: {delay: 100ms, jitter: 200ms}   # bound -> sandbox ready (podIP assigned)
//! initContainerDuration: 200ms                   # each init container runs this long
//! completionDuration: 1s                         # containers of Never/OnFailure pods exit 0 after this
//! containerReadyDelay: 0s                        # started -> Ready (a passing readiness probe)
//! terminationDelay: {delay: 100ms, jitter: 100ms} # deletionTimestamp seen -> containers exited
//! satisfyReadinessGates: false                   # set readiness-gate conditions True ourselves
//! seed: 0                                        # jitter is a pure function of (seed, pod UID)
//! rules:
//!   - name: bad-image
//!     match: {image: "*:does-not-exist"}
//!     imagePullError: {}
//!   - name: crashy
//!     match: {labels: {app: crashy}}
//!     crashLoop: {runFor: 5s, exitCode: 1}
//!   - name: flaky
//!     match: {labels: {app: flaky}}
//!     notReady: {after: 30s}
//!   - name: job
//!     match: {labels: {job: "true"}}
//!     complete: {after: 10s, phase: Succeeded}
//! ```
//!
//! Per pod, the annotations [`RUN_FOR_ANNOTATION`] (a duration) and [`EXIT_CODE_ANNOTATION`] (an
//! integer) override both: every regular container of the pod exits with that code after that long
//! (either one alone keeps the other's default: 1 s, exit 0), restarted as its `restartPolicy` says.
//!
//! Durations are written like Go's `time.ParseDuration` (`1m30s`, `250ms`, `2h`); a bare number is
//! seconds. Guarantee: a config that passes [`LifecycleConfig::validate`] can be evaluated for any
//! pod without error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Error, Result};

/// Pod annotation: how long each regular container runs before it exits (a duration, `30s`).
pub const RUN_FOR_ANNOTATION: &str = "kubelet-fake.minik8s.io/run-for";
/// Pod annotation: the exit code each regular container exits with (`0`, `1`, …).
pub const EXIT_CODE_ANNOTATION: &str = "kubelet-fake.minik8s.io/exit-code";

/// The longest duration a configuration may contain.
pub const MAX_CONFIG_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A delay: `delay` plus a uniformly distributed extra in `[0, jitter)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delay {
    pub delay: Duration,
    pub jitter: Duration,
}

impl Delay {
    /// A fixed delay without jitter.
    pub const fn fixed(delay: Duration) -> Self {
        Self {
            delay,
            jitter: Duration::ZERO,
        }
    }

    /// The delay for a sample `u` in `[0, 1)` (the caller derives `u` deterministically).
    pub fn sample(&self, u: f64) -> Duration {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.delay + self.jitter.mul_f64(u)
    }
}

/// The whole lifecycle configuration. See the module docs for the YAML form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LifecycleConfig {
    /// From the moment a node sees a pod bound to it to the sandbox being ready (podIP assigned).
    #[serde(with = "delay_serde")]
    pub pod_start_delay: Delay,
    /// How long each init container runs before it exits 0.
    #[serde(with = "delay_serde")]
    pub init_container_duration: Delay,
    /// How long a regular container of a pod with `restartPolicy: Never` or `OnFailure` runs before
    /// it exits 0 (kwok's `pod-complete` stage): such pods are run-to-completion work (Jobs) and
    /// end `Succeeded`. Containers of `Always` pods run until the pod is deleted.
    #[serde(with = "delay_serde")]
    pub completion_duration: Delay,
    /// From a container starting to it being Ready (the first passing readiness probe).
    #[serde(with = "delay_serde")]
    pub container_ready_delay: Delay,
    /// From a `deletionTimestamp` being seen to the containers having exited. Always capped to half
    /// of the pod's remaining grace period, so that the final delete lands within it.
    #[serde(with = "delay_serde")]
    pub termination_delay: Delay,
    /// Set the pod's readiness-gate conditions to True once its containers are ready (off by
    /// default: a gate belongs to some other controller, as in Kubernetes).
    pub satisfy_readiness_gates: bool,
    /// Mixed into the per-pod jitter, so one config can produce different but replayable runs.
    pub seed: u64,
    /// Failure rules, first match wins per container.
    pub rules: Vec<Rule>,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            pod_start_delay: Delay {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(200),
            },
            init_container_duration: Delay::fixed(Duration::from_millis(200)),
            completion_duration: Delay::fixed(Duration::from_secs(1)),
            container_ready_delay: Delay::fixed(Duration::ZERO),
            termination_delay: Delay {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(100),
            },
            satisfy_readiness_gates: false,
            seed: 0,
            rules: Vec::new(),
        }
    }
}

impl LifecycleConfig {
    /// Parses and validates a YAML document.
    pub fn from_yaml(text: &str) -> Result<Self> {
        // An empty document means "all defaults".
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let cfg: Self =
            serde_yaml::from_str(text).map_err(|source| Error::ParseConfig { source })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads, parses and validates a YAML file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadConfig {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Checks what serde cannot: rule names are unique and every rule's parameters make sense.
    pub fn validate(&self) -> Result<()> {
        // Bounded durations keep every offset sum far from `Duration` overflow.
        let too_long = |d: Duration| d > MAX_CONFIG_DURATION;
        for (what, d) in [
            ("podStartDelay", &self.pod_start_delay),
            ("initContainerDuration", &self.init_container_duration),
            ("completionDuration", &self.completion_duration),
            ("containerReadyDelay", &self.container_ready_delay),
            ("terminationDelay", &self.termination_delay),
        ] {
            if too_long(d.delay) || too_long(d.jitter) {
                return Err(Error::InvalidConfig(format!(
                    "{what}: delay and jitter must be at most 365 days"
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.name.is_empty() && !names.insert(rule.name.as_str()) {
                return Err(Error::InvalidConfig(format!(
                    "rule {i}: duplicate rule name {:?}",
                    rule.name
                )));
            }
            let duration = match &rule.action {
                Action::CrashLoop(c) => c.run_for,
                Action::NotReady(n) => n.after,
                Action::Complete(c) => c.after,
                Action::ImagePullError(_) => Duration::ZERO,
            };
            if too_long(duration) {
                return Err(Error::InvalidConfig(format!(
                    "rule {i} ({}): durations must be at most 365 days",
                    rule.name
                )));
            }
            if let Action::Complete(c) = &rule.action {
                match (c.phase, c.exit_code) {
                    (Some(CompletionPhase::Succeeded), Some(code)) if code != 0 => {
                        return Err(Error::InvalidConfig(format!(
                            "rule {i} ({}): phase Succeeded needs exitCode 0, got {code}",
                            rule.name
                        )))
                    }
                    (Some(CompletionPhase::Failed), Some(0)) => {
                        return Err(Error::InvalidConfig(format!(
                            "rule {i} ({}): phase Failed needs a non-zero exitCode",
                            rule.name
                        )))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// One failure rule: which containers it selects and what happens to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// A name for logs and errors.
    #[serde(default)]
    pub name: String,
    /// Which pods and containers the rule selects. An empty match selects every regular container.
    #[serde(default, rename = "match")]
    pub selector: Match,
    /// What happens to a selected container.
    #[serde(flatten)]
    pub action: Action,
}

/// A rule's selector. Every given part must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Match {
    /// The pod's namespace, if given.
    pub namespace: Option<String>,
    /// Labels the pod must carry with exactly these values (a `matchLabels`).
    pub labels: BTreeMap<String, String>,
    /// A glob (`*` matches any run of characters) on the container's `image` as written in the spec.
    pub image: Option<String>,
}

impl Match {
    /// Whether the pod-level part (namespace, labels) matches.
    pub fn matches_pod(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        if let Some(ns) = &self.namespace {
            if ns != namespace {
                return false;
            }
        }
        api::labels::matches_set(&self.labels, labels)
    }

    /// Whether the rule selects a container with this image; `init` says whether it is an init
    /// container (selected only through an explicit image pattern).
    pub fn matches_container(&self, image: &str, init: bool) -> bool {
        match &self.image {
            Some(pattern) => glob_match(pattern, image),
            None => !init,
        }
    }
}

/// What a rule does to a container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// The image never pulls: `ErrImagePull`, then `ImagePullBackOff` between retries with the
    /// kubelet's image back-off (10 s doubling to 5 min).
    ImagePullError(ImagePullError),
    /// The container exits after `runFor` with `exitCode`; it is restarted with crash-loop back-off
    /// as the pod's `restartPolicy` says (`Never`: the pod fails).
    CrashLoop(CrashLoop),
    /// The container runs but stops being Ready `after` this long.
    NotReady(NotReady),
    /// The container exits after `after`: with `phase: Succeeded` (exit 0) or `Failed` (exit 1, or
    /// `exitCode`). Meant for `restartPolicy: Never`/`OnFailure` pods; under `Always` the kubelet
    /// restarts it, as Kubernetes does.
    Complete(Complete),
}

/// Parameters of [`Action::ImagePullError`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ImagePullError {
    /// The `ErrImagePull` message; by default containerd's "not found" message for the image.
    pub message: Option<String>,
}

/// Parameters of [`Action::CrashLoop`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrashLoop {
    /// How long each run lasts before the container exits.
    #[serde(with = "duration_serde", default = "CrashLoop::default_run_for")]
    pub run_for: Duration,
    /// The exit code of each run.
    #[serde(default = "CrashLoop::default_exit_code")]
    pub exit_code: i32,
}

impl CrashLoop {
    fn default_run_for() -> Duration {
        Duration::from_secs(1)
    }
    fn default_exit_code() -> i32 {
        1
    }
}

/// Parameters of [`Action::NotReady`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotReady {
    /// Time from the container starting to it turning not-ready (it was Ready before, unless this
    /// is shorter than `containerReadyDelay`).
    #[serde(with = "duration_serde", default)]
    pub after: Duration,
}

/// The terminal phase a [`Complete`] rule drives the pod to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompletionPhase {
    Succeeded,
    Failed,
}

/// Parameters of [`Action::Complete`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Complete {
    /// Time from the container starting to it exiting.
    #[serde(with = "duration_serde", default)]
    pub after: Duration,
    /// `Succeeded` (the default) or `Failed`.
    #[serde(default)]
    pub phase: Option<CompletionPhase>,
    /// Overrides the exit code implied by `phase` (0 / 1).
    #[serde(default)]
    pub exit_code: Option<i32>,
}

impl Complete {
    /// The exit code this rule ends the container with.
    pub fn effective_exit_code(&self) -> i32 {
        match (self.exit_code, self.phase) {
            (Some(code), _) => code,
            (None, Some(CompletionPhase::Failed)) => 1,
            (None, _) => 0,
        }
    }
}

/// Whether `text` matches `pattern`, where `*` matches any (possibly empty) run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Classic greedy wildcard matching with one backtrack point: O(len(p) * len(t)) worst case.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Parses a Go-style duration: a sequence of `<number><unit>` with units `ns us µs ms s m h`
/// (`1m30s`, `1.5s`, `250ms`), or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".to_string());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{text:?}: {e}"));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("{text:?}: expected a number at {rest:?}"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("{text:?}: bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_secs = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("{text:?}: missing unit after {value}")),
            other => return Err(format!("{text:?}: unknown unit {other:?}")),
        };
        rest = &rest[unit_len..];
        let part =
            Duration::try_from_secs_f64(value * unit_secs).map_err(|e| format!("{text:?}: {e}"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?}: overflow"))?;
    }
    Ok(total)
}

/// Formats a duration the way Go's `time.Duration.String()` does for whole units (`10s`, `5m0s`,
/// `1m20s`, `250ms`), used in kubelet-style messages.
pub fn format_go_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let frac = d.subsec_millis();
    let s_str = if frac == 0 {
        format!("{s}s")
    } else {
        let digits = format!("{frac:03}");
        format!("{s}.{}s", digits.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => s_str,
        (0, m) => format!("{m}m{s_str}"),
        (h, m) => format!("{h}h{m}m{s_str}"),
    }
}

/// Serde for a plain duration (string or number of seconds).
pub(crate) mod duration_serde {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    impl de::Visitor<'_> for DurationVisitor {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration such as \"1m30s\" or a number of seconds")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_secs)
                .map_err(|_| E::custom("negative duration"))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            Duration::try_from_secs_f64(v).map_err(E::custom)
        }
    }
}

/// Serde for a [`Delay`]: either a duration (no jitter) or `{delay, jitter}`.
pub(crate) mod delay_serde {
    use super::*;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct DelayMap {
        #[serde(with = "duration_serde", default)]
        delay: Duration,
        #[serde(with = "duration_serde", default)]
        jitter: Duration,
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum DelayForm {
        Plain(#[serde(with = "duration_serde")] Duration),
        Map(DelayMap),
    }

    pub fn serialize<S: Serializer>(d: &Delay, s: S) -> Result<S::Ok, S::Error> {
        DelayMap {
            delay: d.delay,
            jitter: d.jitter,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Delay, D::Error> {
        Ok(match DelayForm::deserialize(d)? {
            DelayForm::Plain(delay) => Delay::fixed(delay),
            DelayForm::Map(m) => Delay {
                delay: m.delay,
                jitter: m.jitter,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_gives_defaults() -> Result<()> {
        assert_eq!(LifecycleConfig::from_yaml("")?, LifecycleConfig::default());
        assert_eq!(
            LifecycleConfig::from_yaml("{}")?,
            LifecycleConfig::default()
        );
        Ok(())
    }

    #[test]
    fn parses_the_documented_example() -> Result<()> {
        let yaml = r#"
podStartDelay: {delay: 100ms, jitter: 200ms}
initContainerDuration: 200ms
containerReadyDelay: 0s
terminationDelay: {delay: 1s}
satisfyReadinessGates: true
seed: 7
rules:
  - name: bad-image
    match: {image: "*:does-not-exist"}
    imagePullError: {}
  - name: crashy
    match: {labels: {app: crashy}}
    crashLoop: {runFor: 5s, exitCode: 2}
  - name: flaky
    match: {labels: {app: flaky}, namespace: prod}
    notReady: {after: 1m30s}
  - name: job
    match: {labels: {job: "true"}}
    complete: {after: 10s, phase: Failed}
"#;
        let cfg = LifecycleConfig::from_yaml(yaml)?;
        assert_eq!(
            cfg.pod_start_delay,
            Delay {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(200)
            }
        );
        assert_eq!(
            cfg.init_container_duration,
            Delay::fixed(Duration::from_millis(200))
        );
        assert_eq!(cfg.termination_delay, Delay::fixed(Duration::from_secs(1)));
        assert!(cfg.satisfy_readiness_gates);
        assert_eq!(cfg.seed, 7);
        assert_eq!(cfg.rules.len(), 4);
        assert_eq!(
            cfg.rules[0].selector.image.as_deref(),
            Some("*:does-not-exist")
        );
        assert_eq!(
            cfg.rules[0].action,
            Action::ImagePullError(ImagePullError::default())
        );
        assert_eq!(
            cfg.rules[1].action,
            Action::CrashLoop(CrashLoop {
                run_for: Duration::from_secs(5),
                exit_code: 2
            })
        );
        assert_eq!(cfg.rules[2].selector.namespace.as_deref(), Some("prod"));
        assert_eq!(
            cfg.rules[2].action,
            Action::NotReady(NotReady {
                after: Duration::from_secs(90)
            })
        );
        match &cfg.rules[3].action {
            Action::Complete(c) => assert_eq!(c.effective_exit_code(), 1),
            other => panic!("expected complete, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn crash_loop_defaults() -> Result<()> {
        let cfg = LifecycleConfig::from_yaml("rules: [{crashLoop: {}}]")?;
        assert_eq!(
            cfg.rules[0].action,
            Action::CrashLoop(CrashLoop {
                run_for: Duration::from_secs(1),
                exit_code: 1
            })
        );
        Ok(())
    }

    #[test]
    fn rejects_unknown_fields_and_bad_values() {
        assert!(matches!(
            LifecycleConfig::from_yaml("podStartDelai: 1s"),
            Err(Error::ParseConfig { .. })
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml("podStartDelay: 1parsec"),
            Err(Error::ParseConfig { .. })
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml("rules: [{name: x}]"),
            Err(Error::ParseConfig { .. })
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml(
                "rules: [{name: a, crashLoop: {}}, {name: a, crashLoop: {}}]"
            ),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml(
                "rules: [{complete: {after: 1s, phase: Succeeded, exitCode: 3}}]"
            ),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml("podStartDelay: {delay: 1s, jitter: 400d}"),
            Err(Error::ParseConfig { .. })
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml("podStartDelay: {delay: 1s, jitter: 9000h}"),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            LifecycleConfig::from_yaml("rules: [{crashLoop: {runFor: 1e15}}]"),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn from_file_reads_and_reports_missing_files() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| Error::ReadConfig {
            path: "tempdir".into(),
            source,
        })?;
        let path = dir.path().join("lifecycle.yaml");
        std::fs::write(&path, "seed: 3\n").map_err(|source| Error::ReadConfig {
            path: path.clone(),
            source,
        })?;
        assert_eq!(LifecycleConfig::from_file(&path)?.seed, 3);
        assert!(matches!(
            LifecycleConfig::from_file(&dir.path().join("missing.yaml")),
            Err(Error::ReadConfig { .. })
        ));
        Ok(())
    }

    #[test]
    fn durations_parse_like_go() {
        let ok = |s: &str| parse_duration(s).ok();
        assert_eq!(ok("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(ok("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(ok("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(ok("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(ok("3"), Some(Duration::from_secs(3)));
        assert_eq!(ok("0s"), Some(Duration::ZERO));
        assert_eq!(ok("10us"), Some(Duration::from_micros(10)));
        assert_eq!(ok(""), None);
        assert_eq!(ok("5"), Some(Duration::from_secs(5)));
        assert_eq!(ok("5x"), None);
        assert_eq!(ok("ms"), None);
        assert_eq!(ok("-1"), None);
    }

    #[test]
    fn go_duration_formatting() {
        assert_eq!(format_go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_go_duration(Duration::from_secs(80)), "1m20s");
        assert_eq!(format_go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_go_duration(Duration::from_secs(3700)), "1h1m40s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn delay_sampling_stays_in_range() {
        let d = Delay {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(200),
        };
        assert_eq!(d.sample(0.0), Duration::from_millis(100));
        assert_eq!(d.sample(0.5), Duration::from_millis(200));
        assert!(d.sample(0.999) < Duration::from_millis(300));
        assert_eq!(d.sample(f64::NAN), Duration::from_millis(100));
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "nginx"));
        assert!(glob_match("nginx", "nginx"));
        assert!(!glob_match("nginx", "nginx:1.25"));
        assert!(glob_match("nginx*", "nginx:1.25"));
        assert!(glob_match("*:does-not-exist", "busybox:does-not-exist"));
        assert!(glob_match("*/pause:*", "registry.k8s.io/pause:3.9"));
        assert!(!glob_match("*/pause:*", "pause:3.9"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
    }

    #[test]
    fn selectors() {
        let m = Match {
            namespace: Some("prod".into()),
            labels: [("app".to_string(), "web".to_string())].into(),
            image: None,
        };
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "fe".to_string()),
        ]
        .into();
        assert!(m.matches_pod("prod", Some(&labels)));
        assert!(!m.matches_pod("dev", Some(&labels)));
        assert!(!m.matches_pod("prod", None));
        assert!(m.matches_container("nginx", false));
        assert!(!m.matches_container("nginx", true));
        let img = Match {
            image: Some("busybox*".into()),
            ..Match::default()
        };
        assert!(img.matches_container("busybox:1.36", true));
        assert!(!img.matches_container("nginx", false));
        assert!(img.matches_pod("any", None));
    }
}
