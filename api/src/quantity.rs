//! Resource quantities as numbers: apimachinery's `resource.ParseQuantity`, for comparing and summing.
//!
//! A quantity string (`"1"`, `"1000m"`, `"1Gi"`, `"1.5e3"`) parses into an [`Amount`]: its exact value in
//! nano-units (10⁻⁹), so `"1" == "1000m"` and `"1Gi" == "1024Mi"`. The grammar and the rounding are
//! apimachinery's (`pkg/api/resource/quantity.go`):
//!
//! * `[+-]? digits [. digits]? suffix`, where the suffix is a decimal SI one (`n u m "" k M G T P E`), a
//!   binary SI one (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent (`e3`, `E-2`); scanning is
//!   `parseQuantityString`'s, so its corner cases hold too (`".5"`, `"1."` and even `"m"` parse);
//! * a value finer than nano is rounded away from zero to the next nano (`"0.9n"` is `1n`), exactly
//!   when `ParseQuantity` leaves its int64 fast path; that slow path also caps a binary-SI value at
//!   2⁶³−1 (`"8Ei"`);
//! * [`Amount::parse`] trims surrounding whitespace first, as `Quantity.UnmarshalJSON` does for every
//!   quantity the API decodes.
//!
//! Guarantees: parsing never panics and reports apimachinery's three errors as values; arithmetic
//! saturates. The one departure: a magnitude beyond ±1.7·10²⁹ units (i128 nano-units) saturates, where
//! apimachinery keeps arbitrary precision; no resource quantity comes near it.

use std::fmt;
use std::str::FromStr;

mod canonical;
pub use canonical::{canonical, canonical_as};

/// A quantity string that `ParseQuantity` rejects; the text is apimachinery's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`: not `number suffix` at all.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// `ErrNumeric`: the number part has no digits where the slow path needs some.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`: an unknown suffix (`1Qi`, `1K`, `1e`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// The value of a parsed quantity, in nano-units. Ordered and compared by value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount {
    nano: i128,
}

/// Nano-units per unit.
const NANO_PER_UNIT: i128 = 1_000_000_000;
/// Nano-units per milli-unit.
const NANO_PER_MILLI: i128 = 1_000_000;
/// The cap of a binary-SI slow-path value: `maxAllowed` = 2⁶³−1 units.
const MAX_ALLOWED_NANO: i128 = i64::MAX as i128 * NANO_PER_UNIT;

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount { nano: 0 };

    /// Parses a quantity as the API decodes one: surrounding whitespace trimmed (`UnmarshalJSON`),
    /// then `ParseQuantity`.
    pub fn parse(s: &str) -> Result<Amount, QuantityError> {
        parse_quantity(s.trim())
    }

    /// An amount of whole units (`resource.NewQuantity`).
    pub fn from_units(units: i64) -> Amount {
        Amount {
            nano: i128::from(units) * NANO_PER_UNIT,
        }
    }

    /// The exact value in nano-units.
    pub fn nano_value(self) -> i128 {
        self.nano
    }

    /// `MilliValue`: milli-units, rounded away from zero (`"1n"` is 1 milli).
    pub fn milli_value(self) -> i128 {
        div_away_from_zero(self.nano, NANO_PER_MILLI)
    }

    /// `Value`: whole units, rounded away from zero.
    pub fn value(self) -> i128 {
        div_away_from_zero(self.nano, NANO_PER_UNIT)
    }

    /// Greater than zero (`q.Cmp(zero) == 1`).
    pub fn is_positive(self) -> bool {
        self.nano > 0
    }

    /// Sum, saturating at the representable range.
    pub fn saturating_add(self, other: Amount) -> Amount {
        Amount {
            nano: self.nano.saturating_add(other.nano),
        }
    }
}

impl FromStr for Amount {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Amount::parse(s)
    }
}

impl fmt::Display for Amount {
    /// The value in nano-units with an `n` suffix (a valid quantity, not the canonical form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}n", self.nano)
    }
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    match n % d {
        0 => q,
        _ if n > 0 => q + 1,
        _ => q - 1,
    }
}

