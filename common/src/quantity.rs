//! Resource quantities (`250m`, `1Gi`, `1.5`, `129e6`) as integers, exactly
//! and rounded up as upstream's `Value()` and `MilliValue()` are, so that
//! the scheduler's fit checks, the node's cgroup limits and the downward API
//! all read a quantity the same way.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Parses a quantity into its value times `scale` (1 for plain units, 1000
/// for milli-units), rounding away from zero like upstream; values beyond
/// `i64` saturate. `None` for text that is not a quantity.
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
    let saturated = if negative { i64::MIN } else { i64::MAX };
    // value = mantissa * 10^(exp10 - fraction digits) * 2^exp2
    let mut mantissa: i128 = 0;
    for c in int_part.chars().chain(frac_part.chars()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(c as u8 - b'0'))?;
        if mantissa > i128::from(i64::MAX) * 1_000_000 {
            return Some(saturated);
        }
    }
    let (exp10, exp2) = suffix_exponents(suffix)?;
    let exp10 = exp10 - frac_part.len() as i32;
    let numerator = mantissa
        .checked_mul(scale)?
        .checked_mul(1i128.checked_shl(exp2)?)?;
    let value = if exp10 >= 0 {
        let mut v = numerator;
        for _ in 0..exp10 {
            v = match v.checked_mul(10) {
                Some(v) if v <= i128::from(i64::MAX) => v,
                _ => return Some(saturated),
            };
        }
        v
    } else {
        let divisor = 10i128.checked_pow((-exp10) as u32).unwrap_or(i128::MAX);
        (numerator + divisor - 1) / divisor
    };
    let value = i64::try_from(value).unwrap_or(i64::MAX);
    Some(if negative { -value } else { value })
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
        ];
        for (s, scale, want) in cases {
            assert_eq!(parse_scaled(s, *scale), *want, "{s:?} at scale {scale}");
        }
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
