//! The policy of a namespace (`k8s.io/pod-security-admission/api`): a level and a version for
//! each of the three modes, read from the namespace's `pod-security.kubernetes.io/*` labels.
//!
//! Guarantees, as upstream's `PolicyToEvaluate`: a policy is always returned, with the invalid
//! labels reported as field errors beside it. An invalid enforce level counts as `restricted`
//! (fail closed), an invalid audit or warn level as `privileged` (fail open), an invalid version
//! as `latest`. A missing label takes the default (`privileged:latest`).

use std::collections::BTreeMap;
use std::fmt;

use api::validation::FieldError;

/// The prefix of every policy label.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
/// `pod-security.kubernetes.io/enforce`.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// `pod-security.kubernetes.io/enforce-version`.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// `pod-security.kubernetes.io/audit`.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// `pod-security.kubernetes.io/audit-version`.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// `pod-security.kubernetes.io/warn`.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `pod-security.kubernetes.io/warn-version`.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The newest policy version this server knows (Kubernetes 1.33): `latest` and any newer
/// `v1.X` are evaluated as this one, as upstream's evaluator clamps to its maximum version.
pub const MAX_MINOR: u32 = 33;

/// A Pod Security Standards level, from the least strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// `ParseLevel`: the level, or `restricted` and upstream's error.
    pub fn parse(s: &str) -> Result<Level, (Level, &'static str)> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err((
                Level::Restricted,
                "must be one of privileged, baseline, restricted",
            )),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        })
    }
}

/// A policy version: `latest` or `v1.X`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    /// `v1.X`, the minor X.
    Minor(u32),
}

impl Version {
    /// `ParseVersion`: the version, or `latest` and upstream's error.
    pub fn parse(s: &str) -> Result<Version, (Version, &'static str)> {
        const ERR: &str = "must be \"latest\" or \"v1.x\"";
        if s == "latest" {
            return Ok(Version::Latest);
        }
        // `^v1\.([0-9]|[1-9][0-9]*)$`
        let minor = s.strip_prefix("v1.").filter(|m| {
            !m.is_empty()
                && m.bytes().all(|b| b.is_ascii_digit())
                && (m.len() == 1 || !m.starts_with('0'))
        });
        match minor.and_then(|m| m.parse::<u32>().ok()) {
            Some(m) => Ok(Version::Minor(m)),
            None => Err((Version::Latest, ERR)),
        }
    }

    /// The minor version whose checks apply.
    pub fn effective_minor(self) -> u32 {
        match self {
            Version::Latest => MAX_MINOR,
            Version::Minor(m) => m.min(MAX_MINOR),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(m) => write!(f, "v1.{m}"),
        }
    }
}

/// A level at a version (`restricted:latest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, the default of every mode.
    pub const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// The three modes of a namespace's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED_LATEST,
            audit: LevelVersion::PRIVILEGED_LATEST,
            warn: LevelVersion::PRIVILEGED_LATEST,
        }
    }
}

impl Policy {
    /// Whether every mode is privileged (nothing to evaluate).
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|m| m.level == Level::Privileged)
    }

    /// `PolicyToEvaluate`: the policy `labels` select over `defaults`, and the errors of the
    /// invalid labels (field paths `metadata.labels[<label>]`).
    pub fn from_labels(
        labels: &BTreeMap<String, String>,
        defaults: Policy,
    ) -> (Policy, Vec<FieldError>) {
        let mut p = defaults;
        let mut errs = Vec::new();
        let mut invalid = |label: &str, value: &str, msg: &str| {
            errs.push(FieldError::invalid(
                format!("metadata.labels[{label}]"),
                value,
                msg,
            ));
        };
        let modes: [(&str, &str, &mut LevelVersion, Level); 3] = [
            (
                ENFORCE_LEVEL_LABEL,
                ENFORCE_VERSION_LABEL,
                &mut p.enforce,
                Level::Restricted,
            ),
            (
                AUDIT_LEVEL_LABEL,
                AUDIT_VERSION_LABEL,
                &mut p.audit,
                Level::Privileged,
            ),
            (
                WARN_LEVEL_LABEL,
                WARN_VERSION_LABEL,
                &mut p.warn,
                Level::Privileged,
            ),
        ];
        for (level_label, version_label, mode, on_error) in modes {
            if let Some(value) = labels.get(level_label) {
                mode.level = Level::parse(value).unwrap_or_else(|(_, msg)| {
                    invalid(level_label, value, msg);
                    on_error
                });
            }
            if let Some(value) = labels.get(version_label) {
                mode.version = Version::parse(value).unwrap_or_else(|(v, msg)| {
                    invalid(version_label, value, msg);
                    v
                });
            }
        }
        (p, errs)
    }
}
