//! Kubernetes' quantity library (`library/quantity.go`): `quantity`, `isQuantity` and the
//! `Quantity` arithmetic and comparisons, on `resource.Quantity`'s grammar. A quantity is held as
//! an exact decimal `mantissa × 10^exponent` (binary suffixes multiplied out).

use super::library_type;
use crate::env::{boolean, fail, owned, str_arg, typed, CelResult};
use cel::common::types::{CelDouble, CelInt, INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_to(other) == Ordering::Equal
    }
}

library_type!(Quantity, QUANTITY_TYPE, "kubernetes.Quantity");

const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `resource.ParseQuantity`.
pub fn parse(s: &str) -> Result<Quantity, &'static str> {
    let s = s.trim();
    if s.is_empty() {
        return Err("quantities must have a value");
    }
    let num_end = s
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '+' || *c == '-'))))
        .map_or(s.len(), |(i, _)| i);
    let (num, suffix) = s.split_at(num_end);
    let (neg, digits) = match num.as_bytes().first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(FORMAT_ERROR);
    }
    let mut mantissa: i128 = 0;
    for c in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(c - b'0')))
            .ok_or(FORMAT_ERROR)?;
    }
    let mut exponent = -(frac.len() as i32);
    match suffix {
        "" => {}
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 1,
                "Mi" => 2,
                "Gi" => 3,
                "Ti" => 4,
                "Pi" => 5,
                _ => 6,
            };
            mantissa = mantissa
                .checked_mul(1i128 << (10 * power))
                .ok_or(FORMAT_ERROR)?;
        }
        "n" => exponent -= 9,
        "u" => exponent -= 6,
        "m" => exponent -= 3,
        "k" => exponent += 3,
        "M" => exponent += 6,
        "G" => exponent += 9,
        "T" => exponent += 12,
        "P" => exponent += 15,
        "E" => exponent += 18,
        _ => {
            let exp = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or(FORMAT_ERROR)?;
            let body = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                return Err(FORMAT_ERROR);
            }
            let e: i32 = exp.parse().map_err(|_| FORMAT_ERROR)?;
            exponent = exponent.checked_add(e).ok_or(FORMAT_ERROR)?;
        }
    }
    if neg {
        mantissa = -mantissa;
    }
    Ok(Quantity { mantissa, exponent })
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Quantity {
    fn approx(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    /// Both mantissas at the smaller exponent, when that fits.
    fn aligned(&self, other: &Self) -> Option<(i128, i128, i32)> {
        let e = self.exponent.min(other.exponent);
        let a = self
            .mantissa
            .checked_mul(pow10((self.exponent - e) as u32)?)?;
        let b = other
            .mantissa
            .checked_mul(pow10((other.exponent - e) as u32)?)?;
        Some((a, b, e))
    }

    fn cmp_to(&self, other: &Self) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            None => self
                .approx()
                .partial_cmp(&other.approx())
                .unwrap_or(Ordering::Equal),
        }
    }

    fn as_integer(&self) -> Option<i64> {
        let v = if self.exponent >= 0 {
            self.mantissa.checked_mul(pow10(self.exponent as u32)?)?
        } else {
            let d = pow10((-self.exponent) as u32)?;
            if self.mantissa % d != 0 {
                return None;
            }
            self.mantissa / d
        };
        i64::try_from(v).ok()
    }

    fn add(&self, other: &Self, negate: bool) -> Option<Quantity> {
        let (a, b, e) = self.aligned(other)?;
        let b = if negate { b.checked_neg()? } else { b };
        Some(Quantity {
            mantissa: a.checked_add(b)?,
            exponent: e,
        })
    }
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE.to_owned();
    let q = || QUANTITY_TYPE.to_owned();
    env.add_overload("quantity", "string_to_quantity", vec![s()], quantity)?;
    env.add_overload("isQuantity", "is_quantity_string", vec![s()], is_quantity)?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], sign)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        q(),
        vec![q()],
        greater,
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", q(), vec![q()], less)?;
    env.add_member_overload(
        "compareTo",
        "quantity_compare_to",
        q(),
        vec![q()],
        compare_to,
    )?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], add)?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], add)?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], sub)?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], sub)?;
    env.add_member_overload("asInteger", "quantity_as_integer", q(), vec![], as_integer)?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], is_integer)?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_float",
        q(),
        vec![],
        as_float,
    )?;
    Ok(())
}

