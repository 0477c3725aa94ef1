//! Quantities as numbers that add, compare and print back the way upstream
//! prints a computed quantity (`1536Mi`, `1500m`, `2`), for quota sums and
//! limit checks.
//!
//! An [`Amount`] holds thousandths of its unit (upstream's `MilliValue`,
//! read with [`crate::quantity::parse_scaled`]) and the notation it was
//! written in. That is exact for every quantity of milli precision up to
//! about 9.2e15 units (8 PiB of bytes); finer fractions round up to the next
//! thousandth, and sums saturate instead of wrapping. It must never be used
//! where nano precision matters (nothing in quota or limit ranges does).

use std::cmp::Ordering;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::parse_scaled;

/// The notation a quantity is written and printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of 1000 (`m`, `k`, `M`, `G`, ...) or no suffix.
    DecimalSi,
    /// Powers of 1024 (`Ki`, `Mi`, `Gi`, ...).
    BinarySi,
    /// A decimal exponent (`1e3`).
    DecimalExponent,
}

/// A quantity's value in thousandths of its unit, and its notation.
#[derive(Debug, Clone, Copy)]
pub struct Amount {
    milli: i64,
    format: Format,
}

const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl Amount {
    /// Zero, in decimal notation (what upstream starts a sum from).
    pub const ZERO: Amount = Amount {
        milli: 0,
        format: Format::DecimalSi,
    };

    /// A count of objects.
    pub fn count(n: i64) -> Self {
        Amount {
            milli: n.saturating_mul(1000),
            format: Format::DecimalSi,
        }
    }

    /// Reads a quantity's text; `None` when it is not a quantity.
    pub fn parse(text: &str) -> Option<Self> {
        let milli = parse_scaled(text, 1000)?;
        let suffix = text
            .trim()
            .trim_start_matches(['+', '-'])
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let format = if suffix.ends_with('i') {
            Format::BinarySi
        } else if suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        };
        Some(Amount { milli, format })
    }

    /// Reads a [`Quantity`]; `None` when its text is not a quantity.
    pub fn of(quantity: &Quantity) -> Option<Self> {
        Self::parse(&quantity.0)
    }

    /// The value in thousandths of the unit.
    pub fn milli(&self) -> i64 {
        self.milli
    }

    /// The notation it prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.milli == 0
    }

    /// As a [`Quantity`] in canonical form.
    pub fn to_quantity(&self) -> Quantity {
        Quantity(self.to_string())
    }
}

/// The sum, in the first term's notation (the second's when the first is
/// zero, as upstream's sums take the first non-zero term's).
impl std::ops::Add for Amount {
    type Output = Amount;

    fn add(self, other: Amount) -> Amount {
        Amount {
            milli: self.milli.saturating_add(other.milli),
            format: if self.is_zero() {
                other.format
            } else {
                self.format
            },
        }
    }
}

/// The difference, in the first term's notation.
impl std::ops::Sub for Amount {
    type Output = Amount;

    fn sub(self, other: Amount) -> Amount {
        Amount {
            milli: self.milli.saturating_sub(other.milli),
            format: self.format,
        }
    }
}

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli
    }
}

impl Eq for Amount {}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.milli.cmp(&other.milli)
    }
}

/// Upstream's canonical form: binary amounts of whole units from 1024 up
/// with the largest power of 1024 that divides them, everything else with
/// the largest power of 1000 (from milli up) that leaves a whole number.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli == 0 {
            return f.write_str("0");
        }
        let sign = if self.milli < 0 { "-" } else { "" };
        let abs = self.milli.unsigned_abs();
        let binary =
            self.format == Format::BinarySi && abs >= 1024 * 1000 && abs.is_multiple_of(1000);
        if binary {
            let mut units = abs / 1000;
            let mut power = 0;
            while power + 1 < BINARY_SUFFIXES.len() && units.is_multiple_of(1024) {
                units /= 1024;
                power += 1;
            }
            return write!(f, "{sign}{units}{}", BINARY_SUFFIXES[power]);
        }
        let mut mantissa = abs;
        let mut exponent: i32 = -3;
        while exponent < 18 && mantissa.is_multiple_of(1000) {
            mantissa /= 1000;
            exponent += 3;
        }
        let suffix = match (self.format, exponent) {
            (_, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -3) => "m".into(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            _ => "E".into(),
        };
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Amount::parse(text).unwrap().to_string()
    }

    #[test]
    fn prints_quantities_in_upstreams_canonical_form() {
        let cases = [
            ("1", "1"),
            ("1000m", "1"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            ("100m", "100m"),
            ("2000000", "2M"),
            ("1200000", "1200k"),
            ("1Gi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1024", "1024"),
            ("512Ki", "512Ki"),
            ("1000Ki", "1000Ki"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("0Mi", "0"),
            ("-1", "-1"),
            ("128974848", "128974848"),
            ("129M", "129M"),
        ];
        for (text, want) in cases {
            assert_eq!(canonical(text), want, "{text}");
        }
    }

    #[test]
    fn a_small_or_fractional_binary_amount_prints_in_decimal() {
        assert_eq!(canonical("0.5Ki"), "512");
        let half_byte = Amount::parse("1Ki").unwrap() - Amount::parse("1023500m").unwrap();
        assert_eq!(half_byte.to_string(), "500m");
    }

    #[test]
    fn sums_keep_the_first_non_zero_terms_notation() {
        let mi = Amount::parse("512Mi").unwrap();
        let sum = Amount::ZERO + mi + mi;
        assert_eq!(sum.to_string(), "1Gi");
        let cpu = Amount::parse("500m").unwrap() + Amount::parse("0.5").unwrap();
        assert_eq!(cpu.to_string(), "1");
        let mixed = Amount::parse("1G").unwrap() + Amount::parse("1Gi").unwrap();
        assert_eq!(mixed.to_string(), "2073741824");
    }

    #[test]
    fn amounts_compare_by_value_and_refuse_what_is_not_a_quantity() {
        assert_eq!(Amount::parse("1").unwrap(), Amount::parse("1000m").unwrap());
        assert!(Amount::parse("1Ki").unwrap() > Amount::parse("1k").unwrap());
        assert_eq!(Amount::count(3).to_string(), "3");
        assert!(Amount::parse("ten").is_none());
        assert!(Amount::parse("").is_none());
    }
}
