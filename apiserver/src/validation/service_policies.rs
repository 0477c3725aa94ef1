//! How a Service spreads and keeps its traffic, as upstream's ValidateService
//! rules it: a known `sessionAffinity` whose config (a timeout of 1–86400
//! seconds) is there only for `ClientIP`; an `externalTrafficPolicy` only on
//! a Service reachable from outside (node ports, a load balancer or external
//! IPs); known internal and external policies; external IPs that are
//! addresses traffic comes to from outside; and no (protocol, port) pair
//! twice.

use std::net::IpAddr;

use serde_json::Value;

use crate::status::FieldError;

const AFFINITIES: &[&str] = &["ClientIP", "None"];
const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];
/// Longest sticky session upstream allows, in seconds.
const MAX_AFFINITY_SECONDS: i64 = 86_400;

/// Checks the Service spec `spec` (its type already checked, `kind`).
pub(crate) fn spec(spec: &Value, kind: &str, errors: &mut Vec<FieldError>) {
    let affinity = spec["sessionAffinity"].as_str().unwrap_or("None");
    if !AFFINITIES.contains(&affinity) {
        errors.push(FieldError::not_supported(
            "spec.sessionAffinity",
            affinity,
            AFFINITIES,
        ));
    }
    let config = &spec["sessionAffinityConfig"];
    if affinity == "None" && !config.is_null() {
        errors.push(FieldError::forbidden(
            "spec.sessionAffinityConfig",
            "must not be set when session affinity is None",
        ));
    }
    if affinity == "ClientIP"
        && let Some(timeout) = config["clientIP"]["timeoutSeconds"].as_i64()
        && !(1..=MAX_AFFINITY_SECONDS).contains(&timeout)
    {
        errors.push(FieldError::invalid(
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            timeout,
            format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
        ));
    }
    for (i, ip) in spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.externalIPs[{i}]");
        let text = ip.as_str().unwrap_or_default();
        if super::ip_address(text, &path, errors) {
            reachable_from_outside(text, &path, errors);
        }
    }
    // Upstream's path keeps the field's old capitalised name.
    if let Some(ranges) = spec["loadBalancerSourceRanges"]
        .as_array()
        .filter(|r| !r.is_empty())
    {
        if kind != "LoadBalancer" {
            errors.push(FieldError::forbidden(
                "spec.LoadBalancerSourceRanges",
                "may only be used when `type` is 'LoadBalancer'",
            ));
        }
        for (i, range) in ranges.iter().enumerate() {
            // Values may be space-padded, as the annotation they came from.
            let text = range.as_str().unwrap_or("").trim();
            super::cidr(text, &format!("spec.LoadBalancerSourceRanges[{i}]"), errors);
        }
    }
    if let Some(ip) = spec["loadBalancerIP"].as_str().filter(|ip| !ip.is_empty()) {
        super::ip_address(ip, "spec.loadBalancerIP", errors);
    }
    let external_ips = spec["externalIPs"]
        .as_array()
        .is_some_and(|ips| !ips.is_empty());
    let reachable =
        matches!(kind, "NodePort" | "LoadBalancer") || (kind == "ClusterIP" && external_ips);
    if let Some(policy) = spec["externalTrafficPolicy"]
        .as_str()
        .filter(|p| !p.is_empty())
    {
        if !reachable {
            errors.push(FieldError::invalid(
                "spec.externalTrafficPolicy",
                policy,
                "may only be set for externally-accessible services",
            ));
        } else if !TRAFFIC_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(
                "spec.externalTrafficPolicy",
                policy,
                TRAFFIC_POLICIES,
            ));
        }
    }
    super::one_of(
        spec,
        "internalTrafficPolicy",
        TRAFFIC_POLICIES,
        "spec",
        errors,
    );
    let mut seen: Vec<(&str, i64)> = Vec::new();
    for (i, port) in spec["ports"].as_array().into_iter().flatten().enumerate() {
        let protocol = port["protocol"].as_str().unwrap_or("TCP");
        let number = port["port"].as_i64().unwrap_or_default();
        if seen.contains(&(protocol, number)) {
            // Upstream shows the pair as Go prints the port struct it keys by.
            errors.push(
                FieldError::duplicate(format!("spec.ports[{i}]"), Value::Null).shown_as(format!(
                    "core.ServicePort{{Name:\"\", Protocol:\"{protocol}\", AppProtocol:(*string)(nil), \
                     Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"
                )),
            );
        } else {
            seen.push((protocol, number));
        }
    }
}

