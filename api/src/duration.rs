//! kubectl's `HumanDuration` (apimachinery `util/duration`), used for AGE and LAST SEEN columns.

use std::time::Duration;

/// Human form of a non-negative duration: `"5s"`, `"3m2s"`, `"4h"`, `"12d"`, `"3y"`.
pub fn duration_short(d: Duration) -> String {
    human_seconds(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Age of `then` seen at `now`; tolerates clock skew as kubectl does (`"0s"` up to 1 s in the future,
/// `"<invalid>"` beyond).
pub fn human_duration_since(then: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let secs = now.as_second().saturating_sub(then.as_second());
    // Sub-second precision: Go truncates toward zero on a duration; a timestamp 1.5 s ahead gives -1.
    let nanos = i64::from(now.subsec_nanosecond()) - i64::from(then.subsec_nanosecond());
    let secs = if secs < 0 && nanos > 0 {
        secs + 1
    } else if secs > 0 && nanos < 0 {
        secs - 1
    } else {
        secs
    };
    human_seconds(secs)
}

fn human_seconds(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_durations() {
        let rows: &[(u64, &str)] = &[
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (12 * 86400, "12d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (3 * 365 * 86400, "3y"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in rows {
            assert_eq!(duration_short(Duration::from_secs(*secs)), *want, "{secs}s");
        }
    }

    #[test]
    fn skew_tolerance() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let ahead = |s: i64| jiff::Timestamp::from_second(1_000_000 + s).unwrap_or(now);
        assert_eq!(human_duration_since(ahead(1), now), "0s");
        assert_eq!(human_duration_since(ahead(5), now), "<invalid>");
        assert_eq!(human_duration_since(ahead(-65), now), "65s");
    }
}
