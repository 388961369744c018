//! The canonical text of a quantity: apimachinery's `Quantity.String()` (`CanonicalizeBytes`), as
//! kube-apiserver writes quantities in messages (`maximum cpu usage per Container is 1, but limit
//! is 1500m`).
//!
//! The format is the one the text was written in (its suffix): decimal SI (`m`, `k`, none),
//! binary SI (`Ki`, `Mi`, …) or a decimal exponent (`e3`). Decimal values drop trailing zeros and
//! are shown with the largest SI suffix whose exponent is a multiple of three (`1000` → `1k`,
//! `0.5` → `500m`); binary values are shown with the largest power of 1024 that divides them
//! (`1.5Gi` → `1536Mi`), falling back to decimal SI below 1024 or for fractions, as upstream.

use super::Amount;

/// The format of a quantity, from its suffix (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// The canonical text of the quantity `s`; `None` when it does not parse.
pub fn canonical(s: &str) -> Option<String> {
    let amount = Amount::parse(s).ok()?;
    Some(canonical_of(amount, format_of(s.trim())))
}

/// `amount` written canonically in the format of the quantity text `like` (a sum keeps the format
/// of its first term, as `Quantity.Add` does).
pub fn canonical_as(amount: Amount, like: &str) -> String {
    canonical_of(amount, format_of(like.trim()))
}

/// The format a quantity text selects: `Ki`… binary, `e3`/`E-2` exponent, anything else decimal.
fn format_of(s: &str) -> Format {
    let suffix = s.trim_start_matches(['+', '-']);
    let suffix = suffix.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let mut chars = suffix.chars();
    match (chars.next(), chars.next()) {
        (Some('e' | 'E'), Some(_)) => Format::DecimalExponent,
        _ if suffix.ends_with('i') => Format::BinarySi,
        _ => Format::DecimalSi,
    }
}

const NANO_PER_UNIT: i128 = 1_000_000_000;

fn canonical_of(amount: Amount, format: Format) -> String {
    let nano = amount.nano_value();
    if nano == 0 {
        return "0".to_string();
    }
    let format = match format {
        Format::BinarySi if nano.abs() < 1024 * NANO_PER_UNIT || nano % NANO_PER_UNIT != 0 => {
            Format::DecimalSi
        }
        f => f,
    };
    if format == Format::BinarySi {
        let mut units = nano / NANO_PER_UNIT;
        let mut power = 0;
        while units % 1024 == 0 && power < BINARY_SUFFIXES.len() - 1 {
            units /= 1024;
            power += 1;
        }
        return format!("{units}{}", BINARY_SUFFIXES[power]);
    }
    let (mut mantissa, mut exponent) = (nano, -9i32);
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    // The exponent goes down to a multiple of three (`1.1e5` is `110e3`).
    let extra = exponent.rem_euclid(3);
    mantissa = mantissa.saturating_mul(10i128.pow(extra.unsigned_abs()));
    exponent -= extra;
    let suffix = match format {
        Format::DecimalSi => decimal_suffix(exponent),
        _ if exponent == 0 => String::new(),
        _ => format!("e{exponent}"),
    };
    format!("{mantissa}{suffix}")
}

/// Binary SI suffixes by power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The decimal SI suffix of a power of ten (a multiple of three); an exponent beyond them is
/// written `e<n>`.
fn decimal_suffix(exponent: i32) -> String {
    let s = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return format!("e{exponent}"),
    };
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn canonical_forms_are_apimachinerys() {
        let cases = [
            ("1", "1"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1200", "1200"),
            ("100Mi", "100Mi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("1E6", "1e6"),
            ("0", "0"),
            ("0Mi", "0"),
            ("10G", "10G"),
            ("-1500m", "-1500m"),
            ("1n", "1n"),
            ("100u", "100u"),
            (" 2 ", "2"),
        ];
        for (given, want) in cases {
            assert_eq!(canonical(given).as_deref(), Some(want), "{given}");
        }
        assert_eq!(canonical("abc"), None);
        let sum = super::Amount::from_units(3 * 1024 * 1024);
        assert_eq!(super::canonical_as(sum, "1Mi"), "3Mi");
        assert_eq!(super::canonical_as(sum, "1M"), "3145728");
    }
}