/// An external IP names an address traffic can come to from outside
/// (upstream's ValidateEndpointIP): not unspecified, not loopback, not
/// link-local. The proxy would otherwise take over this host's own
/// loopback or metadata addresses for the Service's ports.
fn reachable_from_outside(text: &str, path: &str, errors: &mut Vec<FieldError>) {
    let Ok(ip) = text.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
        return;
    };
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    let link_local_multicast = match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    };
    for (refused, why) in [
        (
            ip.is_unspecified(),
            format!("may not be unspecified ({text})"),
        ),
        (
            ip.is_loopback(),
            "may not be in the loopback range (127.0.0.0/8, ::1/128)".to_owned(),
        ),
        (
            link_local,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)".to_owned(),
        ),
        (
            link_local_multicast,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)".to_owned(),
        ),
    ] {
        if refused {
            errors.push(FieldError::invalid(path, text, why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(object: Value, kind: &str) -> Vec<String> {
        let mut errors = Vec::new();
        spec(&object, kind, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn affinity_and_traffic_policies_are_checked() {
        assert_eq!(
            rendered(
                json!({"sessionAffinity": "Sticky", "externalTrafficPolicy": "Local",
                    "internalTrafficPolicy": "Nearest"}),
                "ClusterIP"
            ),
            [
                "spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\"",
                "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services",
                "spec.internalTrafficPolicy: Unsupported value: \"Nearest\": supported values: \"Cluster\", \"Local\"",
            ]
        );
        assert_eq!(
            rendered(
                json!({"sessionAffinity": "None", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}),
                "ClusterIP"
            ),
            [
                "spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None"
            ]
        );
        assert_eq!(
            rendered(
                json!({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}},
                    "externalTrafficPolicy": "Local"}),
                "NodePort"
            ),
            [
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400"
            ]
        );
        assert!(
            rendered(
                json!({"externalTrafficPolicy": "Local", "externalIPs": ["192.0.2.1"]}),
                "ClusterIP"
            )
            .is_empty()
        );
    }

    #[test]
    fn source_ranges_are_cidrs_of_load_balancers() {
        let cluster = json!({"loadBalancerSourceRanges": [" 10.0.0.0/8 ", "10.0.0.0/33"]});
        assert_eq!(
            rendered(cluster, "ClusterIP"),
            [
                "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.LoadBalancerSourceRanges[1]: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ]
        );
    }

    #[test]
    fn external_ips_are_addresses_reached_from_outside() {
        assert_eq!(
            rendered(
                json!({"externalIPs": ["192.0.2.1", "garbage", "0.0.0.0", "127.0.0.2", "::1",
                    "169.254.169.254", "fe80::1", "224.0.0.5", "ff02::1", "::ffff:127.0.0.1"],
                    "loadBalancerIP": "nope"}),
                "LoadBalancer"
            ),
            [
                "spec.externalIPs[1]: Invalid value: \"garbage\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.externalIPs[2]: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)",
                "spec.externalIPs[3]: Invalid value: \"127.0.0.2\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "spec.externalIPs[4]: Invalid value: \"::1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "spec.externalIPs[5]: Invalid value: \"169.254.169.254\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
                "spec.externalIPs[6]: Invalid value: \"fe80::1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
                "spec.externalIPs[7]: Invalid value: \"224.0.0.5\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
                "spec.externalIPs[8]: Invalid value: \"ff02::1\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
                "spec.externalIPs[9]: Invalid value: \"::ffff:127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "spec.loadBalancerIP: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ]
        );
    }

    #[test]
    fn a_protocol_and_port_pair_is_served_once() {
        assert_eq!(
            rendered(
                json!({"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80, "protocol": "UDP"},
                    {"name": "c", "port": 80, "protocol": "TCP"}]}),
                "ClusterIP"
            ),
            [
                "spec.ports[2]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
            ]
        );
    }
}
