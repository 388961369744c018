//! CronJob schedules: the standard five-field cron syntax and the `@` descriptors, parsed as
//! kube-apiserver 1.33 parses `spec.schedule` (robfig/cron v3.0.1 `ParseStandard`), with that
//! parser's exact error texts, since they are what a 422 shows.
//!
//! Accepted: `minute hour day-of-month month day-of-week`, each field a comma list of `*`/`?`,
//! `N`, `N-M`, with an optional `/step` (`N/step` means `N-max/step`); month and weekday names
//! (`jan`, `mon`, case-insensitive); the descriptors `@yearly`, `@annually`, `@monthly`,
//! `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <Go duration>`; a leading `TZ=<zone>`
//! or `CRON_TZ=<zone>`. Nothing else (no seconds field, no `L`/`W`/`#`): the maintained Rust cron
//! crates accept other dialects and word their errors differently, so this small parser stands in.
//! Quirks kept on purpose: empty list items are skipped (`1,,2`), `*-5` is `*`, weekday 7 is
//! out of range.

use std::fmt::Write as _;

/// A parsed schedule (bit `n` set = value `n` matches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A five-field or descriptor schedule.
    Spec {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
        /// Whether the day-of-month or day-of-week field was `*` (cron's "either day" rule).
        dom_star: bool,
        dow_star: bool,
        /// The `TZ=`/`CRON_TZ=` zone, if any.
        zone: Option<String>,
    },
    /// `@every <duration>`, in nanoseconds (Go `time.Duration`).
    Every(i64),
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// Parses `spec`; the error is the parser's message as the 422 shows it.
pub fn parse(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        // Go slices up to the first space; without one the reference parser would panic on a
        // negative bound, so the whole rest is taken as the zone name.
        let end = spec.find(' ').unwrap_or(spec.len()).max(eq + 1);
        let name = &spec[eq + 1..end];
        if let Err(e) = load_location(name) {
            return Err(format!("provided bad location {name}: {e}"));
        }
        zone = Some(name.to_string());
        spec = spec[end..].trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec, zone);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let minute = field(fields[0], &MINUTES)?;
    let hour = field(fields[1], &HOURS)?;
    let dom = field(fields[2], &DOM)?;
    let month = field(fields[3], &MONTHS)?;
    let dow = field(fields[4], &DOW)?;
    Ok(Schedule::Spec {
        minute: minute & !STAR,
        hour: hour & !STAR,
        dom_star: dom & STAR != 0,
        dow_star: dow & STAR != 0,
        dom: dom & !STAR,
        month: month & !STAR,
        dow: dow & !STAR,
        zone,
    })
}

/// Set when a field contained a full `*` (robfig's `starBit`).
const STAR: u64 = 1 << 63;

fn all(b: &Bounds) -> u64 {
    bits(b.min, b.max, 1) | STAR
}

fn descriptor(spec: &str, zone: Option<String>) -> Result<Schedule, String> {
    let at = |minute: u64, hour: u64, dom: u64, month: u64, dow: u64| Schedule::Spec {
        minute,
        hour,
        dom_star: dom & STAR != 0,
        dow_star: dow & STAR != 0,
        dom: dom & !STAR,
        month: month & !STAR,
        dow: dow & !STAR,
        zone: zone.clone(),
    };
    let first = |b: &Bounds| 1u64 << b.min;
    match spec {
        "@yearly" | "@annually" => Ok(at(1, 1, first(&DOM), first(&MONTHS), all(&DOW))),
        "@monthly" => Ok(at(1, 1, first(&DOM), all(&MONTHS), all(&DOW))),
        "@weekly" => Ok(at(1, 1, all(&DOM), all(&MONTHS), first(&DOW))),
        "@daily" | "@midnight" => Ok(at(1, 1, all(&DOM), all(&MONTHS), all(&DOW))),
        "@hourly" => Ok(at(
            1,
            all(&HOURS) & !STAR,
            all(&DOM),
            all(&MONTHS),
            all(&DOW),
        )),
        _ => match spec.strip_prefix("@every ") {
            Some(d) => parse_go_duration(d)
                .map(Schedule::Every)
                .map_err(|e| format!("failed to parse duration {spec}: {e}")),
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

/// A comma list of ranges (empty items are skipped, as `strings.FieldsFunc` does).
fn field(f: &str, b: &Bounds) -> Result<u64, String> {
    f.split(',')
        .filter(|r| !r.is_empty())
        .try_fold(0u64, |acc, r| Ok(acc | range(r, b)?))
}

/// `number | number "-" number [ "/" number ]`, or `*`/`?` with an optional step.
fn range(expr: &str, b: &Bounds) -> Result<u64, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (start, end, extra) = (b.min, b.max, STAR);
    } else {
        start = int_or_name(low_and_high[0], b)?;
        end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], b)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        extra = 0;
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_uint(range_and_step[1])?;
            if single {
                end = b.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(bits(start, end, step) | extra)
}

fn bits(min: u32, max: u32, step: u32) -> u64 {
    (min..=max)
        .step_by(step as usize)
        .fold(0, |acc, i| acc | (1u64 << i))
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u32, String> {
    let lower = expr.to_ascii_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => parse_uint(expr),
    }
}

/// `mustParseInt`: Go's `strconv.Atoi`, then non-negative. Values past the field bounds fail the
/// range checks, so anything above `u32::MAX` is reported like a bound violation's input.
fn parse_uint(expr: &str) -> Result<u32, String> {
    let num = go_atoi(expr).map_err(|why| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: {why}",
            crate::validation::go_quote(expr)
        )
    })?;
    if num < 0 {
        return Err(format!("negative number ({num}) not allowed: {expr}"));
    }
    Ok(u32::try_from(num).unwrap_or(u32::MAX))
}

