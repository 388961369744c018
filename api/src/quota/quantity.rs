//! Quota quantities: a value and the format it is written back in, as apimachinery's
//! `resource.Quantity` keeps them for quota arithmetic (`quota.Add`, `quota.Subtract`).
//!
//! The value is exact (nano-units, parsed by [`Amount`]); the format is the suffix family the
//! quantity was written with (`Ki`… binary SI, `e3` decimal exponent, anything else decimal SI).
//! Sums and differences keep the left operand's format unless it is zero, in which case they take
//! the right one's (`Quantity.Add`/`Sub`). Rendering is `Quantity.String`'s canonical form
//! (`CanonicalizeBytes`): `1500m`, `2`, `1k`, `1536Mi`, `0`; a binary-SI value below 1024 or with a
//! fraction falls back to decimal SI, as upstream.
//!
//! Guarantees: parsing never panics (errors are apimachinery's, as values); arithmetic saturates.

use std::cmp::Ordering;
use std::fmt;

use crate::quantity::{Amount, QuantityError};

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;

/// The suffix family a quantity is rendered in (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `k`, `M`, `m`, `n`, … (also no suffix).
    #[default]
    DecimalSi,
    /// `Ki`, `Mi`, `Gi`, ….
    BinarySi,
    /// `e3`, `E-2`.
    DecimalExponent,
}

/// A quantity with its format, for quota arithmetic and rendering.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity {
    nano: i128,
    format: Format,
}

impl PartialEq for Quantity {
    /// By value (`Quantity.Cmp`), whatever the formats.
    fn eq(&self, other: &Self) -> bool {
        self.nano == other.nano
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nano.cmp(&other.nano)
    }
}

impl Quantity {
    /// Parses a quantity string as the API decodes one.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let amount = Amount::parse(s)?;
        Ok(Quantity {
            nano: amount.nano_value(),
            format: format_of(s.trim()),
        })
    }

    /// `resource.NewQuantity(n, DecimalSI)`.
    pub fn from_units(n: i64) -> Quantity {
        Quantity {
            nano: i128::from(n) * NANO,
            format: Format::DecimalSi,
        }
    }

    /// The format the quantity renders in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The exact value in nano-units.
    pub fn nano_value(&self) -> i128 {
        self.nano
    }

    /// Zero.
    pub fn is_zero(&self) -> bool {
        self.nano == 0
    }

    /// Below zero.
    pub fn is_negative(&self) -> bool {
        self.nano < 0
    }

    /// `RoundUp(0)`: the value rounded up to whole units.
    pub fn round_up_to_units(self) -> Quantity {
        let rem = self.nano.rem_euclid(NANO);
        let nano = if rem == 0 {
            self.nano
        } else {
            self.nano.saturating_add(NANO - rem)
        };
        Quantity { nano, ..self }
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;

    /// `Quantity.Add`: the sum (saturating), in this format unless this is zero.
    fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nano: self.nano.saturating_add(other.nano),
            format: if self.nano == 0 {
                other.format
            } else {
                self.format
            },
        }
    }
}

impl std::ops::Sub for Quantity {
    type Output = Quantity;

    /// `Quantity.Sub`: the difference (saturating), in this format unless this is zero.
    fn sub(self, other: Quantity) -> Quantity {
        Quantity {
            nano: self.nano.saturating_sub(other.nano),
            format: if self.nano == 0 {
                other.format
            } else {
                self.format
            },
        }
    }
}

/// The format of a quantity string from its suffix (`quantitySuffixer.interpret`).
fn format_of(s: &str) -> Format {
    let suffix = s.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
    if suffix.ends_with('i') {
        Format::BinarySi
    } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
        Format::DecimalExponent
    } else {
        Format::DecimalSi
    }
}

/// Removes factors of `base` from `value`: (rest, how many).
fn remove_factors(mut value: i128, base: i128) -> (i128, i32) {
    let mut times = 0;
    while value != 0 && value % base == 0 {
        value /= base;
        times += 1;
    }
    (value, times)
}

/// The decimal SI suffix of a power of ten that is a multiple of 3, if it has one.
fn decimal_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
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
        _ => return None,
    })
}

impl fmt::Display for Quantity {
    /// `Quantity.String` (canonical form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nano == 0 {
            return f.write_str("0");
        }
        let whole = self.nano % NANO == 0;
        let binary = self.format == Format::BinarySi
            && whole
            && !(-1024 * NANO < self.nano && self.nano < 1024 * NANO);
        if binary {
            let (amount, times) = remove_factors(self.nano / NANO, 1024);
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                .get(usize::try_from(times).unwrap_or(0))
                .copied()
                .unwrap_or("");
            return write!(f, "{amount}{suffix}");
        }
        // AsCanonicalBytes: mantissa × 10^exponent, the exponent lowered to a multiple of 3.
        let (mut amount, times) = remove_factors(self.nano, 10);
        let mut exponent = times - 9;
        match exponent.rem_euclid(3) {
            1 => {
                amount *= 10;
                exponent -= 1;
            }
            2 => {
                amount *= 100;
                exponent -= 2;
            }
            _ => {}
        }
        match (self.format, decimal_suffix(exponent)) {
            (Format::DecimalExponent, _) if exponent != 0 => write!(f, "{amount}e{exponent}"),
            (Format::DecimalExponent, _) => write!(f, "{amount}"),
            (_, Some(suffix)) => write!(f, "{amount}{suffix}"),
            (_, None) => write!(f, "{amount}e{exponent}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_default()
    }

    #[test]
    fn renders_canonically_as_quantity_string() {
        for (input, shown) in [
            ("1", "1"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("100Ki", "100Ki"),
            ("512", "512"),
            ("0", "0"),
            ("0Gi", "0"),
            ("1e3", "1e3"),
            ("10", "10"),
            ("100", "100"),
            ("20M", "20M"),
            ("1n", "1n"),
            ("-2", "-2"),
        ] {
            assert_eq!(q(input).to_string(), shown, "{input}");
        }
        // Binary SI below 1024 or with a fraction falls back to decimal SI.
        let small = q("1Ki") - q("1000");
        assert_eq!(small.to_string(), "24");
        assert_eq!(q("0.5Ki").to_string(), "512");
    }

    #[test]
    fn sums_keep_the_first_non_zero_format() {
        assert_eq!((q("0") + q("1Gi")).to_string(), "1Gi");
        assert_eq!((q("1Gi") + q("512Mi")).to_string(), "1536Mi");
        assert_eq!((q("500m") + q("500m")).to_string(), "1");
        assert_eq!((q("1Gi") - q("1Gi")).to_string(), "0");
        assert_eq!((q("1") + q("1Ki")).to_string(), "1025");
        assert!(q("1") == q("1000m"));
        assert!(q("2") > q("1999m"));
    }

    #[test]
    fn rounds_storage_up_to_whole_bytes() {
        assert_eq!(q("1500m").round_up_to_units().to_string(), "2");
        assert_eq!(q("2").round_up_to_units().to_string(), "2");
    }
}