fn this(args: &[CowVal<'_, '_>]) -> Result<Quantity, ExecutionError> {
    Ok(*typed::<Quantity>(args, 0)?)
}

fn other(args: &[CowVal<'_, '_>]) -> Result<Quantity, ExecutionError> {
    match typed::<Quantity>(args, 1) {
        Ok(q) => Ok(*q),
        Err(_) => Ok(Quantity {
            mantissa: i128::from(*typed::<CelInt>(args, 1)?.inner()),
            exponent: 0,
        }),
    }
}

fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    match parse(str_arg(&args, 0)?) {
        Ok(q) => owned(q),
        Err(e) => fail("quantity", e),
    }
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(parse(str_arg(&args, 0)?).is_ok())
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelInt::from(this(&args)?.mantissa.signum() as i64))
}

fn greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(this(&args)?.cmp_to(&other(&args)?) == Ordering::Greater)
}

fn less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(this(&args)?.cmp_to(&other(&args)?) == Ordering::Less)
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let o = match this(&args)?.cmp_to(&other(&args)?) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    owned(CelInt::from(o))
}

fn arith<'b, 'v>(args: Vec<CowVal<'b, 'v>>, negate: bool) -> CelResult<'b, 'v> {
    let function = if negate { "sub" } else { "add" };
    match this(&args)?.add(&other(&args)?, negate) {
        Some(q) => owned(q),
        None => fail(function, "quantity overflow"),
    }
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    arith(args, false)
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    arith(args, true)
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    match this(&args)?.as_integer() {
        Some(i) => owned(CelInt::from(i)),
        None => fail("asInteger", "cannot convert value to integer"),
    }
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(this(&args)?.as_integer().is_some())
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelDouble::from(this(&args)?.approx()))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn quantity() {
        assert_eq!(eval("isQuantity('1.5Gi')"), "true");
        assert_eq!(eval("isQuantity('1.5Gx')"), "false");
        assert_eq!(eval("isQuantity('1e3')"), "true");
        assert_eq!(eval("quantity('1Ki').asInteger()"), "1024");
        assert_eq!(eval("quantity('1k').asInteger()"), "1000");
        assert_eq!(eval("quantity('1500m').isInteger()"), "false");
        assert_eq!(eval("quantity('2000m').asInteger()"), "2");
        assert!(eval("quantity('1500m').asInteger()").contains("cannot convert value to integer"));
        assert_eq!(eval("quantity('1500m').asApproximateFloat()"), "1.5");
        assert_eq!(eval("quantity('-1').sign()"), "-1");
        assert_eq!(eval("quantity('0').sign()"), "0");
        assert_eq!(
            eval("quantity('1Gi').isGreaterThan(quantity('1G'))"),
            "true"
        );
        assert_eq!(eval("quantity('1G').isLessThan(quantity('1Gi'))"), "true");
        assert_eq!(eval("quantity('1000m').compareTo(quantity('1'))"), "0");
        assert_eq!(
            eval("quantity('1').add(quantity('500m')).compareTo(quantity('1.5'))"),
            "0"
        );
        assert_eq!(eval("quantity('1').add(2).asInteger()"), "3");
        assert_eq!(eval("quantity('1').sub(quantity('2')).sign()"), "-1");
        assert_eq!(eval("quantity('1').sub(1).sign()"), "0");
        assert_eq!(eval("quantity('1k') == quantity('1000')"), "true");
    }
}
