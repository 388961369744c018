//! Pod IP address management for one node: a host-local-style allocator over the node's pod CIDR.
//!
//! Guarantees: an address is handed out to at most one pod at a time (a bitmap, one bit per address
//! in the CIDR); the network address, the gateway (`.1`, the bridge in CNI's host-local setup) and
//! the broadcast address are never handed out; allocation is next-fit from the last address given,
//! as host-local does, so a freed address is not reused immediately. Memory is `2^(32-prefix)` bits
//! per node (32 bytes for a /24).

use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 CIDR block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: Ipv4Addr,
    prefix_len: u8,
}

impl Cidr {
    /// The block containing `addr` with this prefix (host bits cleared). `None` if `prefix_len`
    /// is not in `8..=30` (smaller blocks have no room for pods, larger ones are not node CIDRs).
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Option<Self> {
        if !(8..=30).contains(&prefix_len) {
            return None;
        }
        let mask = u32::MAX << (32 - prefix_len);
        Some(Self {
            network: Ipv4Addr::from(u32::from(addr) & mask),
            prefix_len,
        })
    }

    /// The `index`-th block of this prefix length counted from `base` (node `i` gets block `i`):
    /// `10.244.0.0` with /24 gives `10.244.<i>.0/24`, continuing into `10.245.0.0/24` after 256.
    /// `None` if the block would leave the IPv4 space.
    pub fn nth(base: Ipv4Addr, prefix_len: u8, index: usize) -> Option<Self> {
        let first = Self::new(base, prefix_len)?;
        let size = first.size();
        let offset = u64::try_from(index).ok()?.checked_mul(size)?;
        let start = u64::from(u32::from(first.network)).checked_add(offset)?;
        let start = u32::try_from(start).ok()?;
        Self::new(Ipv4Addr::from(start), prefix_len)
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Number of addresses in the block.
    pub fn size(&self) -> u64 {
        1u64 << (32 - self.prefix_len)
    }

    /// Whether `addr` is inside the block.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix_len);
        u32::from(addr) & mask == u32::from(self.network)
    }

    fn offset_of(&self, addr: Ipv4Addr) -> Option<usize> {
        self.contains(addr)
            .then(|| (u32::from(addr) - u32::from(self.network)) as usize)
    }

    fn addr_at(&self, offset: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network).wrapping_add(offset as u32))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

/// The outcome of [`Ipam::reserve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// The address is now held.
    Reserved,
    /// Another pod holds it.
    InUse,
    /// It is outside the CIDR or one of the reserved addresses.
    NotAllocatable,
}

/// The allocator. Not synchronized: the owner (one node's state) holds it under its lock.
#[derive(Clone, Debug)]
pub struct Ipam {
    cidr: Cidr,
    used: Vec<u64>,
    /// Next-fit cursor: the offset after the last allocation.
    cursor: usize,
    in_use: usize,
}

impl Ipam {
    /// An empty allocator for `cidr`.
    pub fn new(cidr: Cidr) -> Self {
        let size = cidr.size() as usize;
        Self {
            cidr,
            used: vec![0; size.div_ceil(64)],
            cursor: 2,
            in_use: 0,
        }
    }

    /// The CIDR this allocator serves.
    pub fn cidr(&self) -> Cidr {
        self.cidr
    }

    /// How many addresses are held.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// How many addresses can be held at most (all but network, gateway and broadcast).
    pub fn capacity(&self) -> usize {
        self.cidr.size() as usize - 3
    }

    fn allocatable(&self, offset: usize) -> bool {
        offset >= 2 && offset < self.cidr.size() as usize - 1
    }

    fn is_set(&self, offset: usize) -> bool {
        self.used[offset / 64] & (1 << (offset % 64)) != 0
    }

    fn set(&mut self, offset: usize, on: bool) {
        let bit = 1u64 << (offset % 64);
        if on {
            self.used[offset / 64] |= bit;
        } else {
            self.used[offset / 64] &= !bit;
        }
    }

