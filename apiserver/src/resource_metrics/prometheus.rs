//! Reads the samples of a node server's `/metrics/resource` (Prometheus
//! text format 0.0.4): the families the resource metrics need, with their
//! labels and timestamps. Other families, comments and lines that do not
//! parse are passed over.

use std::collections::HashMap;

/// One sample: the family, its labels, the value and when it was taken
/// (milliseconds since the epoch; `None` when the line had no timestamp).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels.
    pub labels: HashMap<String, String>,
    /// The value.
    pub value: f64,
    /// When it was taken.
    pub timestamp_ms: Option<i64>,
}

/// Every sample of `wanted` families in `text`.
pub(super) fn parse(text: &str, wanted: &[&str]) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line_sample(line, wanted))
        .collect()
}

fn line_sample(line: &str, wanted: &[&str]) -> Option<Sample> {
    let line = line.trim();
    let name_end = line.find(['{', ' ', '\t'])?;
    let name = &line[..name_end];
    if !wanted.contains(&name) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = HashMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    let timestamp_ms = match fields.next() {
        Some(t) => Some(t.parse().ok()?),
        None => None,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// `key="value",...}` → the labels and what follows the `}`.
fn parse_labels(mut text: &str) -> Option<(HashMap<String, String>, &str)> {
    let mut labels = HashMap::new();
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = text.find('=')?;
        let key = text[..eq].trim().to_string();
        let mut chars = text[eq + 1..].trim_start().char_indices();
        let offset = text.len() - text[eq + 1..].trim_start().len();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut escaped = false;
        let mut end = None;
        for (i, c) in chars {
            if escaped {
                value.push(match c {
                    'n' => '\n',
                    other => other,
                });
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(i);
                break;
            } else {
                value.push(c);
            }
        }
        labels.insert(key, value);
        text = text[offset + end? + 1..].trim_start();
        text = text.strip_prefix(',').unwrap_or(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_timestamps() {
        let text = "# HELP x y\n# TYPE node_cpu_usage_seconds_total counter\n\
            node_cpu_usage_seconds_total 12.5 1800000000000\n\
            container_memory_working_set_bytes{container=\"main\",namespace=\"default\",pod=\"we\\\"b\"} 4096 1800000000001\n\
            other_family{a=\"b\"} 1\n\
            container_cpu_usage_seconds_total{container=\"c\", pod=\"p\"} 1e-3\n\
            container_cpu_usage_seconds_total{broken 1\n";
        let samples = parse(
            text,
            &[
                "node_cpu_usage_seconds_total",
                "container_memory_working_set_bytes",
                "container_cpu_usage_seconds_total",
            ],
        );
        assert_eq!(samples.len(), 3, "{samples:?}");
        assert_eq!(samples[0].value, 12.5);
        assert_eq!(samples[0].timestamp_ms, Some(1_800_000_000_000));
        assert!(samples[0].labels.is_empty());
        assert_eq!(samples[1].labels["pod"], "we\"b");
        assert_eq!(samples[1].labels["container"], "main");
        assert_eq!(samples[1].value, 4096.0);
        assert_eq!(samples[2].labels["pod"], "p");
        assert_eq!(samples[2].value, 0.001);
        assert_eq!(samples[2].timestamp_ms, None);
    }
}
