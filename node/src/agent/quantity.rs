//! Reading resource quantities (`100m`, `128Mi`, `1.5`, `2e3`) into numbers,
//! for CRI resources and `resourceFieldRef`. Only what pod specs use.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity as a floating-point number of base units (cores, bytes).
/// `None` when the text is not a quantity.
pub fn parse(q: &Quantity) -> Option<f64> {
    parse_str(&q.0)
}

/// As [`parse`], from text.
pub fn parse_str(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "u" => 1e-6,
        "n" => 1e-9,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * factor)
}

/// CPU cores as millicores, rounded up (a request of `0.0001` is still 1m).
pub fn millicores(q: &Quantity) -> Option<i64> {
    parse(q).map(|cores| (cores * 1000.0).ceil() as i64)
}

/// Bytes, rounded up.
pub fn bytes(q: &Quantity) -> Option<i64> {
    parse(q).map(|b| b.ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_scale_the_number() {
        assert_eq!(millicores(&Quantity("100m".into())), Some(100));
        assert_eq!(millicores(&Quantity("1.5".into())), Some(1500));
        assert_eq!(bytes(&Quantity("128Mi".into())), Some(128 << 20));
        assert_eq!(bytes(&Quantity("1G".into())), Some(1_000_000_000));
        assert_eq!(bytes(&Quantity("2e3".into())), Some(2000));
        assert_eq!(parse_str("12Q"), None);
    }
}
