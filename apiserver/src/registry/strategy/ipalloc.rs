//! Cluster IP allocation for Services from `10.96.0.0/12`.
//!
//! A bitmap of the range (2^20 addresses, 128 KiB) behind one mutex: allocation scans from a rotating
//! cursor, so it is O(range/64) worst case and never allocates memory after construction. The network
//! address and the broadcast address are never handed out; `10.96.0.1` is reserved for the `kubernetes`
//! service and only given on an explicit request. The allocator is rebuilt at start from the stored
//! services ([`ClusterIpAllocator::rebuild`]); it is not persisted itself.

use parking_lot::Mutex;
use serde_json::{json, Value};
use std::net::Ipv4Addr;

/// The service CIDR.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The address of the `default/kubernetes` service.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

const BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SIZE: u32 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpAllocError {
    #[error("failed to allocate a serviceIP: range is full")]
    Full,
    #[error(
        "the provided IP ({0}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
    )]
    OutOfRange(String),
    #[error("provided IP is already allocated")]
    AlreadyAllocated(String),
    #[error("{0} is not a valid IP address")]
    NotAnIp(String),
}

impl IpAllocError {
    /// The field error upstream reports for `spec.clusterIPs[0]`.
    pub fn field_error(&self) -> api::validation::FieldError {
        let v = match self {
            Self::OutOfRange(ip) | Self::AlreadyAllocated(ip) | Self::NotAnIp(ip) => ip.clone(),
            Self::Full => String::new(),
        };
        api::validation::FieldError::invalid("spec.clusterIPs", &v, self.to_string())
    }
}

struct Bitmap {
    words: Vec<u64>,
    cursor: u32,
    used: u32,
}

pub struct ClusterIpAllocator {
    inner: Mutex<Bitmap>,
}

impl Default for ClusterIpAllocator {
    fn default() -> Self {
        Self::new()
    }
}

fn offset(ip: Ipv4Addr) -> Option<u32> {
    let n = u32::from(ip);
    (BASE..BASE + SIZE).contains(&n).then(|| n - BASE)
}

impl Bitmap {
    fn get(&self, i: u32) -> bool {
        self.words
            .get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn set(&mut self, i: u32, v: bool) {
        if let Some(w) = self.words.get_mut((i / 64) as usize) {
            let bit = 1u64 << (i % 64);
            if v && *w & bit == 0 {
                *w |= bit;
                self.used += 1;
            } else if !v && *w & bit != 0 {
                *w &= !bit;
                self.used -= 1;
            }
        }
    }
}

impl ClusterIpAllocator {
    /// An empty allocator (network, broadcast and 10.96.0.1 excluded from automatic allocation).
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Bitmap {
                words: vec![0; (SIZE / 64) as usize],
                cursor: 10,
                used: 0,
            }),
        }
    }

    fn reserved(i: u32) -> bool {
        i == 0 || i == 1 || i == SIZE - 1
    }

    /// Allocates the next free address.
    pub fn allocate(&self) -> Result<Ipv4Addr, IpAllocError> {
        let mut b = self.inner.lock();
        for step in 0..SIZE {
            let i = (b.cursor + step) % SIZE;
            if !Self::reserved(i) && !b.get(i) {
                b.set(i, true);
                b.cursor = (i + 1) % SIZE;
                return Ok(Ipv4Addr::from(BASE + i));
            }
        }
        Err(IpAllocError::Full)
    }

    /// Allocates a requested address (any in range but the network and broadcast addresses).
    pub fn allocate_specific(&self, ip: &str) -> Result<Ipv4Addr, IpAllocError> {
        let addr: Ipv4Addr = ip
            .parse()
            .map_err(|_| IpAllocError::NotAnIp(ip.to_string()))?;
        let i = offset(addr)
            .filter(|i| *i != 0 && *i != SIZE - 1)
            .ok_or_else(|| IpAllocError::OutOfRange(ip.to_string()))?;
        let mut b = self.inner.lock();
        if b.get(i) {
            return Err(IpAllocError::AlreadyAllocated(ip.to_string()));
        }
        b.set(i, true);
        Ok(addr)
    }

    /// Returns an address to the pool (no-op for addresses not allocated or out of range).
    pub fn release(&self, ip: &str) {
        if let Some(i) = ip.parse::<Ipv4Addr>().ok().and_then(offset) {
            self.inner.lock().set(i, false);
        }
    }

    /// Number of allocated addresses.
    pub fn used(&self) -> u32 {
        self.inner.lock().used
    }

    /// Marks the cluster IPs of existing services as allocated (start-up).
    pub fn rebuild<'a>(&self, services: impl IntoIterator<Item = &'a Value>) {
        for s in services {
            for ip in service_cluster_ips(s) {
                let _ = self.allocate_specific(&ip);
            }
        }
    }

    /// Assigns `spec.clusterIP(s)` on a service being created: allocates one when empty/absent (not
    /// for `ExternalName` or headless `None`), reserves a requested one. Returns the allocated address
    /// (to release if the create fails) or the field error for a 422.
    pub fn assign(&self, svc: &mut Value) -> Result<Option<Ipv4Addr>, api::validation::FieldError> {
        let ty = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        let requested = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                svc.pointer("/spec/clusterIPs/0")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(None);
        };
        if ty == "ExternalName" {
            return Ok(None);
        }
        if requested == "None" {
            spec.insert("clusterIP".into(), json!("None"));
            spec.insert("clusterIPs".into(), json!(["None"]));
            return Ok(None);
        }
        let ip = if requested.is_empty() {
            self.allocate()
        } else {
            self.allocate_specific(&requested)
        }
        .map_err(|e| e.field_error())?;
        spec.insert("clusterIP".into(), json!(ip.to_string()));
        spec.insert("clusterIPs".into(), json!([ip.to_string()]));
        Ok(Some(ip))
    }
}

