//! Borrowing between priority levels (upstream `apf_controller.go` `updateBorrowing` and
//! `conc_alloc.go`, read for behaviour).
//!
//! Each level's seat demand (seats executing plus seats waiting) is integrated over time. Every
//! adjustment period (upstream: 10 s) each level's demand statistics give a smoothed demand:
//! `max(avg + stddev, 0.977 × previous smoothed + 0.023 × (avg + stddev))`, so demand rises at
//! once and decays slowly. The server's seats (the sum of the nominal limits) are then shared:
//! each level gets `clamp(f × target, lower, upper)` with `target = max(lower, smoothed)`,
//! `lower = nominal − lendable`, `upper = nominal + borrowing limit`, and one fair proportion
//! `f` chosen so that the shares add up to the total. A busy level thus borrows what idle levels
//! lend, never below what any level keeps, and gives it back within a few periods once the
//! lenders get busy.

use std::time::{Duration, Instant};

/// Upstream's `borrowingAdjustmentPeriod`.
pub const ADJUSTMENT_PERIOD: Duration = Duration::from_secs(10);

/// Upstream's `seatDemandSmoothingCoefficient`.
const SMOOTHING: f64 = 0.977;

/// Time-weighted statistics of a level's seat demand since the last reset.
#[derive(Debug, Clone)]
pub struct SeatDemand {
    value: f64,
    since: Instant,
    last: Instant,
    integral: f64,
    integral_sq: f64,
    max: f64,
    /// The smoothed demand after the last adjustment.
    pub smoothed: f64,
}

impl SeatDemand {
    pub fn new(now: Instant) -> Self {
        SeatDemand {
            value: 0.0,
            since: now,
            last: now,
            integral: 0.0,
            integral_sq: 0.0,
            max: 0.0,
            smoothed: 0.0,
        }
    }

    /// The demand changed to `value` at `now`.
    pub fn set(&mut self, value: u32, now: Instant) {
        self.accumulate(now);
        self.value = f64::from(value);
        self.max = self.max.max(self.value);
    }

    fn accumulate(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.integral += self.value * dt;
        self.integral_sq += self.value * self.value * dt;
        self.last = self.last.max(now);
    }

    /// Ends a period at `now`: updates `smoothed` from the period's average and deviation and
    /// starts the next period at the current value.
    pub fn end_period(&mut self, now: Instant) -> f64 {
        self.accumulate(now);
        let span = now.saturating_duration_since(self.since).as_secs_f64();
        let (avg, dev) = if span > 0.0 {
            let avg = self.integral / span;
            let var = (self.integral_sq / span - avg * avg).max(0.0);
            (avg, var.sqrt())
        } else {
            (self.value, 0.0)
        };
        let envelope = avg + dev;
        self.smoothed = envelope.max(SMOOTHING * self.smoothed + (1.0 - SMOOTHING) * envelope);
        self.since = now;
        self.integral = 0.0;
        self.integral_sq = 0.0;
        self.max = self.value;
        self.smoothed
    }
}

/// One level in the allocation problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    pub lower: f64,
    pub upper: f64,
    pub target: f64,
}

/// Shares `total` among `claims` (see the module header); the result is in `claims`' order
/// and adds up to `total` unless every level is at a bound.
pub fn allocate(total: f64, claims: &[Claim]) -> Vec<f64> {
    let at = |f: f64| -> Vec<f64> {
        claims
            .iter()
            .map(|c| (f * c.target).clamp(c.lower, c.upper.max(c.lower)))
            .collect()
    };
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let lowest: f64 = claims.iter().map(|c| c.lower).sum();
    if lowest >= total {
        return claims.iter().map(|c| c.lower).collect();
    }
    let highest: f64 = claims.iter().map(|c| c.upper.max(c.lower)).sum();
    if highest <= total {
        return claims.iter().map(|c| c.upper.max(c.lower)).collect();
    }
    // Σ clamp(f × target) grows with f: bisect for the proportion that fills `total`.
    let mut hi = 1.0;
    while sum(&at(hi)) < total && hi < 1e12 {
        hi *= 2.0;
    }
    if sum(&at(hi)) < total {
        // No target can grow (all zero): spread what is left over the room above `lower`.
        let room = highest - lowest;
        let share = (total - lowest) / room;
        return claims
            .iter()
            .map(|c| c.lower + (c.upper.max(c.lower) - c.lower) * share)
            .collect();
    }
    let mut lo = 0.0;
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if sum(&at(mid)) < total {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    at(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_lender_lends_and_a_busy_one_keeps_its_share() {
        // Two levels of nominal 50: A lends up to 25, B up to 25; both may borrow without limit.
        let a = |target| Claim {
            lower: 25.0,
            upper: 100.0,
            target,
        };
        let busy_b_idle_a = allocate(100.0, &[a(0.0), a(200.0)]);
        assert_eq!(busy_b_idle_a[0], 25.0);
        assert!((busy_b_idle_a[1] - 75.0).abs() < 1e-6, "{busy_b_idle_a:?}");
        let both_busy = allocate(100.0, &[a(200.0), a(200.0)]);
        assert!((both_busy[0] - 50.0).abs() < 1e-6, "{both_busy:?}");
        let uneven = allocate(100.0, &[a(30.0), a(90.0)]);
        assert!(
            (uneven[0] - 25.0).abs() < 1e-6 && (uneven[1] - 75.0).abs() < 1e-6,
            "{uneven:?}"
        );
    }

    #[test]
    fn bounds_hold_when_the_total_cannot_be_met() {
        let fixed = [
            Claim {
                lower: 40.0,
                upper: 40.0,
                target: 0.0,
            },
            Claim {
                lower: 30.0,
                upper: 45.0,
                target: 100.0,
            },
        ];
        assert_eq!(allocate(100.0, &fixed), vec![40.0, 45.0]);
        let tight = [
            Claim {
                lower: 60.0,
                upper: 90.0,
                target: 90.0,
            },
            Claim {
                lower: 60.0,
                upper: 90.0,
                target: 90.0,
            },
        ];
        assert_eq!(allocate(100.0, &tight), vec![60.0, 60.0]);
        let idle = [
            Claim {
                lower: 10.0,
                upper: 60.0,
                target: 0.0,
            },
            Claim {
                lower: 10.0,
                upper: 60.0,
                target: 0.0,
            },
        ];
        let s = allocate(100.0, &idle);
        assert!((s.iter().sum::<f64>() - 100.0).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn demand_rises_at_once_and_decays_slowly() {
        let t0 = Instant::now();
        let mut d = SeatDemand::new(t0);
        d.set(40, t0);
        let s1 = d.end_period(t0 + ADJUSTMENT_PERIOD);
        assert!((s1 - 40.0).abs() < 1e-9, "{s1}");
        d.set(0, t0 + ADJUSTMENT_PERIOD);
        let s2 = d.end_period(t0 + 2 * ADJUSTMENT_PERIOD);
        assert!((s2 - 40.0 * SMOOTHING).abs() < 1e-9, "{s2}");
        // Half the period at 10 seats: average 5, deviation 5.
        let t2 = t0 + 2 * ADJUSTMENT_PERIOD;
        d.set(10, t2);
        d.set(0, t2 + ADJUSTMENT_PERIOD / 2);
        d.smoothed = 0.0;
        let s3 = d.end_period(t2 + ADJUSTMENT_PERIOD);
        assert!((s3 - 10.0).abs() < 1e-6, "{s3}");
    }
}