    /// Hands out a free address, or `None` when the block is exhausted.
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        let size = self.cidr.size() as usize;
        for step in 0..size {
            let offset = (self.cursor + step) % size;
            if self.allocatable(offset) && !self.is_set(offset) {
                self.set(offset, true);
                self.in_use += 1;
                self.cursor = offset + 1;
                return Some(self.cidr.addr_at(offset));
            }
        }
        None
    }

    /// Holds a specific address (a pod that already has one, seen again after a restart).
    pub fn reserve(&mut self, addr: Ipv4Addr) -> Reservation {
        match self.cidr.offset_of(addr) {
            Some(offset) if self.allocatable(offset) => {
                if self.is_set(offset) {
                    Reservation::InUse
                } else {
                    self.set(offset, true);
                    self.in_use += 1;
                    Reservation::Reserved
                }
            }
            _ => Reservation::NotAllocatable,
        }
    }

    /// Gives an address back. Returns whether it was held.
    pub fn release(&mut self, addr: Ipv4Addr) -> bool {
        match self.cidr.offset_of(addr) {
            Some(offset) if self.allocatable(offset) && self.is_set(offset) => {
                self.set(offset, false);
                self.in_use -= 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn cidr24(i: usize) -> Cidr {
        match Cidr::nth(Ipv4Addr::new(10, 244, 0, 0), 24, i) {
            Some(c) => c,
            None => panic!("no block {i}"),
        }
    }

    #[test]
    fn node_blocks_are_consecutive_and_disjoint() {
        assert_eq!(cidr24(0).to_string(), "10.244.0.0/24");
        assert_eq!(cidr24(7).to_string(), "10.244.7.0/24");
        assert_eq!(cidr24(255).to_string(), "10.244.255.0/24");
        assert_eq!(cidr24(256).to_string(), "10.245.0.0/24");
        assert_eq!(cidr24(999).to_string(), "10.247.231.0/24");
        let blocks: HashSet<Ipv4Addr> = (0..1000).map(|i| cidr24(i).network()).collect();
        assert_eq!(blocks.len(), 1000);
        assert!(Cidr::nth(Ipv4Addr::new(255, 255, 255, 0), 24, 1).is_none());
        assert!(Cidr::new(Ipv4Addr::new(10, 0, 0, 0), 31).is_none());
    }

    #[test]
    fn allocates_every_usable_address_exactly_once() {
        let cidr = cidr24(3);
        let mut ipam = Ipam::new(cidr);
        let mut seen = HashSet::new();
        while let Some(ip) = ipam.allocate() {
            assert!(cidr.contains(ip));
            assert!(seen.insert(ip), "{ip} handed out twice");
        }
        assert_eq!(seen.len(), 253);
        assert_eq!(ipam.in_use(), ipam.capacity());
        assert!(!seen.contains(&Ipv4Addr::new(10, 244, 3, 0)));
        assert!(!seen.contains(&Ipv4Addr::new(10, 244, 3, 1)));
        assert!(!seen.contains(&Ipv4Addr::new(10, 244, 3, 255)));
        assert_eq!(ipam.allocate(), None);
    }

    #[test]
    fn next_fit_does_not_reuse_a_freed_address_at_once() {
        let mut ipam = Ipam::new(cidr24(0));
        let a = ipam.allocate();
        let b = ipam.allocate();
        assert_eq!(a, Some(Ipv4Addr::new(10, 244, 0, 2)));
        assert_eq!(b, Some(Ipv4Addr::new(10, 244, 0, 3)));
        assert!(ipam.release(Ipv4Addr::new(10, 244, 0, 2)));
        assert!(!ipam.release(Ipv4Addr::new(10, 244, 0, 2)));
        assert_eq!(ipam.allocate(), Some(Ipv4Addr::new(10, 244, 0, 4)));
        assert_eq!(ipam.in_use(), 2);
    }

    #[test]
    fn freed_addresses_are_reused_after_wrapping() {
        let mut ipam = Ipam::new(cidr24(0));
        let all: Vec<Ipv4Addr> = std::iter::from_fn(|| ipam.allocate()).collect();
        assert!(ipam.release(all[10]));
        assert_eq!(ipam.allocate(), Some(all[10]));
    }

    #[test]
    fn reserve_respects_holders_and_bounds() {
        let mut ipam = Ipam::new(cidr24(1));
        let ip = Ipv4Addr::new(10, 244, 1, 50);
        assert_eq!(ipam.reserve(ip), Reservation::Reserved);
        assert_eq!(ipam.reserve(ip), Reservation::InUse);
        assert_eq!(
            ipam.reserve(Ipv4Addr::new(10, 244, 2, 50)),
            Reservation::NotAllocatable
        );
        assert_eq!(
            ipam.reserve(Ipv4Addr::new(10, 244, 1, 1)),
            Reservation::NotAllocatable
        );
        // A reserved address is skipped by allocation.
        let all: HashSet<Ipv4Addr> = std::iter::from_fn(|| ipam.allocate()).collect();
        assert_eq!(all.len(), 252);
        assert!(!all.contains(&ip));
    }
}
