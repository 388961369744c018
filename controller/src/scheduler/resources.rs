//! Resource quantities and pod requests as the scheduler counts them.
//!
//! Quantities are parsed into milli-units (CPU in millicores, memory in milli-bytes, rounded up as
//! apimachinery's `MilliValue` does). A pod's request is the sum over its containers, raised to the
//! largest init container request, plus `spec.overhead` (`computePodResourceRequest`). For scoring,
//! containers without requests count as 100m CPU and 200 MiB (`GetNonzeroRequests`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Default CPU request for scoring when none is set: 100 millicores (`DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Default memory request for scoring when none is set: 200 MiB (`DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Parse a Kubernetes quantity into milli-units, rounding up. `None` if malformed.
pub fn parse_milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let (neg, body) = match q.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(num_end);
    if number.is_empty() || number.len() > 30 {
        return None;
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return None;
    }
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().ok()?;
    // value = mantissa × base^exp / 10^frac_len
    let (binary_pow, dec_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (1, 0),
        "Mi" => (2, 0),
        "Gi" => (3, 0),
        "Ti" => (4, 0),
        "Pi" => (5, 0),
        "Ei" => (6, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        s if s.starts_with(['e', 'E']) => (0, s[1..].parse().ok()?),
        _ => return None,
    };
    let exp10 = dec_exp + 3 - i32::try_from(frac_part.len()).ok()?;
    let mut num = mantissa.checked_mul(1024i128.checked_pow(binary_pow)?)?;
    let mut den: i128 = 1;
    if exp10 >= 0 {
        num = num.checked_mul(10i128.checked_pow(exp10.unsigned_abs())?)?;
    } else {
        den = 10i128.checked_pow(exp10.unsigned_abs())?;
    }
    let milli = (num + den - 1) / den;
    Some(if neg { -milli } else { milli })
}

/// CPU millicores, memory bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
}

impl Resources {
    fn add(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(o.milli_cpu);
        self.memory = self.memory.saturating_add(o.memory);
    }

    fn max(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
    }

    /// Component-wise subtraction.
    pub fn sub(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(o.milli_cpu);
        self.memory = self.memory.saturating_sub(o.memory);
    }

    /// Component-wise addition.
    pub fn plus(mut self, o: Resources) -> Resources {
        self.add(o);
        self
    }
}

fn milli_of(map: Option<&BTreeMap<String, Quantity>>, name: &str) -> Option<i128> {
    map.and_then(|m| m.get(name))
        .and_then(|q| parse_milli(&q.0))
}

/// Read `cpu` and `memory` from a resource list (absent or malformed = 0).
pub fn from_list(map: Option<&BTreeMap<String, Quantity>>) -> Resources {
    let cpu = milli_of(map, "cpu").unwrap_or(0);
    let mem = milli_of(map, "memory").unwrap_or(0);
    Resources {
        milli_cpu: i64::try_from(cpu).unwrap_or(i64::MAX),
        memory: i64::try_from((mem + 999) / 1000).unwrap_or(i64::MAX),
    }
}

fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = from_list(req);
    if non_zero {
        if milli_of(req, "cpu").is_none() {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if milli_of(req, "memory").is_none() {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// The pod's effective request; `non_zero` substitutes the scoring defaults for unset requests.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(container_requests(c, non_zero));
    }
    for c in spec.init_containers.iter().flatten() {
        total.max(container_requests(c, non_zero));
    }
    total.add(from_list(spec.overhead.as_ref()));
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    #[test]
    fn quantities_parse_to_milli_units() {
        assert_eq!(parse_milli("100m"), Some(100));
        assert_eq!(parse_milli("1"), Some(1000));
        assert_eq!(parse_milli("0.5"), Some(500));
        assert_eq!(parse_milli("1.5"), Some(1500));
        assert_eq!(parse_milli("1Ki"), Some(1_024_000));
        assert_eq!(parse_milli("128Mi"), Some(128 * 1024 * 1024 * 1000));
        assert_eq!(parse_milli("1G"), Some(1_000_000_000_000));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("1n"), Some(1), "rounds up");
        assert_eq!(parse_milli("-2"), Some(-2000));
        assert_eq!(parse_milli("abc"), None);
        assert_eq!(parse_milli("1Qi"), None);
        assert_eq!(parse_milli(""), None);
    }

    fn container(cpu: Option<&str>, mem: Option<&str>) -> Container {
        let mut req = BTreeMap::new();
        if let Some(c) = cpu {
            req.insert("cpu".to_string(), Quantity(c.into()));
        }
        if let Some(m) = mem {
            req.insert("memory".to_string(), Quantity(m.into()));
        }
        Container {
            resources: Some(ResourceRequirements {
                requests: Some(req),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_request_sums_containers_and_maxes_init() {
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![
                    container(Some("250m"), Some("64Mi")),
                    container(Some("250m"), None),
                ],
                init_containers: Some(vec![container(Some("2"), Some("1Mi"))]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&pod, false),
            Resources {
                milli_cpu: 2000,
                memory: 64 * 1024 * 1024
            }
        );
        let nz = pod_requests(&pod, true);
        assert_eq!(nz.memory, 64 * 1024 * 1024 + DEFAULT_MEMORY_REQUEST);
    }
}
