//! Service-account issuer discovery, as upstream serves it: an OpenID
//! provider configuration at `/.well-known/openid-configuration` and the
//! token-signing public keys at `/openid/v1/jwks`, so a relying party
//! outside the cluster (a vault, a cloud's workload identity) can verify
//! this server's service-account tokens. Both are read under RBAC
//! (`system:service-account-issuer-discovery`, bound to every service
//! account by default), never anonymously unless an admin binds that.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

use super::ISSUER;
use crate::server::Inner;

/// The discovery document's path.
pub(crate) const CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";

/// The key set's path.
pub(crate) const JWKS_PATH: &str = "/openid/v1/jwks";

/// Relying parties may keep both documents this long (upstream's hour).
const CACHE_CONTROL: &str = "public, max-age=3600";

/// Where the key set is fetched from: this server's advertised address
/// when it has one (upstream's default external address), else the
/// issuer's host, which only in-cluster clients resolve.
fn jwks_uri(inner: &Inner) -> String {
    match inner.config.advertise_address {
        Some(address) => format!("https://{address}{JWKS_PATH}"),
        None => format!("{ISSUER}{JWKS_PATH}"),
    }
}

/// The OpenID provider configuration.
fn configuration(jwks_uri: &str) -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}

fn document(content_type: &'static str, body: &Value) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, CACHE_CONTROL),
        ],
        body.to_string(),
    )
        .into_response()
}

/// `GET /.well-known/openid-configuration`.
pub(crate) async fn serve_configuration(State(inner): State<Arc<Inner>>) -> Response {
    document("application/json", &configuration(&jwks_uri(&inner)))
}

/// `GET /openid/v1/jwks`.
pub(crate) async fn serve_jwks(State(inner): State<Arc<Inner>>) -> Response {
    document("application/jwk-set+json", &inner.tokens.key_set())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_the_issuer_and_its_keys() {
        let c = configuration("https://10.0.0.1:6443/openid/v1/jwks");
        assert_eq!(c["issuer"], ISSUER);
        assert_eq!(c["jwks_uri"], "https://10.0.0.1:6443/openid/v1/jwks");
        assert_eq!(c["id_token_signing_alg_values_supported"], json!(["ES256"]));
    }
}
