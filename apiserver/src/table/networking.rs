//! Network resources with columns of their own: Ingresses (class, hosts,
//! load-balancer address, ports), IngressClasses, NetworkPolicies (pod
//! selector), ServiceCIDRs (ranges), IPAddresses (parent) and
//! `discovery.k8s.io` EndpointSlices (address type, ports, endpoints).

use serde_json::Value;

use super::columns::{
    Column, Printer, at, list, name, name_age_printer, one_column_printer, or_none,
    selector_string, strings, text, text_cell,
};

pub(crate) static INGRESSES: Printer = name_age_printer!(
    [
        Column::string(
            "Class",
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        Column::string(
            "Hosts",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        Column::string(
            "Address",
            "Address is a list containing ingress points for the load-balancer",
        ),
        Column::string("Ports", "Ports of TLS configurations that open"),
    ],
    |ingress, _| {
        let class = text(ingress, "spec/ingressClassName")
            .or_else(|| {
                ingress
                    .pointer("/metadata/annotations/kubernetes.io~1ingress.class")
                    .and_then(Value::as_str)
            })
            .unwrap_or("");
        vec![
            or_none(class),
            Value::from(ingress_hosts(ingress)),
            Value::from(ingress_address(ingress)),
            Value::from(if list(ingress, "spec/tls").is_empty() {
                "80"
            } else {
                "80, 443"
            }),
        ]
    },
);

/// The rules' hosts, three at most then "+ N more...", or `*`.
fn ingress_hosts(ingress: &Value) -> String {
    const MAX: usize = 3;
    let hosts: Vec<&str> = list(ingress, "spec/rules")
        .iter()
        .filter_map(|r| text(r, "host"))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return "*".to_string();
    }
    let shown = hosts[..hosts.len().min(MAX)].join(",");
    match hosts.len().saturating_sub(MAX) {
        0 => shown,
        more => format!("{shown} + {more} more..."),
    }
}

/// The load balancer's IPs and host names, comma-separated.
fn ingress_address(ingress: &Value) -> String {
    list(ingress, "status/loadBalancer/ingress")
        .iter()
        .filter_map(|i| text(i, "ip").or_else(|| text(i, "hostname")))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) static INGRESS_CLASSES: Printer = name_age_printer!(
    [
        Column::string(
            "Controller",
            "Controller that is responsible for handling this class",
        ),
        Column::string(
            "Parameters",
            "A reference to a resource with additional parameters",
        ),
    ],
    |class, _| {
        let parameters = match (
            text(class, "spec/parameters/kind"),
            text(class, "spec/parameters/name"),
        ) {
            (Some(kind), Some(target)) => match text(class, "spec/parameters/apiGroup") {
                Some(group) if !group.is_empty() => format!("{kind}.{group}/{target}"),
                _ => format!("{kind}/{target}"),
            },
            _ => String::new(),
        };
        vec![text_cell(class, "spec/controller", ""), or_none(parameters)]
    },
);

pub(crate) static NETWORKPOLICIES: Printer = one_column_printer!(
    Column::string(
        "Pod-Selector",
        "The pods the policy applies to, as a label selector.",
    ),
    |policy| or_none(selector_string(at(policy, "spec/podSelector"))),
);

/// `discovery.k8s.io` EndpointSlices: `NAME ADDRESSTYPE PORTS ENDPOINTS AGE`.
pub(crate) static ENDPOINTSLICES: Printer = name_age_printer!(
    [
        Column::string(
            "AddressType",
            "The kind of address the slice holds: IPv4, IPv6 or FQDN.",
        ),
        Column::string("Ports", "The ports of the slice's endpoints."),
        Column::string("Endpoints", "The addresses of the slice's endpoints.",),
    ],
    |slice, _| {
        let ports: Vec<String> = list(slice, "ports")
            .iter()
            .map(
                |p| match (at(p, "port").and_then(Value::as_i64), text(p, "name")) {
                    (Some(port), _) => port.to_string(),
                    (None, Some(name)) if !name.is_empty() => name.to_string(),
                    _ => "*".to_string(),
                },
            )
            .collect();
        let addresses: Vec<String> = list(slice, "endpoints")
            .iter()
            .flat_map(|e| list(e, "addresses"))
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        vec![
            text_cell(slice, "addressType", ""),
            Value::from(three_then_more(&ports)),
            Value::from(three_then_more(&addresses)),
        ]
    },
);

/// The first three of `items` and "+ N more..." for the rest, or `<unset>`.
fn three_then_more(items: &[String]) -> String {
    const MAX: usize = 3;
    if items.is_empty() {
        return "<unset>".into();
    }
    let shown = items[..items.len().min(MAX)].join(",");
    if items.len() > MAX {
        format!("{shown} + {} more...", items.len() - MAX)
    } else {
        shown
    }
}

/// ServiceCIDRs: `NAME CIDRS AGE`, every range of the object.
pub(crate) static SERVICECIDRS: Printer = one_column_printer!(
    Column::string(
        "CIDRs",
        "The ranges Service cluster IPs are allocated from.",
    ),
    |cidr| Value::from(strings(cidr, "spec/cidrs").join(",")),
);

/// IPAddresses: `NAME PARENTREF` (no AGE, as upstream prints them), the
/// parent as `services/default/web` or, in a group,
/// `resource.group/namespace/name`.
pub(crate) static IPADDRESSES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string("ParentRef", "The object the address is allocated to."),
    ],
    cells: |address, _| {
        let parent = at(address, "spec/parentRef").map(|parent| {
            let resource = text(parent, "resource").unwrap_or("");
            let mut shown = match text(parent, "group").unwrap_or("") {
                "" => resource.to_lowercase(),
                group => format!("{resource}.{group}").to_lowercase(),
            };
            if let Some(namespace) = text(parent, "namespace").filter(|n| !n.is_empty()) {
                shown.push('/');
                shown.push_str(namespace);
            }
            format!("{shown}/{}", text(parent, "name").unwrap_or(""))
        });
        vec![name(address), or_none(parent.unwrap_or_default())]
    },
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::test_now as now;

    #[test]
    fn ingress_cells() {
        let ingress = json!({"metadata": {"name": "web"},
            "spec": {"ingressClassName": "skiff",
                     "tls": [{"hosts": ["a.example"]}],
                     "rules": [{"host": "a.example"}, {"host": "b.example"}, {"host": "c.example"},
                               {"host": "d.example"}, {"http": {}}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}});
        let c = (INGRESSES.cells)(&ingress, now());
        assert_eq!(
            &c[1..5],
            &[
                json!("skiff"),
                json!("a.example,b.example,c.example + 1 more..."),
                json!("192.0.2.1,lb.example"),
                json!("80, 443"),
            ]
        );
        let bare = json!({"metadata": {"name": "b",
            "annotations": {"kubernetes.io/ingress.class": "legacy"}}, "spec": {}});
        let c = (INGRESSES.cells)(&bare, now());
        assert_eq!(
            &c[1..5],
            &[json!("legacy"), json!("*"), json!(""), json!("80")]
        );
        let c = (INGRESSES.cells)(&json!({"metadata": {"name": "n"}}), now());
        assert_eq!(c[1], "<none>");
    }

    #[test]
    fn ingress_class_cells() {
        let class =
            json!({"metadata": {"name": "skiff"}, "spec": {"controller": "skiff.io/ingress"}});
        let c = (INGRESS_CLASSES.cells)(&class, now());
        assert_eq!(&c[1..3], &[json!("skiff.io/ingress"), json!("<none>")]);
        let class = json!({"metadata": {"name": "x"}, "spec": {"controller": "c",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        assert_eq!(
            (INGRESS_CLASSES.cells)(&class, now())[2],
            "IngressParameters.k8s.example.com/p"
        );
    }

    #[test]
    fn an_address_names_its_parent_by_resource_namespace_and_name() {
        let address = |parent: Value| json!({"metadata": {"name": "10.96.0.10"}, "spec": {"parentRef": parent}});
        let service = address(json!({"group": "", "resource": "services",
            "namespace": "kube-system", "name": "kube-dns"}));
        assert_eq!(
            (IPADDRESSES.cells)(&service, now()),
            [json!("10.96.0.10"), json!("services/kube-system/kube-dns")]
        );
        let gateway = address(json!({"group": "Gateway.Networking.k8s.io",
            "resource": "Gateways", "name": "edge"}));
        assert_eq!(
            (IPADDRESSES.cells)(&gateway, now())[1],
            "gateways.gateway.networking.k8s.io/edge"
        );
        let orphan = json!({"metadata": {"name": "10.96.0.11"}, "spec": {}});
        assert_eq!((IPADDRESSES.cells)(&orphan, now())[1], "<none>");
    }
}
