//! Shuffle sharding (upstream `util/shufflesharding`): a flow's hash deals it a hand of
//! `hand_size` distinct queues out of a deck of `deck_size`, so two flows rarely share a whole
//! hand and one heavy flow fills at most `hand_size` queues.
//!
//! The hash is read as a mixed-radix number: its successive remainders by `deck_size`,
//! `deck_size - 1`, … pick each card among the cards not yet dealt. The dealing is a pure function
//! of the hash: the same flow always gets the same hand.

use std::hash::{Hash, Hasher};

/// Largest hand upstream's validation admits for the entropy of a 64-bit hash.
pub const MAX_HAND_SIZE: usize = 15;

/// Deals hands of `hand_size` out of `deck_size` queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck_size: usize,
    hand_size: usize,
}

impl Dealer {
    /// A dealer; the hand is clamped to `1..=min(deck_size, MAX_HAND_SIZE)`.
    pub fn new(deck_size: usize, hand_size: usize) -> Self {
        let deck_size = deck_size.max(1);
        let hand_size = hand_size.clamp(1, deck_size.min(MAX_HAND_SIZE));
        Dealer {
            deck_size,
            hand_size,
        }
    }

    /// The hand of `hash`: `hand_size` distinct queue indices below `deck_size`.
    pub fn deal(&self, mut hash: u64) -> impl Iterator<Item = usize> {
        let mut remainders = [0usize; MAX_HAND_SIZE];
        for (i, r) in remainders.iter_mut().enumerate().take(self.hand_size) {
            let radix = (self.deck_size - i) as u64;
            *r = (hash % radix) as usize;
            hash /= radix;
        }
        // Each remainder indexes the cards still in the deck: shift it past every card already
        // dealt at or below it, smallest first.
        let mut dealt = [0usize; MAX_HAND_SIZE];
        for i in 0..self.hand_size {
            let mut card = remainders[i];
            let mut taken = dealt;
            taken[..i].sort_unstable();
            for &t in &taken[..i] {
                if card >= t {
                    card += 1;
                }
            }
            dealt[i] = card;
        }
        dealt.into_iter().take(self.hand_size)
    }
}

/// The hash of a flow: its FlowSchema's name and its distinguisher (upstream hashes the pair).
pub fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    // SipHash with fixed keys: stable within and across processes.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    flow_schema.hash(&mut h);
    distinguisher.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn hands_are_distinct_cards_in_the_deck() {
        for (deck, hand) in [(64, 6), (128, 6), (16, 4), (8, 8), (1, 1), (15, 15)] {
            let d = Dealer::new(deck, hand);
            for seed in 0..2000u64 {
                let hash = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let cards: Vec<usize> = d.deal(hash).collect();
                assert_eq!(cards.len(), hand);
                assert!(cards.iter().all(|c| *c < deck), "{cards:?}");
                let set: BTreeSet<_> = cards.iter().collect();
                assert_eq!(set.len(), hand, "duplicate card in {cards:?}");
            }
        }
    }

    #[test]
    fn the_same_flow_gets_the_same_hand_and_flows_spread() {
        let d = Dealer::new(64, 6);
        let a: Vec<_> = d.deal(flow_hash("global-default", "alice")).collect();
        let again: Vec<_> = d.deal(flow_hash("global-default", "alice")).collect();
        assert_eq!(a, again);
        // Over many flows every queue is dealt, roughly evenly.
        let mut counts = [0usize; 64];
        for i in 0..6400 {
            for c in d.deal(flow_hash("global-default", &format!("user-{i}"))) {
                counts[c] += 1;
            }
        }
        let (min, max) = (counts.iter().min(), counts.iter().max());
        assert!(min >= Some(&400) && max <= Some(&800), "{counts:?}");
    }

    #[test]
    fn a_full_hand_is_a_permutation_of_the_deck() {
        let d = Dealer::new(5, 5);
        let mut seen = BTreeSet::new();
        for hash in 0..120u64 {
            let cards: Vec<usize> = d.deal(hash).collect();
            let mut sorted = cards.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
            seen.insert(cards);
        }
        // 5! hashes below 120 give every permutation once.
        assert_eq!(seen.len(), 120);
    }
}
