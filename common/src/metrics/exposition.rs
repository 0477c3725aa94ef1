//! A reader of the text exposition format (0.0.4), strict enough to tell a
//! page Prometheus would refuse: for tests and tools that check what
//! `/metrics` serves, not for scraping.

use std::collections::HashMap;

/// One sample line: name, labels (in the order written) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (`apiserver_request_total`, `…_bucket`).
    pub name: String,
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a page is not valid exposition text.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// The family a sample belongs to, given the declared types: a histogram's
/// or summary's `_bucket`/`_sum`/`_count` samples belong to their base name.
fn family<'a>(name: &'a str, types: &HashMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        matches!(
            types.get(base).map(String::as_str),
            Some("histogram" | "summary")
        )
        .then_some(base)
    })
}

/// Reads `text`: every sample must follow a `# TYPE` of its family, names
/// and values must be well formed, and label values properly quoted.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let fail = |reason: String| ParseError {
            line: index + 1,
            reason,
        };
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !valid_name(name) {
                        return Err(fail(format!("bad metric name {name:?}")));
                    }
                    if !matches!(
                        kind,
                        "counter" | "gauge" | "histogram" | "summary" | "untyped"
                    ) {
                        return Err(fail(format!("unknown type {kind:?}")));
                    }
                    if types.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(fail(format!("second TYPE for {name}")));
                    }
                }
                (Some("TYPE"), ..) => return Err(fail("TYPE without a type".into())),
                _ => {}
            }
            continue;
        }
        let sample = parse_sample(line).map_err(fail)?;
        if family(&sample.name, &types).is_none() {
            return Err(fail(format!("{} has no TYPE before it", sample.name)));
        }
        samples.push(sample);
    }
    Ok(samples)
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            rest = rest.trim_start_matches(',');
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("label without '='")?;
            let key = &rest[..eq];
            if !valid_name(key) {
                return Err(format!("bad label name {key:?}"));
            }
            let quoted = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        _ => return Err("bad escape in a label value".into()),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err("unterminated label value".into()),
                }
            };
            labels.push((key.to_string(), value));
            rest = &quoted[end + 1..];
        }
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value = parse_value(value).ok_or_else(|| format!("bad value {value:?}"))?;
    if let Some(timestamp) = fields.next()
        && timestamp.parse::<i64>().is_err()
    {
        return Err(format!("bad timestamp {timestamp:?}"));
    }
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The summed value of the samples named `name` that carry every label of
/// `labels`; `None` when there is none.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for sample in samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
    {
        *found.get_or_insert(0.0) += sample.value;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_with_escapes_and_histograms() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\n\
                    a_total{path=\"/x\\\"y\",n=\"1\\n2\"} 4\n\
                    # TYPE h histogram\nh_bucket{le=\"+Inf\"} 2 1700000000\nh_sum 0.5\nh_count 2\n";
        let samples = parse(text).expect("valid");
        assert_eq!(samples[0].label("path"), Some("/x\"y"));
        assert_eq!(samples[0].label("n"), Some("1\n2"));
        assert_eq!(value(&samples, "h_count", &[]), Some(2.0));
        assert_eq!(value(&samples, "h_bucket", &[("le", "+Inf")]), Some(2.0));
    }

    #[test]
    fn refuses_what_prometheus_would() {
        for bad in [
            "untyped_sample 1\n",
            "# TYPE a counter\na{l=x} 1\n",
            "# TYPE a counter\na one\n",
            "# TYPE a counter\na{l=\"x} 1\n",
            "# TYPE a bogus\n",
            "# TYPE 1a counter\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
