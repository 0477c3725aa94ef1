//! Resource quantities (`250m`, `1Gi`, `1.5`, `129e6`) as integers, exactly
//! and rounded up as upstream's `Value()` and `MilliValue()` are, so that
//! the scheduler's fit checks, the node's cgroup limits and the downward API
//! all read a quantity the same way.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub mod canonical;
pub mod syntax;

/// Parses a quantity into its value times `scale` (1 for plain units, 1000
/// for milli-units), rounding away from zero like upstream; values beyond
/// `i64` saturate at `±i64::MAX`. `None` for text that is not a quantity.
pub fn parse_scaled(s: &str, scale: i128) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." {
        return None;
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') {
        return None;
    }
    let (exp10, exp2) = suffix_exponents(suffix)?;
    let magnitude = scaled_magnitude(int_part, frac_part, i64::from(exp10), exp2, scale)
        // Symmetric, so a saturated value prints as a quantity that reads
        // back as itself (`i64::MIN` has no positive counterpart).
        .unwrap_or(i64::MAX);
    Some(if negative { -magnitude } else { magnitude })
}

/// Significant digits kept exactly; any further digits only round up. Far
/// more than an `i64` holds, so every quantity short of that is exact.
const KEPT_DIGITS: u32 = 24;

/// `digits × 10^exp10 × 2^exp2 × scale`, rounded up; `None` beyond
/// `i64::MAX`. The exponent comes from the user's text, so nothing here may
/// grow with it: huge exponents decide the answer at once.
fn scaled_magnitude(
    int_part: &str,
    frac_part: &str,
    mut exp10: i64,
    exp2: u32,
    scale: i128,
) -> Option<i64> {
    let limit = 10i128.pow(KEPT_DIGITS);
    let mut mantissa: i128 = 0;
    let mut dropped_nonzero = false;
    let int_len = int_part.len();
    for (i, c) in int_part.bytes().chain(frac_part.bytes()).enumerate() {
        let digit = i128::from(c - b'0');
        let fraction = i >= int_len;
        if mantissa < limit {
            mantissa = mantissa * 10 + digit;
            exp10 -= i64::from(fraction);
        } else {
            // A digit past the kept ones scales the value (in the integer
            // part) or only says it is not exact (in the fraction).
            exp10 += i64::from(!fraction);
            dropped_nonzero |= digit != 0;
        }
    }
    mantissa += i128::from(dropped_nonzero);
    if mantissa == 0 {
        return Some(0);
    }
    // The mantissa is at least one, so from 10^26 up no value fits an i64.
    if exp10 > 25 {
        return None;
    }
    let mut numerator = mantissa;
    for factor in [scale, 1i128 << exp2] {
        numerator = loop {
            match numerator.checked_mul(factor) {
                Some(n) => break n,
                // Only a division by a power of ten could bring it back:
                // give up last digits (rounding up) rather than overflow.
                None if exp10 < 0 => {
                    numerator = numerator / 10 + i128::from(numerator % 10 != 0);
                    exp10 += 1;
                }
                None => return None,
            }
        };
    }
    let value = if exp10 >= 0 {
        let power = 10i128.checked_pow(u32::try_from(exp10).ok()?)?;
        numerator.checked_mul(power)?
    } else {
        match u32::try_from(-exp10)
            .ok()
            .and_then(|e| 10i128.checked_pow(e))
        {
            Some(divisor) => numerator / divisor + i128::from(numerator % divisor != 0),
            // 10^39 exceeds every numerator: a positive value below one.
            None => 1,
        }
    };
    i64::try_from(value).ok()
}

/// The decimal and binary exponents a suffix stands for.
fn suffix_exponents(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))?;
            (exp.parse::<i32>().ok()?, 0)
        }
    })
}

/// The value in base units (bytes, cores), rounded up.
pub fn value(q: &Quantity) -> Option<i64> {
    parse_scaled(&q.0, 1)
}

/// The value in thousandths of base units (millicores), rounded up.
pub fn milli_value(q: &Quantity) -> Option<i64> {
    parse_scaled(&q.0, 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quantities_like_upstream() {
        let cases: &[(&str, i128, Option<i64>)] = &[
            ("1", 1000, Some(1000)),
            ("250m", 1000, Some(250)),
            ("0.5", 1000, Some(500)),
            ("1.5", 1, Some(2)),
            ("1Ki", 1, Some(1024)),
            ("1Gi", 1, Some(1 << 30)),
            ("128974848", 1, Some(128_974_848)),
            ("129e6", 1, Some(129_000_000)),
            ("129M", 1, Some(129_000_000)),
            ("123Mi", 1, Some(123 * 1024 * 1024)),
            ("1m", 1, Some(1)),
            ("100n", 1000, Some(1)),
            ("0.0001", 1000, Some(1)),
            ("-2", 1, Some(-2)),
            ("+3k", 1, Some(3000)),
            ("", 1, None),
            ("abc", 1, None),
            ("1Qi", 1, None),
            ("12Q", 1, None),
            ("1.2.3", 1, None),
            ("9Ei", 1000, Some(i64::MAX)),
            ("-9Ei", 1000, Some(-i64::MAX)),
            ("1.000000000000000000000000000001", 1, Some(2)),
            ("1.000000000000000000000000000000", 1000, Some(1000)),
            ("100000000000000000000000000000e-25", 1, Some(10_000)),
            ("0e2147483647", 1, Some(0)),
            ("1e2147483647", 1, Some(i64::MAX)),
            ("1e-2147483648", 1, Some(1)),
            ("1.5e-2147483648", 1000, Some(1)),
            ("-0.5e-2147483648", 1, Some(-1)),
            ("922337203685477580700000e-50", 1000, Some(1)),
            ("99999999999999999999999999Ei", 1000, Some(i64::MAX)),
            ("1e2147483648", 1, None),
        ];
        for (s, scale, want) in cases {
            assert_eq!(parse_scaled(s, *scale), *want, "{s:?} at scale {scale}");
        }
    }

    /// Found by the `quantity` fuzz target: the most negative value printed
    /// as a quantity that read back one higher, and extreme exponents
    /// overflowed (a panic in debug builds, a wrong value in release) or
    /// looped for billions of steps.
    #[test]
    fn saturated_and_extreme_quantities_read_back_as_themselves() {
        let low = parse_scaled("-1E22", 1000).unwrap();
        assert_eq!(low, -i64::MAX);
        let printed = crate::amount::Amount::parse("-1E22").unwrap().to_string();
        assert_eq!(parse_scaled(&printed, 1000), Some(low), "{printed}");
        assert_eq!(parse_scaled("0.000e99999999", 1000), Some(0));
    }

    #[test]
    fn value_and_milli_value_read_a_quantity() {
        assert_eq!(milli_value(&Quantity("100m".into())), Some(100));
        assert_eq!(milli_value(&Quantity("1.5".into())), Some(1500));
        assert_eq!(value(&Quantity("128Mi".into())), Some(128 << 20));
        assert_eq!(value(&Quantity("1G".into())), Some(1_000_000_000));
        assert_eq!(value(&Quantity("2e3".into())), Some(2000));
    }
}
