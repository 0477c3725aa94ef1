//! How a pod resolves names, as upstream's validatePodDNSConfig and
//! ValidateHostAliases rule it: `dnsPolicy: None` needs a `dnsConfig` with
//! a nameserver; at most 3 nameservers, each an IP address; at most 32
//! search domains, 2048 characters together, each a DNS subdomain; named
//! options; and host aliases of an IP address and DNS subdomains.

use serde_json::Value;

use super::{NameRule, validate_name};
use crate::status::FieldError;

const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;

/// Go's `%#v` of a `[]string`: what upstream shows of a whole list.
fn go_strings(list: &[&str]) -> String {
    crate::go_format::go_string_slice("string", list.iter().copied())
}

fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or_default())
        .collect()
}

/// Checks the DNS settings and host aliases of the pod spec at `path`.
pub(crate) fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    dns_config(spec, &format!("{path}.dnsConfig"), errors);
    for (i, alias) in spec["hostAliases"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.hostAliases[{i}]");
        super::ip_address(
            alias["ip"].as_str().unwrap_or_default(),
            &format!("{at}.ip"),
            errors,
        );
        for (j, hostname) in strings(&alias["hostnames"]).into_iter().enumerate() {
            errors.extend(validate_name(
                NameRule::Subdomain,
                hostname,
                &format!("{at}.hostnames[{j}]"),
            ));
        }
    }
}

fn dns_config(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let config = &spec["dnsConfig"];
    let nameservers = strings(&config["nameservers"]);
    if spec["dnsPolicy"] == "None" {
        if !config.is_object() {
            errors.push(FieldError::required(
                path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
            return;
        }
        if nameservers.is_empty() {
            errors.push(FieldError::required(
                format!("{path}.nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
            return;
        }
    }
    if nameservers.len() > MAX_NAMESERVERS {
        errors.push(
            FieldError::invalid(
                format!("{path}.nameservers"),
                Value::Null,
                format!("must not have more than {MAX_NAMESERVERS} nameservers"),
            )
            .shown_as(go_strings(&nameservers)),
        );
    }
    for (i, server) in nameservers.iter().enumerate() {
        super::ip_address(server, &format!("{path}.nameservers[{i}]"), errors);
    }
    let searches = strings(&config["searches"]);
    if searches.len() > MAX_SEARCHES {
        errors.push(
            FieldError::invalid(
                format!("{path}.searches"),
                Value::Null,
                format!("must not have more than {MAX_SEARCHES} search paths"),
            )
            .shown_as(go_strings(&searches)),
        );
    }
    if searches.join(" ").len() > MAX_SEARCH_CHARS {
        errors.push(
            FieldError::invalid(
                format!("{path}.searches"),
                Value::Null,
                format!(
                    "must not have more than {MAX_SEARCH_CHARS} characters (including spaces) in the search list"
                ),
            )
            .shown_as(go_strings(&searches)),
        );
    }
    for (i, search) in searches.iter().enumerate() {
        // A trailing dot (fully qualified) is allowed.
        let search = search.strip_suffix('.').unwrap_or(search);
        errors.extend(validate_name(
            NameRule::Subdomain,
            search,
            &format!("{path}.searches[{i}]"),
        ));
    }
    for (i, option) in config["options"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if option["name"].as_str().is_none_or(str::is_empty) {
            errors.push(FieldError::required(
                format!("{path}.options[{i}]"),
                "must not be empty",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(spec: Value) -> Vec<String> {
        crate::validation::rendered(pod_spec, spec)
    }

    #[test]
    fn dns_policy_none_needs_a_config_with_a_nameserver() {
        assert_eq!(
            rendered(json!({"dnsPolicy": "None"})),
            ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]
        );
        assert_eq!(
            rendered(json!({"dnsPolicy": "None", "dnsConfig": {"searches": ["a.b"]}})),
            [
                "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"
            ]
        );
        assert!(
            rendered(json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}))
                .is_empty()
        );
    }

    #[test]
    fn nameservers_searches_and_options_are_checked() {
        assert_eq!(
            rendered(json!({"dnsConfig": {
                "nameservers": ["1.1.1.1", "2001:db8::1", "8.8.8.8", "dns.example"],
                "searches": ["svc.cluster.local.", "Bad_Domain"],
                "options": [{"name": "ndots", "value": "2"}, {"value": "x"}],
            }})),
            [
                "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \"2001:db8::1\", \"8.8.8.8\", \"dns.example\"}: must not have more than 3 nameservers",
                "spec.dnsConfig.nameservers[3]: Invalid value: \"dns.example\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.dnsConfig.searches[1]: Invalid value: \"Bad_Domain\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.dnsConfig.options[1]: Required value: must not be empty",
            ]
        );
    }

    #[test]
    fn host_aliases_are_an_ip_and_hostnames() {
        assert_eq!(
            rendered(json!({"hostAliases": [
                {"ip": "127.0.0.1", "hostnames": ["foo.local"]},
                {"ip": "notanip", "hostnames": ["ok"]},
            ]})),
            [
                "spec.hostAliases[1].ip: Invalid value: \"notanip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            ]
        );
    }
}