/// `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits.
fn go_atoi(s: &str) -> Result<i64, &'static str> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    s.parse::<i64>().map_err(|_| "value out of range")
}

/// Go's `time.ParseDuration`, in nanoseconds, with its error texts.
pub fn parse_go_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(rest) = s.strip_prefix(['-', '+']) {
        neg = s.starts_with('-');
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let whole: u128 = if int_len == 0 {
            0
        } else {
            s[..int_len].parse().map_err(|_| invalid())?
        };
        s = &s[int_len..];
        let mut frac = (0u128, 1u128);
        let mut post = false;
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            post = n > 0;
            for d in rest[..n].bytes().take(18) {
                frac = (frac.0 * 10 + u128::from(d - b'0'), frac.1 * 10);
            }
            s = &rest[n..];
        }
        if int_len == 0 && !post {
            return Err(invalid());
        }
        let unit_len = s
            .bytes()
            .take_while(|c| *c != b'.' && !c.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                time_quote(orig)
            ));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(unit),
                    time_quote(orig)
                ))
            }
        };
        total += whole * scale + frac.0 * scale / frac.1;
        if total > 1 << 63 {
            return Err(invalid());
        }
    }
    let signed = i128::try_from(total).map_err(|_| invalid())?;
    let signed = if neg { -signed } else { signed };
    i64::try_from(signed).map_err(|_| invalid())
}