/// The allocated cluster IPs of a stored service (not `None`, not empty).
pub fn service_cluster_ips(svc: &Value) -> Vec<String> {
    let mut ips: Vec<String> = svc
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if ips.is_empty() {
        if let Some(ip) = svc.pointer("/spec/clusterIP").and_then(Value::as_str) {
            ips.push(ip.to_string());
        }
    }
    ips.retain(|ip| !ip.is_empty() && ip != "None");
    ips
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_in_range_and_releases() {
        let a = ClusterIpAllocator::new();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            let ip = a.allocate();
            assert!(ip.is_ok());
            let ip = ip.unwrap_or(Ipv4Addr::UNSPECIFIED);
            assert!(offset(ip).is_some());
            assert_ne!(ip, KUBERNETES_SERVICE_IP);
            assert!(seen.insert(ip));
        }
        assert_eq!(a.used(), 1000);
        let first = seen
            .iter()
            .next()
            .map(|i| i.to_string())
            .unwrap_or_default();
        a.release(&first);
        assert_eq!(a.used(), 999);
        assert!(a.allocate_specific(&first).is_ok());
        assert_eq!(
            a.allocate_specific(&first),
            Err(IpAllocError::AlreadyAllocated(first.clone()))
        );
        assert!(matches!(
            a.allocate_specific("10.0.0.1"),
            Err(IpAllocError::OutOfRange(_))
        ));
        assert!(a.allocate_specific("10.96.0.1").is_ok());
    }

    #[test]
    fn assign_and_rebuild() {
        let a = ClusterIpAllocator::new();
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        let ip = a.assign(&mut svc);
        assert!(matches!(ip, Ok(Some(_))));
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        assert_eq!(a.assign(&mut headless), Ok(None));
        assert_eq!(headless.pointer("/spec/clusterIPs/0"), Some(&json!("None")));
        let b = ClusterIpAllocator::new();
        b.rebuild([&svc, &headless]);
        assert_eq!(b.used(), 1);
        let mut dup = json!({"spec": {"clusterIP": svc.pointer("/spec/clusterIP").cloned().unwrap_or_default()}});
        assert!(b.assign(&mut dup).is_err());
    }
}
