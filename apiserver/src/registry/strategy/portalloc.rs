//! Service node port allocation from `30000-32767` (kube-apiserver's default
//! `--service-node-port-range`), for `nodePort`s and `healthCheckNodePort`s.
//!
//! Same design as the cluster-IP allocator ([`super::ipalloc`]): a bitmap of the range (2,768
//! ports, 44 words) behind one mutex, automatic allocation scanning from a rotating cursor
//! (O(range/64) worst case, no allocation after construction), explicit requests reserved if free.
//! Not persisted itself: rebuilt at start from the stored services ([`NodePortAllocator::rebuild`]),
//! so allocations survive a restart exactly as the stored objects do.

use parking_lot::Mutex;
use serde_json::Value;

/// First port of the range.
pub const NODE_PORT_MIN: u16 = 30000;
/// Last port of the range (inclusive).
pub const NODE_PORT_MAX: u16 = 32767;

const SIZE: usize = (NODE_PORT_MAX - NODE_PORT_MIN) as usize + 1;

/// Why a port could not be allocated; the messages are upstream's `portallocator` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortAllocError {
    #[error("range is full")]
    Full,
    #[error("provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}")]
    OutOfRange(i64),
    #[error("provided port is already allocated")]
    AlreadyAllocated(i64),
}

impl PortAllocError {
    /// The 422 field error at `path` (`spec.ports[0].nodePort`, `spec.healthCheckNodePort`).
    pub fn field_error(&self, path: &str) -> api::validation::FieldError {
        let value = match self {
            Self::OutOfRange(p) | Self::AlreadyAllocated(p) => *p,
            Self::Full => 0,
        };
        api::validation::FieldError::invalid_value(path, &Value::from(value), self.to_string())
    }
}

struct Bitmap {
    words: [u64; SIZE.div_ceil(64)],
    cursor: usize,
    used: usize,
}

impl Bitmap {
    fn get(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn set(&mut self, i: usize, v: bool) {
        if let Some(w) = self.words.get_mut(i / 64) {
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

/// The node ports in use, shared by every service write.
pub struct NodePortAllocator {
    inner: Mutex<Bitmap>,
}

impl Default for NodePortAllocator {
    fn default() -> Self {
        Self::new()
    }
}

fn offset(port: i64) -> Option<usize> {
    (i64::from(NODE_PORT_MIN)..=i64::from(NODE_PORT_MAX))
        .contains(&port)
        .then(|| usize::try_from(port - i64::from(NODE_PORT_MIN)).unwrap_or(0))
}

impl NodePortAllocator {
    /// An empty allocator.
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Bitmap {
                words: [0; SIZE.div_ceil(64)],
                cursor: 0,
                used: 0,
            }),
        }
    }

    /// Allocates the next free port.
    pub fn allocate(&self) -> Result<i64, PortAllocError> {
        let mut b = self.inner.lock();
        for step in 0..SIZE {
            let i = (b.cursor + step) % SIZE;
            if !b.get(i) {
                b.set(i, true);
                b.cursor = (i + 1) % SIZE;
                return Ok(i64::from(NODE_PORT_MIN) + i as i64);
            }
        }
        Err(PortAllocError::Full)
    }

    /// Allocates a requested port.
    pub fn allocate_specific(&self, port: i64) -> Result<i64, PortAllocError> {
        let i = offset(port).ok_or(PortAllocError::OutOfRange(port))?;
        let mut b = self.inner.lock();
        if b.get(i) {
            return Err(PortAllocError::AlreadyAllocated(port));
        }
        b.set(i, true);
        Ok(port)
    }

    /// Returns a port to the pool (no-op for ports not allocated or out of range).
    pub fn release(&self, port: i64) {
        if let Some(i) = offset(port) {
            self.inner.lock().set(i, false);
        }
    }

    /// Number of allocated ports.
    pub fn used(&self) -> usize {
        self.inner.lock().used
    }

    /// Whether `port` is allocated.
    pub fn is_allocated(&self, port: i64) -> bool {
        offset(port).is_some_and(|i| self.inner.lock().get(i))
    }

    /// Marks the node ports of existing services as allocated (start-up).
    pub fn rebuild<'a>(&self, services: impl IntoIterator<Item = &'a Value>) {
        for s in services {
            for port in service_node_ports(s) {
                let _ = self.allocate_specific(port);
            }
        }
    }
}

/// The node ports a stored service holds: its ports' `nodePort`s (a number used by two ports of
/// different protocols is held once) and its `healthCheckNodePort`.
pub fn service_node_ports(svc: &Value) -> Vec<i64> {
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Vec::new();
    }
    let mut ports: Vec<i64> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .chain(
            svc.pointer("/spec/healthCheckNodePort")
                .and_then(Value::as_i64),
        )
        .filter(|p| *p != 0)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allocates_the_whole_range_once() {
        let a = NodePortAllocator::new();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..SIZE {
            let p = a.allocate().unwrap_or(0);
            assert!((30000..=32767).contains(&p), "{p}");
            assert!(seen.insert(p));
        }
        assert_eq!(a.allocate(), Err(PortAllocError::Full));
        a.release(30500);
        assert_eq!(a.allocate(), Ok(30500));
    }

    #[test]
    fn specific_ports_and_messages() {
        let a = NodePortAllocator::new();
        assert_eq!(a.allocate_specific(30080), Ok(30080));
        let taken = a.allocate_specific(30080).err();
        assert_eq!(
            taken.map(|e| {
                let f = e.field_error("spec.ports[0].nodePort");
                format!("{}: {}", f.field, f.body())
            }),
            Some(
                "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
                    .to_string()
            )
        );
        let out = a.allocate_specific(40000).err();
        assert_eq!(
            out.map(|e| {
                let f = e.field_error("spec.ports[0].nodePort");
                format!("{}: {}", f.field, f.body())
            }),
            Some("spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767".to_string())
        );
        // Automatic allocation skips taken ports.
        let b = NodePortAllocator::new();
        b.rebuild([&json!({"spec": {"type": "NodePort", "ports": [{"nodePort": 30000}, {"nodePort": 30000, "protocol": "UDP"}], "healthCheckNodePort": 30001}})]);
        assert_eq!(b.used(), 2);
        assert_eq!(b.allocate(), Ok(30002));
    }
}