/// What `parseQuantityString` splits a quantity into.
struct Scanned<'a> {
    positive: bool,
    /// Integer digits, leading zeros stripped; `"0"` when there are none.
    num: &'a str,
    /// Fraction digits as written.
    denom: &'a str,
    suffix: &'a str,
    /// Whether the number text (`value` upstream) has a digit: `inf.Dec.SetString` needs one.
    value_has_digit: bool,
}

fn is_digit_at(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// `parseQuantityString`, step for step (byte positions; every cut is at an ASCII byte).
fn scan(s: &str) -> Result<Scanned<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let slice = |from: usize, to: usize| s.get(from..to).unwrap_or("");
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let zeros_from = pos;
    while b.get(pos) == Some(&b'0') {
        pos += 1;
    }
    if pos >= end {
        // Only a sign and zeros: the value is "0".
        return Ok(Scanned {
            positive,
            num: "0",
            denom: "",
            suffix: "",
            value_has_digit: true,
        });
    }
    let num_from = pos;
    while is_digit_at(b, pos) {
        pos += 1;
    }
    let mut num = slice(num_from, pos);
    let mut has_digit = pos > zeros_from;
    if pos >= end {
        return Ok(Scanned {
            positive,
            num,
            denom: "",
            suffix: "",
            value_has_digit: has_digit,
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let denom_from = pos;
        while is_digit_at(b, pos) {
            pos += 1;
        }
        denom = slice(denom_from, pos);
        has_digit |= !denom.is_empty();
        if pos >= end {
            return Ok(Scanned {
                positive,
                num,
                denom,
                suffix: "",
                value_has_digit: has_digit,
            });
        }
    }
    let suffix_from = pos;
    while b.get(pos).is_some_and(|c| b"eEinumkKMGTP".contains(c)) {
        pos += 1;
    }
    if matches!(b.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    while is_digit_at(b, pos) {
        pos += 1;
    }
    if pos < end {
        // A character that fits no part of the grammar.
        return Err(QuantityError::Format);
    }
    Ok(Scanned {
        positive,
        num,
        denom,
        suffix: slice(suffix_from, end),
        value_has_digit: has_digit,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    DecimalExponent,
    BinarySi,
}

/// `quantitySuffixer.interpret`: `(base, exponent, format)`.
fn interpret(suffix: &str) -> Result<(u32, i32, Format), QuantityError> {
    let decimal =
        |e: i32| -> Result<(u32, i32, Format), QuantityError> { Ok((10, e, Format::DecimalSi)) };
    let binary =
        |e: i32| -> Result<(u32, i32, Format), QuantityError> { Ok((2, e, Format::BinarySi)) };
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.len() > 1 && s.starts_with(['e', 'E']) => {
            let exp: i64 = s[1..].parse().map_err(|_| QuantityError::Suffix)?;
            // Upstream converts with `int32(parsed)`, which wraps.
            Ok((10, exp as i32, Format::DecimalExponent))
        }
        _ => Err(QuantityError::Suffix),
    }
}

/// `ParseQuantity` (no trimming).
fn parse_quantity(s: &str) -> Result<Amount, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    let q = scan(s)?;
    let (base, exponent, format) = interpret(q.suffix)?;
    let digits = q.num.len() + q.denom.len();
    // Whether upstream's int64 fast path takes the value: then it is kept exactly (a multiple of a nano).
    let fast_path = match format {
        Format::DecimalSi | Format::DecimalExponent => {
            digits <= 18 && i64::from(exponent) - q.denom.len() as i64 >= -9
        }
        Format::BinarySi => {
            let precision = 15 - q.num.len() as i64 - i64::from(exponent) * 3 / 10 - 1;
            q.denom.is_empty()
                && precision >= 0
                && q.num
                    .parse::<i64>()
                    .ok()
                    .and_then(|v| v.checked_mul(1i64 << exponent))
                    .is_some()
        }
    };
    if !fast_path && !q.value_has_digit {
        return Err(QuantityError::Numeric);
    }
    let (binary_exp, decimal_exp) = if base == 2 {
        (exponent.unsigned_abs(), 0)
    } else {
        (0, i64::from(exponent))
    };
    // value = digits × 2^binary_exp × 10^(decimal_exp − |denom|); in nano-units, 9 more powers of ten.
    let pow10 = decimal_exp - q.denom.len() as i64 + 9;
    let mut nano = nano_magnitude(q.num.bytes().chain(q.denom.bytes()), binary_exp, pow10);
    if !fast_path && format == Format::BinarySi {
        nano = nano.min(MAX_ALLOWED_NANO);
    }
    Ok(Amount {
        nano: if q.positive { nano } else { -nano },
    })
}

/// `⌈digits × 2^binary_exp × 10^pow10⌉`, exact for any digit string, saturating at `i128::MAX`.
///
/// Works on a decimal digit vector (most significant first), so neither long fractions nor large
/// exponents overflow an intermediate.
fn nano_magnitude(digits: impl Iterator<Item = u8>, binary_exp: u32, pow10: i64) -> i128 {
    let mut d: Vec<u8> = digits.map(|c| c - b'0').skip_while(|&c| c == 0).collect();
    if d.is_empty() {
        return 0;
    }
    let factor = 1u128 << binary_exp.min(64);
    if factor > 1 {
        let mut carry: u128 = 0;
        for digit in d.iter_mut().rev() {
            let v = u128::from(*digit) * factor + carry;
            *digit = (v % 10) as u8;
            carry = v / 10;
        }
        let mut high = Vec::new();
        while carry > 0 {
            high.push((carry % 10) as u8);
            carry /= 10;
        }
        high.reverse();
        high.extend_from_slice(&d);
        d = high;
    }
    // i128::MAX has 39 digits: more means saturation (the vector has no leading zeros).
    const MAX_DIGITS: i64 = 39;
    let len = d.len() as i64;
    let (int_len, round_up) = if pow10 >= 0 {
        if len + pow10 > MAX_DIGITS {
            return i128::MAX;
        }
        (d.len(), false)
    } else {
        let keep = (len + pow10).max(0) as usize;
        (keep, d[keep..].iter().any(|&c| c != 0))
    };
    let mut v: i128 = 0;
    for &c in &d[..int_len] {
        v = match v.checked_mul(10).and_then(|v| v.checked_add(i128::from(c))) {
            Some(v) => v,
            None => return i128::MAX,
        };
    }
    for _ in 0..pow10.max(0) {
        v = match v.checked_mul(10) {
            Some(v) => v,
            None => return i128::MAX,
        };
    }
    if round_up {
        v.saturating_add(1)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nano(s: &str) -> Option<i128> {
        Amount::parse(s).ok().map(Amount::nano_value)
    }

    fn milli(s: &str) -> Option<i128> {
        Amount::parse(s).ok().map(Amount::milli_value)
    }

    #[test]
    fn quantities_parse_to_milli_units() {
        assert_eq!(milli("100m"), Some(100));
        assert_eq!(milli("1"), Some(1000));
        assert_eq!(milli("0.5"), Some(500));
        assert_eq!(milli("1.5"), Some(1500));
        assert_eq!(milli("1Ki"), Some(1_024_000));
        assert_eq!(milli("128Mi"), Some(128 * 1024 * 1024 * 1000));
        assert_eq!(milli("1G"), Some(1_000_000_000_000));
        assert_eq!(milli("1e3"), Some(1_000_000));
        assert_eq!(milli("1n"), Some(1), "rounds up");
        assert_eq!(milli("-2"), Some(-2000));
        assert_eq!(milli("abc"), None);
        assert_eq!(milli("1Qi"), None);
        assert_eq!(milli(""), None);
    }

    #[test]
    fn equal_values_in_different_units_compare_equal() {
        let q = |s: &str| Amount::parse(s).unwrap_or(Amount::ZERO);
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1.5Gi"), q("1536Mi"));
        assert_eq!(q("+1"), q("1"));
        assert_eq!(q(" 1 "), q("1"), "trimmed as UnmarshalJSON does");
        assert!(q("1001m") > q("1"));
        assert!(q("1n") < q("1u"));
        assert!(q("-1") < Amount::ZERO);
        assert_eq!(Amount::from_units(3), q("3"));
    }

    #[test]
    fn finer_than_nano_rounds_away_from_zero() {
        assert_eq!(nano("0.9n"), Some(1));
        assert_eq!(nano("1.1n"), Some(2));
        assert_eq!(nano("-0.1n"), Some(-1));
        assert_eq!(nano("1e-20"), Some(1));
        assert_eq!(nano("0.0000000001"), Some(1));
        assert_eq!(nano("0.000000001"), Some(1));
        assert_eq!(nano("0e-20"), Some(0));
    }

    #[test]
    fn upstream_scanner_corner_cases() {
        // parseQuantityString accepts these.
        assert_eq!(nano(".5"), Some(500_000_000));
        assert_eq!(nano("5."), Some(5 * NANO_PER_UNIT));
        assert_eq!(nano("1.G"), Some(NANO_PER_UNIT * 1_000_000_000));
        assert_eq!(nano("m"), Some(0));
        assert_eq!(nano("-"), Some(0));
        assert_eq!(nano("000"), Some(0));
        assert_eq!(nano("007"), Some(7 * NANO_PER_UNIT));
        assert_eq!(nano("1e+3"), Some(1000 * NANO_PER_UNIT));
        assert_eq!(nano("1E-3"), Some(NANO_PER_MILLI));
        assert_eq!(nano("1E"), Some(NANO_PER_UNIT * 1_000_000_000_000_000_000));
        // ... and rejects these, with its three errors.
        assert_eq!(Amount::parse("1.5.5"), Err(QuantityError::Format));
        assert_eq!(Amount::parse("1 m"), Err(QuantityError::Format));
        assert_eq!(Amount::parse("1x"), Err(QuantityError::Format));
        assert_eq!(Amount::parse("1K"), Err(QuantityError::Suffix));
        assert_eq!(Amount::parse("1e"), Err(QuantityError::Suffix));
        assert_eq!(Amount::parse("1Mi5"), Err(QuantityError::Suffix));
        assert_eq!(Amount::parse("--1"), Err(QuantityError::Suffix));
        // No digits where the slow path needs them (`inf.Dec.SetString(".")`).
        assert_eq!(Amount::parse(".Pi"), Err(QuantityError::Numeric));
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
    }

    #[test]
    fn binary_slow_path_caps_at_max_int64() {
        assert_eq!(nano("8Ei"), Some(MAX_ALLOWED_NANO));
        assert_eq!(nano("-8Ei"), Some(-MAX_ALLOWED_NANO));
        assert_eq!(nano("1Ei"), Some((1i128 << 60) * NANO_PER_UNIT));
        // A decimal value is not capped.
        assert_eq!(
            nano("10E"),
            Some(10 * NANO_PER_UNIT * 1_000_000_000_000_000_000)
        );
    }

    #[test]
    fn huge_values_saturate() {
        assert_eq!(nano("1e100"), Some(i128::MAX));
        assert_eq!(nano("-1e100"), Some(-i128::MAX));
        assert_eq!(nano(&"9".repeat(60)), Some(i128::MAX));
        let a = Amount::parse("1e100").unwrap_or_default();
        assert_eq!(a.saturating_add(a), a);
    }

    #[test]
    fn value_and_milli_value_round_away_from_zero() {
        let a = Amount::parse("1500m").unwrap_or_default();
        assert_eq!((a.value(), a.milli_value()), (2, 1500));
        let b = Amount::parse("-1500m").unwrap_or_default();
        assert_eq!((b.value(), b.milli_value()), (-2, -1500));
        assert_eq!(Amount::parse("2").map(Amount::value), Ok(2));
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = Amount::parse(&s);
        }

        #[test]
        fn parse_never_panics_on_quantity_alphabet(s in "[-+.0-9eEinumkKMGTP]{0,30}") {
            let _ = Amount::parse(&s);
        }

        #[test]
        fn integer_milli_quantities_are_exact(n in -1_000_000_000i64..1_000_000_000) {
            prop_assert_eq!(milli(&format!("{n}m")), Some(i128::from(n)));
            prop_assert_eq!(Amount::parse(&format!("{n}")), Ok(Amount::from_units(n)));
        }
    }
}
