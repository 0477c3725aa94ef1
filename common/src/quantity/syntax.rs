//! Whether text is a quantity at all, judged as upstream's `ParseQuantity`
//! judges it when the API server decodes an object: the same three refusals,
//! in the same words, and the same oddities accepted (`"."`, `"-"` and
//! `"Ki"` all read as zero there, so they are not refused here either).
//!
//! This only answers "would upstream decode it"; the value itself is read by
//! [`super::parse_scaled`].

use crate::amount::Format;

/// Why text is not a quantity; the messages are upstream's, since clients
/// and users match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// Text outside the grammar (`abc`, `1.2.3`, `10 Mi`).
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// Suffix letters that name no unit (`32MMi`, `1e`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// A suffix whose scale leaves no digits to read (`Pi`, `.e-10`).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
}

/// The pieces upstream splits a quantity into.
pub(super) struct Parts<'a> {
    /// Sign, digits and decimal point as written (`-01.5`).
    pub(super) value: &'a str,
    /// Integer digits without leading zeros (`"0"` when none are left).
    pub(super) num: &'a str,
    /// Fraction digits.
    pub(super) denom: &'a str,
    /// The unit suffix or exponent (`Mi`, `m`, `e3`).
    pub(super) suffix: &'a str,
}

/// Checks `text` (a JSON string's content; surrounding white space is
/// ignored, as upstream trims it).
pub fn check(text: &str) -> Result<(), SyntaxError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SyntaxError::Format);
    }
    let parts = split(text)?;
    let (notation, exponent) = interpret(parts.suffix).ok_or(SyntaxError::Suffix)?;
    let binary = notation == Format::BinarySi;
    // Upstream reads a value that fits its fast path as an integer of the
    // digits alone; anything else goes through a decimal parser, which
    // needs at least one digit in `value`.
    let digits = i32::try_from(parts.num.len() + parts.denom.len()).unwrap_or(i32::MAX);
    let fast = if binary {
        // 2^exponent has about exponent × 0.3 decimal digits; upstream
        // keeps the whole value within 14 of them.
        let approximate_decimal_digits = exponent * 3 / 10;
        parts.denom.is_empty() && digits.saturating_add(approximate_decimal_digits) < 15
    } else {
        const MAX_INT64_FACTORS: i32 = 18;
        const NANO: i64 = -9;
        let denom = i64::try_from(parts.denom.len()).unwrap_or(i64::MAX);
        digits <= MAX_INT64_FACTORS && i64::from(exponent) - denom >= NANO
    };
    if !fast && !parts.value.bytes().any(|b| b.is_ascii_digit()) {
        return Err(SyntaxError::Numeric);
    }
    Ok(())
}

/// Upstream's scan: sign, leading zeros, integer digits, an optional point
/// and fraction, suffix letters, then an optional signed exponent.
pub(super) fn split(text: &str) -> Result<Parts<'_>, SyntaxError> {
    let bytes = text.as_bytes();
    let digits_from = |start: usize| {
        start
            + bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
    };
    let mut pos = usize::from(matches!(bytes[0], b'+' | b'-'));
    pos += bytes[pos..].iter().take_while(|&&b| b == b'0').count();
    let zero = Parts {
        value: "0",
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos == bytes.len() {
        return Ok(zero);
    }
    let num_end = digits_from(pos);
    let num = match &text[pos..num_end] {
        "" => "0",
        digits => digits,
    };
    pos = num_end;
    let mut denom = "";
    if bytes.get(pos) == Some(&b'.') {
        let denom_end = digits_from(pos + 1);
        denom = &text[pos + 1..denom_end];
        pos = denom_end;
    }
    let value = &text[..pos];
    let suffix_start = pos;
    pos += bytes[pos..]
        .iter()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    if matches!(bytes.get(pos), Some(b'+' | b'-')) {
        pos += 1;
    }
    if digits_from(pos) != bytes.len() {
        return Err(SyntaxError::Format);
    }
    Ok(Parts {
        value,
        num,
        denom,
        suffix: &text[suffix_start..],
    })
}

/// The decimal suffixes and their exponents of 10.
pub(super) const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The binary suffixes and their exponents of 2.
pub(super) const BINARY_SUFFIXES: [(&str, i32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// The suffix's notation and exponent (of 2 for binary suffixes, else of
/// 10); `None` for a suffix that names nothing.
pub(super) fn interpret(suffix: &str) -> Option<(Format, i32)> {
    let find = |table: &[(&str, i32)]| table.iter().find(|(s, _)| *s == suffix).map(|e| e.1);
    if let Some(exponent) = find(&DECIMAL_SUFFIXES) {
        return Some((Format::DecimalSi, exponent));
    }
    if let Some(exponent) = find(&BINARY_SUFFIXES) {
        return Some((Format::BinarySi, exponent));
    }
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .filter(|rest| !rest.is_empty())?;
    // Upstream parses an int64 and then keeps its low 32 bits.
    let parsed: i64 = exponent.parse().ok()?;
    Some((Format::DecimalExponent, parsed as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_upstream_refuses_in_its_words() {
        let cases: &[(&str, Result<(), SyntaxError>)] = &[
            ("1", Ok(())),
            ("250m", Ok(())),
            ("0.5", Ok(())),
            ("1.5Gi", Ok(())),
            ("129e6", Ok(())),
            ("1E+3", Ok(())),
            ("1e-3", Ok(())),
            ("+3k", Ok(())),
            ("-2", Ok(())),
            (" 64Mi ", Ok(())),
            ("1E", Ok(())),
            ("1.", Ok(())),
            // Oddities upstream reads as zero.
            (".", Ok(())),
            ("-", Ok(())),
            ("Ki", Ok(())),
            ("0", Ok(())),
            ("", Err(SyntaxError::Format)),
            ("  ", Err(SyntaxError::Format)),
            ("abc", Err(SyntaxError::Format)),
            ("1.2.3", Err(SyntaxError::Format)),
            ("10 Mi", Err(SyntaxError::Format)),
            ("1Mi5x", Err(SyntaxError::Format)),
            ("1e3.5", Err(SyntaxError::Format)),
            ("32MMi", Err(SyntaxError::Suffix)),
            ("1e", Err(SyntaxError::Suffix)),
            ("1ee3", Err(SyntaxError::Suffix)),
            ("1Ki3", Err(SyntaxError::Suffix)),
            ("1e99999999999999999999", Err(SyntaxError::Suffix)),
            ("Pi", Err(SyntaxError::Numeric)),
            (".Ei", Err(SyntaxError::Numeric)),
            (".e-10", Err(SyntaxError::Numeric)),
        ];
        for (text, want) in cases {
            assert_eq!(check(text), *want, "{text:?}");
        }
    }

    #[test]
    fn the_format_message_names_upstreams_expression() {
        assert_eq!(
            SyntaxError::Format.to_string(),
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }
}
