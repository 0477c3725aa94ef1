//! A quantity's text as upstream stores and prints it: every quantity an
//! API server decodes is re-encoded in canonical form (`0.5` is `500m`,
//! `1.5Gi` is `1536Mi`, `1e8` is `100e6`), rounded up to a nano, in the
//! notation it was written in (binary suffixes only for whole values of
//! at least 1024).

use super::syntax::{self, BINARY_SUFFIXES, DECIMAL_SUFFIXES};
use crate::amount::Format;

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// The canonical text of the quantity `text`; `None` for text that is not
/// a quantity (see [`syntax::check`]) or whose value is beyond what this
/// computes exactly (about 10^29), which is left as written.
pub fn canonical(text: &str) -> Option<String> {
    let text = text.trim();
    syntax::check(text).ok()?;
    let parts = syntax::split(text).ok()?;
    let (mut format, exponent) = syntax::interpret(parts.suffix)?;
    let digits: i128 = format!("{}{}", parts.num, parts.denom).parse().ok()?;
    let fraction_digits = u32::try_from(parts.denom.len()).ok()?;
    // The magnitude in nano-units, rounded up as upstream rounds.
    let nanos = match format {
        Format::BinarySi => {
            let whole = digits
                .checked_mul(1i128.checked_shl(u32::try_from(exponent).ok()?)?)?
                .checked_mul(NANOS_PER_UNIT)?;
            ceil_div(whole, 10i128.checked_pow(fraction_digits)?)
        }
        Format::DecimalSi | Format::DecimalExponent => {
            let shift = i64::from(exponent) - i64::from(fraction_digits) + 9;
            if shift >= 0 {
                digits.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?
            } else {
                match u32::try_from(-shift)
                    .ok()
                    .and_then(|s| 10i128.checked_pow(s))
                {
                    Some(divisor) => ceil_div(digits, divisor),
                    // Beyond i128's range: any non-zero digits are one nano.
                    None => i128::from(digits != 0),
                }
            }
        }
    };
    if nanos == 0 {
        return Some("0".into());
    }
    let sign = if parts.value.starts_with('-') {
        "-"
    } else {
        ""
    };
    // Binary suffixes only for whole values of 1024 and more.
    if format == Format::BinarySi && (nanos < 1024 * NANOS_PER_UNIT || nanos % NANOS_PER_UNIT != 0)
    {
        format = Format::DecimalSi;
    }
    let (mantissa, suffix) = match format {
        Format::BinarySi => {
            let (mantissa, times) = remove_factors(nanos / NANOS_PER_UNIT, 1024);
            let exponent = i32::try_from(times * 10).ok()?;
            let suffix = BINARY_SUFFIXES.iter().find(|(_, e)| *e == exponent)?.0;
            (mantissa, suffix.to_string())
        }
        Format::DecimalSi | Format::DecimalExponent => {
            let (mut mantissa, times) = remove_factors(nanos, 10);
            let mut exponent = i32::try_from(times).ok()? - 9;
            // Down to a multiple of 3, as upstream's exponents are.
            let extra = exponent.rem_euclid(3);
            mantissa = mantissa.checked_mul(10i128.pow(extra.unsigned_abs()))?;
            exponent -= extra;
            let suffix = if format == Format::DecimalExponent {
                if exponent == 0 {
                    String::new()
                } else {
                    format!("e{exponent}")
                }
            } else {
                DECIMAL_SUFFIXES
                    .iter()
                    .find(|(_, e)| *e == exponent)?
                    .0
                    .to_string()
            };
            (mantissa, suffix)
        }
    };
    Some(format!("{sign}{mantissa}{suffix}"))
}

fn ceil_div(n: i128, d: i128) -> i128 {
    n / d + i128::from(n % d != 0)
}

/// `n` without its factors of `base`, and how many there were.
fn remove_factors(mut n: i128, base: i128) -> (i128, u32) {
    let mut times = 0;
    while n != 0 && n % base == 0 {
        n /= base;
        times += 1;
    }
    (n, times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_as_upstream_stores_them() {
        let cases = [
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("0.25", "250m"),
            ("1500", "1500"),
            ("1000", "1k"),
            ("250m", "250m"),
            ("1e8", "100e6"),
            ("1E3", "1e3"),
            ("129e6", "129e6"),
            ("100000000", "100M"),
            ("64Mi", "64Mi"),
            ("1.5Gi", "1536Mi"),
            ("64.5Mi", "66048Ki"),
            ("1024", "1024"),
            ("2048Ki", "2Mi"),
            ("0.5Ki", "512"),
            ("1536", "1536"),
            ("100n", "100n"),
            ("0.1m", "100u"),
            ("0.5n", "1n"),
            ("-1.5", "-1500m"),
            ("+3k", "3k"),
            ("0", "0"),
            ("0.000", "0"),
            (" 2 ", "2"),
            ("24683792Ki", "24683792Ki"),
            ("243497856615", "243497856615"),
        ];
        for (text, want) in cases {
            assert_eq!(canonical(text).as_deref(), Some(want), "{text:?}");
        }
        assert_eq!(canonical("abc"), None);
        assert_eq!(canonical("1e99"), None, "beyond what is computed exactly");
    }
}
