//! Completion indexes as ordered intervals: the `status.completedIndexes` / `failedIndexes` form
//! ("1,3-5") and the `successPolicy` rules' `succeededIndexes` (upstream `indexed_job_utils.go`).
//!
//! An [`Intervals`] is sorted, disjoint and non-adjacent, so its string form is canonical: two equal
//! sets always print the same, and a status write happens only when the set really changed.

use std::fmt;

/// A set of indexes as sorted, disjoint, non-adjacent inclusive intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals(Vec<(i32, i32)>);

impl Intervals {
    /// Parse "1,3-5", keeping only indexes below `completions`; malformed pieces are skipped (as
    /// upstream logs and skips them).
    pub fn parse(s: &str, completions: i32) -> Self {
        let mut ranges = Vec::new();
        for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (first, last) = match piece.split_once('-') {
                Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
                None => (piece.parse::<i32>(), piece.parse::<i32>()),
            };
            let (Ok(first), Ok(last)) = (first, last) else {
                continue;
            };
            if first < 0 || last < first || first >= completions {
                continue;
            }
            ranges.push((first, last.min(completions - 1)));
        }
        ranges.sort_unstable();
        let mut out: Vec<(i32, i32)> = Vec::new();
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Self(out)
    }

    /// The set with `indexes` added.
    pub fn with(&self, indexes: impl IntoIterator<Item = i32>) -> Self {
        let mut all: Vec<i32> = indexes.into_iter().filter(|i| *i >= 0).collect();
        all.sort_unstable();
        all.dedup();
        let mut ranges: Vec<(i32, i32)> = self.0.clone();
        ranges.extend(all.into_iter().map(|i| (i, i)));
        ranges.sort_unstable();
        let mut out: Vec<(i32, i32)> = Vec::new();
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Self(out)
    }

    /// Whether `ix` is in the set (a binary search).
    pub fn has(&self, ix: i32) -> bool {
        self.next_outside(ix) != ix
    }

    /// The smallest index at or after `from` that is not in the set: `from` itself, or one past
    /// the interval holding it (intervals are never adjacent, so that one is outside).
    pub fn next_outside(&self, from: i32) -> i32 {
        let starting_before = self.0.partition_point(|(a, _)| *a <= from);
        match starting_before.checked_sub(1).and_then(|k| self.0.get(k)) {
            Some((_, last)) if *last >= from => last.saturating_add(1),
            _ => from,
        }
    }

    /// How many indexes the set holds.
    pub fn total(&self) -> usize {
        self.0
            .iter()
            .map(|(a, b)| usize::try_from(b - a + 1).unwrap_or(0))
            .sum()
    }

    /// How many indexes of `self` are also in `other`.
    pub fn count_in(&self, other: &Intervals) -> usize {
        let mut n = 0usize;
        for (a, b) in &self.0 {
            for (c, d) in &other.0 {
                let lo = (*a).max(*c);
                let hi = (*b).min(*d);
                if lo <= hi {
                    n += usize::try_from(hi - lo + 1).unwrap_or(0);
                }
            }
        }
        n
    }

    /// No index at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (a, b)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_are_canonical() {
        let s = Intervals::parse("5,1,3-4,x,7-2,9-12", 11);
        assert_eq!(s.to_string(), "1,3-5,9-10");
        assert_eq!(s.total(), 6);
        assert!(s.has(4) && !s.has(2) && !s.has(11));
        assert_eq!(Intervals::parse("", 3).to_string(), "");
    }

    #[test]
    fn adding_indexes_merges_neighbours() {
        let s = Intervals::parse("0,2", 10).with([1, 3, 7, 7]);
        assert_eq!(s.to_string(), "0-3,7");
        assert_eq!(Intervals::default().with([4, 5]).to_string(), "4-5");
    }

    #[test]
    fn intersection_counts() {
        let a = Intervals::parse("0-4,8", 10);
        let b = Intervals::parse("3-9", 10);
        assert_eq!(a.count_in(&b), 3);
    }
}