/// The `time` package's `quote`: non-ASCII and control bytes as `\xNN`.
fn time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if !c.is_ascii() || (c as u32) < 0x20 {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Go's `time.LoadLocation`: `""` and `UTC` are UTC, `Local` the local zone, anything else an
/// IANA zone name looked up exactly (case-sensitively) in the time-zone database.
pub fn load_location(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return Ok(());
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    match jiff::tz::db().get(name) {
        Ok(tz) if tz.iana_name() == Some(name) => Ok(()),
        _ => Err(format!("unknown time zone {name}")),
    }
}

/// How far ahead [`Schedule::next_after`] looks (robfig/cron gives up after five years too).
const SEARCH_YEARS: i16 = 5;

impl Schedule {
    /// The first activation strictly after `after`, in `zone` (the schedule's own `TZ=` zone if it
    /// has one): as robfig/cron's `Next`, whole minutes of the zone's civil time, the day matching
    /// by day of month and day of week together when either field is `*` and by either one
    /// otherwise. A civil time skipped by a DST change is not an activation; one repeated by it
    /// fires once, at its first occurrence. `None` if nothing matches within five years.
    pub fn next_after(
        &self,
        after: jiff::Timestamp,
        zone: &jiff::tz::TimeZone,
    ) -> Option<jiff::Timestamp> {
        let (minute, hour, dom, month, dow, dom_star, dow_star, own_zone) = match self {
            Schedule::Every(nanos) => {
                // ConstantDelaySchedule: whole seconds, at least one.
                let secs = (nanos / 1_000_000_000).max(1);
                let base = jiff::Timestamp::from_second(after.as_second()).ok()?;
                return base.checked_add(jiff::SignedDuration::from_secs(secs)).ok();
            }
            Schedule::Spec {
                minute,
                hour,
                dom,
                month,
                dow,
                dom_star,
                dow_star,
                zone,
            } => (minute, hour, dom, month, dow, dom_star, dow_star, zone),
        };
        let tz = match own_zone {
            Some(name) if name != "Local" && !name.is_empty() && name != "UTC" => {
                jiff::tz::db().get(name).ok()?
            }
            Some(name) if name == "UTC" => jiff::tz::TimeZone::UTC,
            _ => zone.clone(),
        };
        let bit = |set: u64, n: i64| (0..64).contains(&n) && set & (1 << n) != 0;
        let start = after.to_zoned(tz.clone());
        let start_civil = start.datetime();
        let mut date = start_civil.date();
        let last = date
            .checked_add(jiff::Span::new().years(SEARCH_YEARS))
            .ok()?;
        while date <= last {
            let dom_ok = bit(*dom, i64::from(date.day()));
            let dow_ok = bit(*dow, i64::from(date.weekday().to_sunday_zero_offset()));
            let day_ok = if *dom_star || *dow_star {
                dom_ok && dow_ok
            } else {
                dom_ok || dow_ok
            };
            if bit(*month, i64::from(date.month())) && day_ok {
                for h in 0..24i8 {
                    if !bit(*hour, i64::from(h)) {
                        continue;
                    }
                    for m in 0..60i8 {
                        if !bit(*minute, i64::from(m)) {
                            continue;
                        }
                        let civil = date.at(h, m, 0, 0);
                        if civil <= start_civil {
                            continue;
                        }
                        let ambiguous = tz.to_ambiguous_zoned(civil);
                        if matches!(ambiguous.offset(), jiff::tz::AmbiguousOffset::Gap { .. }) {
                            // A civil time a DST gap skips does not exist: no activation.
                            continue;
                        }
                        // Unambiguous, or repeated by a fold: its first occurrence.
                        let zoned = ambiguous.earlier().ok()?;
                        if zoned.timestamp() > after {
                            return Some(zoned.timestamp());
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        match parse(spec) {
            Ok(s) => panic!("{spec} parsed: {s:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn standard_specs_and_descriptors_parse() {
        for ok in [
            "* * * * *",
            "*/5 * * * *",
            "0 0 1 1 *",
            "0-59/15 0,12 1-31 jan-dec mon-fri",
            "30 6 * * SUN",
            "0 0 ? * ?",
            "5/10 * * * *",
            "1,,2 * * * *",
            "*-5 * * * *",
            "  0   1 * *  *  ",
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
            "@every 1h30m",
            "@every 1.5s",
            "TZ=UTC 0 * * * *",
            "CRON_TZ=Europe/Paris @daily",
        ] {
            assert!(parse(ok).is_ok(), "{ok}: {:?}", parse(ok));
        }
        let Ok(Schedule::Spec {
            minute,
            hour,
            dow,
            dow_star,
            dom_star,
            ..
        }) = parse("*/20 9-10 * * 1-5")
        else {
            panic!("not a spec schedule");
        };
        assert_eq!(minute, 1 | 1 << 20 | 1 << 40);
        assert_eq!(hour, 1 << 9 | 1 << 10);
        assert_eq!(dow, 0b11_1110);
        assert!(dom_star && !dow_star);
        assert_eq!(parse("@every 1m"), Ok(Schedule::Every(60_000_000_000)));
        assert_eq!(parse("@every 1.5s"), Ok(Schedule::Every(1_500_000_000)));
    }

    #[test]
    fn errors_are_robfig_crons() {
        for (spec, want) in [
            ("hello", "expected exactly 5 fields, found 1: [hello]"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            ("0 0 0 * * *", "expected exactly 5 fields, found 6: [0 0 0 * * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* 24 * * *", "end of range (24) above maximum (23): 24"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * 13 *", "end of range (13) above maximum (12): 13"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            ("a * * * *", "failed to parse int from a: strconv.Atoi: parsing \"a\": invalid syntax"),
            ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
            ("* * * foo *", "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax"),
            ("99999999999999999999 * * * *", "failed to parse int from 99999999999999999999: strconv.Atoi: parsing \"99999999999999999999\": value out of range"),
            ("@often", "unrecognized descriptor: @often"),
            ("@hourly ", "unrecognized descriptor: @hourly "),
            ("@every x", "failed to parse duration @every x: time: invalid duration \"x\""),
            ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
            ("@every 5y", "failed to parse duration @every 5y: time: unknown unit \"y\" in duration \"5y\""),
            ("TZ=Nowhere/Land * * * * *", "provided bad location Nowhere/Land: unknown time zone Nowhere/Land"),
        ] {
            assert_eq!(err(spec), want, "{spec}");
        }
        assert_eq!(err(""), "empty spec string");
    }

    #[test]
    fn go_durations_and_zones() {
        assert_eq!(parse_go_duration("-1m30s"), Ok(-90_000_000_000));
        assert_eq!(parse_go_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_go_duration("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert!(parse_go_duration(".").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("9999999999h").is_err());
        assert_eq!(time_quote("1é"), "\"1\\xc3\\xa9\"");
        assert!(load_location("America/New_York").is_ok());
        assert!(load_location("UTC").is_ok());
        assert!(load_location("Etc/UTC").is_ok());
        assert_eq!(
            load_location("america/new_york"),
            Err("unknown time zone america/new_york".to_string())
        );
        assert_eq!(
            load_location("Mars/Olympus"),
            Err("unknown time zone Mars/Olympus".to_string())
        );
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().expect("timestamp")
    }

    fn next(spec: &str, after: &str, zone: &str) -> Option<String> {
        let tz = jiff::tz::db().get(zone).expect("zone");
        parse(spec)
            .expect("schedule")
            .next_after(ts(after), &tz)
            .map(|t| t.to_string())
    }

    #[test]
    fn next_activation_is_the_first_matching_minute_strictly_after() {
        let n = |spec, after| next(spec, after, "UTC");
        assert_eq!(
            n("*/15 * * * *", "2026-12-04T10:07:30Z").as_deref(),
            Some("2026-12-04T10:15:00Z")
        );
        assert_eq!(
            n("*/15 * * * *", "2026-12-04T10:15:00Z").as_deref(),
            Some("2026-12-04T10:30:00Z")
        );
        assert_eq!(
            n("* * * * *", "2026-12-04T23:59:59.5Z").as_deref(),
            Some("2026-12-05T00:00:00Z")
        );
        assert_eq!(
            n("@hourly", "2026-12-04T10:00:00Z").as_deref(),
            Some("2026-12-04T11:00:00Z")
        );
        assert_eq!(
            n("0 0 29 2 *", "2026-03-01T00:00:00Z").as_deref(),
            Some("2028-02-29T00:00:00Z")
        );
        // Both day fields restricted: either matches (Monday 2026-12-07 comes before the 1st).
        assert_eq!(
            n("0 0 1 * mon", "2026-12-04T00:00:00Z").as_deref(),
            Some("2026-12-07T00:00:00Z")
        );
        // One of them `*`: both must match (so only the restricted one counts).
        assert_eq!(
            n("0 0 * * mon", "2026-12-04T00:00:00Z").as_deref(),
            Some("2026-12-07T00:00:00Z")
        );
        assert_eq!(n("0 0 31 2 *", "2026-01-01T00:00:00Z"), None);
        assert_eq!(
            n("@every 90s", "2026-12-04T10:00:00.7Z").as_deref(),
            Some("2026-12-04T10:01:30Z")
        );
    }

    #[test]
    fn next_activation_follows_the_time_zone_and_its_dst_changes() {
        assert_eq!(
            next("0 9 * * *", "2026-12-04T12:00:00Z", "America/New_York").as_deref(),
            Some("2026-12-04T14:00:00Z")
        );
        // 02:30 does not exist on 2026-03-08 in New York: the next one is a day later (EDT).
        assert_eq!(
            next("30 2 * * *", "2026-03-08T05:00:00Z", "America/New_York").as_deref(),
            Some("2026-03-09T06:30:00Z")
        );
        // 01:30 happens twice on 2026-11-01: it fires at the first (EDT, 05:30Z) only.
        assert_eq!(
            next("30 1 * * *", "2026-11-01T04:00:00Z", "America/New_York").as_deref(),
            Some("2026-11-01T05:30:00Z")
        );
        assert_eq!(
            next("30 1 * * *", "2026-11-01T05:30:00Z", "America/New_York").as_deref(),
            Some("2026-11-02T06:30:00Z")
        );
        // A TZ= prefix wins over the zone passed in.
        assert_eq!(
            next("TZ=Asia/Tokyo 0 9 * * *", "2026-12-04T00:00:00Z", "UTC").as_deref(),
            Some("2026-12-05T00:00:00Z")
        );
    }
}
