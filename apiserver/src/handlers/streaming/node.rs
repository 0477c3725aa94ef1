//! Where a node's server listens (from its Node object), and the query
//! handling the proxied requests need.

use crate::handlers::storage;
use crate::server::Inner;
use crate::status::ApiError;

/// The kubelet port when a Node publishes none.
const DEFAULT_NODE_PORT: u16 = 10250;

/// A node server's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeLocation {
    /// The node's name: its serving certificate must be issued to
    /// `system:node:<node>`.
    pub node: String,
    /// The address dialed (IP or host name, no brackets): the certificate
    /// must name it.
    pub host: String,
    /// `ip:port` (IPv6 in brackets).
    pub authority: String,
}

impl NodeLocation {
    /// The request target on the node server.
    pub(crate) fn uri(&self, path: &str, query: &str) -> String {
        if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        }
    }
}

/// Reads the Node: its InternalIP (else ExternalIP, else Hostname) and its
/// published kubelet port.
pub(super) async fn locate(inner: &Inner, node: &str) -> Result<NodeLocation, ApiError> {
    let info = inner
        .registry
        .get("", "v1", "nodes")
        .ok_or_else(|| ApiError::Internal("nodes are not served".into()))?;
    let (object, _) = storage::read_existing(inner, &info, &info.key(None, node), node).await?;
    location_of(node, &object)
}

/// Where `node`'s server listens, from its Node object.
pub(crate) fn location_of(
    node: &str,
    object: &serde_json::Value,
) -> Result<NodeLocation, ApiError> {
    let addresses = object["status"]["addresses"].as_array();
    let address = ["InternalIP", "ExternalIP", "Hostname"]
        .iter()
        .find_map(|kind| {
            addresses?
                .iter()
                .find(|a| a["type"] == *kind)
                .and_then(|a| a["address"].as_str())
        })
        .ok_or_else(|| ApiError::ServiceUnavailable(format!("node {node} publishes no address")))?;
    let port = object["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(DEFAULT_NODE_PORT);
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    };
    Ok(NodeLocation {
        node: node.to_string(),
        host: address.to_string(),
        authority: format!("{host}:{port}"),
    })
}

/// The query's pairs, decoded, in order (keys may repeat).
pub(super) fn query_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// Encodes pairs back into a query.
pub(super) fn encode_query(pairs: &[&(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().map(|(k, v)| (k, v)))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_internal_ip_and_published_port_locate_the_node() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 41234}}}});
        assert_eq!(
            location_of("n1", &node).unwrap().authority,
            "10.0.0.5:41234"
        );
        let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "n2"}]}});
        assert_eq!(location_of("n2", &bare).unwrap().authority, "n2:10250");
        assert!(location_of("n3", &json!({})).is_err());
    }

    #[test]
    fn queries_round_trip() {
        let pairs = query_pairs("command=sh&command=-c&command=echo+a%20b%26c&stdin=true");
        assert_eq!(pairs[2].1, "echo a b&c");
        let refs: Vec<&(String, String)> = pairs.iter().collect();
        assert_eq!(query_pairs(&encode_query(&refs)), pairs);
    }
}
