//! A reader of the text exposition format (0.0.4), in two strengths:
//! `parse` is strict enough to tell a page Prometheus would refuse (for
//! tests and tools that check what `/metrics` serves); `samples` reads the
//! wanted families off a page and passes over whatever does not parse (the
//! API server's scrape of each node's `/metrics/resource`).

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
    /// When it was taken (milliseconds since the epoch), if the line says.
    pub timestamp_ms: Option<i64>,
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
    let name_end = line.find(['{', ' ', '\t']).ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            rest = rest.trim_start().trim_start_matches(',').trim_start();
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
    let timestamp_ms = match fields.next() {
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| format!("bad timestamp {t:?}"))?,
        ),
        None => None,
    };
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Every sample of the `wanted` families in `text`; comments, other
/// families and lines that do not parse are passed over, so one odd line
/// costs only itself.
pub fn samples(text: &str, wanted: &[&str]) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter(|line| {
            line.find(['{', ' ', '\t'])
                .is_some_and(|end| wanted.contains(&&line[..end]))
        })
        .filter_map(|line| parse_sample(line).ok())
        .collect()
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

    #[test]
    fn samples_takes_the_wanted_families_and_passes_over_broken_lines() {
        let text = "# HELP x y\n# TYPE node_cpu_usage_seconds_total counter\n\
            node_cpu_usage_seconds_total 12.5 1800000000000\n\
            container_memory_working_set_bytes{container=\"main\",namespace=\"default\",pod=\"we\\\"b\"} 4096 1800000000001\n\
            other_family{a=\"b\"} 1\n\
            container_cpu_usage_seconds_total{container=\"c\", pod=\"p\"} 1e-3\n\
            container_cpu_usage_seconds_total{broken 1\n";
        let found = samples(
            text,
            &[
                "node_cpu_usage_seconds_total",
                "container_memory_working_set_bytes",
                "container_cpu_usage_seconds_total",
            ],
        );
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].value, 12.5);
        assert_eq!(found[0].timestamp_ms, Some(1_800_000_000_000));
        assert!(found[0].labels.is_empty());
        assert_eq!(found[1].label("pod"), Some("we\"b"));
        assert_eq!(found[1].label("container"), Some("main"));
        assert_eq!(found[1].value, 4096.0);
        assert_eq!(found[2].label("pod"), Some("p"));
        assert_eq!(found[2].value, 0.001);
        assert_eq!(found[2].timestamp_ms, None);
        // The strict reader refuses the same page: a sample with no TYPE.
        assert!(parse(text).is_err());
    }
}
