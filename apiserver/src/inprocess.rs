//! In-process clients: a `kube::Client` whose transport is the API router
//! itself — no socket, no TLS — carrying a fixed identity that no network
//! request can claim.

use axum::Router;
use axum::body::Body;
use http::Request;
use tower::ServiceBuilder;

use crate::authn::UserInfo;

/// A client that calls `router` directly as `user`, with `default` as its
/// default namespace.
pub fn client(router: Router, user: UserInfo) -> kube::Client {
    let service = ServiceBuilder::new()
        .map_request(move |request: Request<kube::client::Body>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(user.clone());
            request
        })
        .service(router);
    kube::Client::new(service, "default")
}
