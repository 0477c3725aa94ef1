//! gRPC probes: one call of the standard health service
//! (`grpc.health.v1.Health/Check`) on the pod's address, as upstream's
//! kubelet makes it; the probe passes when the answer is SERVING. The two
//! messages are declared here (a string in, an enum out) rather than
//! generated from the proto file.

use std::time::Duration;

use tonic::transport::Endpoint;

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `ServingStatus.SERVING`.
const SERVING: i32 = 1;

/// The names upstream's messages use for the serving statuses.
fn status_name(status: i32) -> &'static str {
    match status {
        0 => "UNKNOWN",
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "UNKNOWN",
    }
}

/// Asks `host:port` whether `service` ("" for the server as a whole) is
/// serving, within `timeout`; a failure says what was seen, in a kubelet's
/// words.
pub(crate) async fn check(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
) -> Result<(), String> {
    let target = format!("{host}:{port}");
    let endpoint = Endpoint::from_shared(format!("http://{target}"))
        .map_err(|e| format!("failed to connect service {target:?}: {e}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let call = async {
        let channel = endpoint.connect().await.map_err(|e| {
            format!("timeout: failed to connect service {target:?} within {timeout:?}: {e}")
        })?;
        let mut client = tonic::client::Grpc::new(channel);
        client
            .ready()
            .await
            .map_err(|e| format!("failed to connect service {target:?}: {e}"))?;
        let request = tonic::Request::new(HealthCheckRequest {
            service: service.to_owned(),
        });
        let path = http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
        let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
        let answer = client.unary(request, path, codec).await.map_err(|status| {
            if status.code() == tonic::Code::Unimplemented {
                format!("this server does not implement the grpc health protocol (grpc.health.v1.Health): {}", status.message())
            } else {
                format!("rpc error: code = {:?} desc = {}", status.code(), status.message())
            }
        })?;
        let status = answer.into_inner().status;
        if status == SERVING {
            Ok(())
        } else {
            Err(format!(
                "service unhealthy (responded with {:?})",
                status_name(status)
            ))
        }
    };
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "timeout: health rpc did not complete within {timeout:?}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::future::{Ready, ready};
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A health server answering every check with one status.
    #[derive(Clone)]
    struct Health(i32);

    impl tonic::server::NamedService for Health {
        const NAME: &'static str = "grpc.health.v1.Health";
    }

    struct Check(i32);

    impl tonic::server::UnaryService<HealthCheckRequest> for Check {
        type Response = HealthCheckResponse;
        type Future = Ready<Result<tonic::Response<HealthCheckResponse>, tonic::Status>>;

        fn call(&mut self, _: tonic::Request<HealthCheckRequest>) -> Self::Future {
            ready(Ok(tonic::Response::new(HealthCheckResponse {
                status: self.0,
            })))
        }
    }

    type Answer = http::Response<tonic::body::Body>;

    impl tower::Service<http::Request<tonic::body::Body>> for Health {
        type Response = Answer;
        type Error = Infallible;
        type Future = Pin<Box<dyn std::future::Future<Output = Result<Answer, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
            let status = self.0;
            Box::pin(async move {
                let codec =
                    tonic_prost::ProstCodec::<HealthCheckResponse, HealthCheckRequest>::default();
                let mut grpc = tonic::server::Grpc::new(codec);
                Ok(grpc.unary(Check(status), request).await)
            })
        }
    }

    async fn serve(status: i32) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(Health(status))
                .serve_with_incoming(incoming),
        );
        port
    }

    #[tokio::test]
    async fn a_serving_answer_passes_and_any_other_fails_in_upstreams_words() {
        let timeout = Duration::from_secs(5);
        let serving = serve(SERVING).await;
        assert_eq!(check("127.0.0.1", serving, "", timeout).await, Ok(()));
        let not_serving = serve(2).await;
        assert_eq!(
            check("127.0.0.1", not_serving, "db", timeout).await,
            Err("service unhealthy (responded with \"NOT_SERVING\")".to_owned())
        );
        let nobody = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = nobody.local_addr().unwrap().port();
        drop(nobody);
        let refused = check("127.0.0.1", closed, "", timeout).await;
        assert!(refused.is_err_and(|e| e.contains("failed to connect")));
    }
}
