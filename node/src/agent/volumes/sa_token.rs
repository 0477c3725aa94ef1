//! Service-account tokens of projected volumes: one TokenRequest per pod
//! and source, bound to the pod, renewed once 80 % of its lifetime passed
//! (as the kubelet's token manager does).

use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount, ServiceAccountTokenProjection};
use kube::Api;
use kube::api::PostParams;

/// Lifetime asked for when the projection names none (upstream's default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// A token and when to ask for the next one.
#[derive(Debug, Clone)]
pub(crate) struct IssuedToken {
    /// The JWT.
    pub token: String,
    /// 80 % into its lifetime.
    pub refresh_at: Instant,
}

/// When a token valid for `lifetime` should be replaced.
pub(crate) fn refresh_after(lifetime: Duration) -> Duration {
    lifetime.mul_f64(0.8)
}

/// Asks the API server for a token of the pod's service account, bound to
/// the pod.
pub(crate) async fn request(
    client: &kube::Client,
    pod: &Pod,
    projection: &ServiceAccountTokenProjection,
) -> Result<IssuedToken, kube::Error> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let requested = projection
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: projection.audience.iter().cloned().collect(),
            expiration_seconds: Some(requested),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = api
        .create_token_request(account, &PostParams::default(), &request)
        .await?;
    let Some(status) = issued.status else {
        return Err(kube::Error::Api(Box::new(kube::core::Status::failure(
            "the TokenRequest came back without a token",
            "InternalError",
        ))));
    };
    // The server may shorten the lifetime; its expiry is what counts.
    let lifetime = u64::try_from(
        status.expiration_timestamp.0.as_second() - k8s_openapi::jiff::Timestamp::now().as_second(),
    )
    .map(Duration::from_secs)
    .unwrap_or(Duration::from_secs(u64::try_from(requested).unwrap_or(600)));
    Ok(IssuedToken {
        token: status.token,
        refresh_at: Instant::now() + refresh_after(lifetime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_at_eighty_percent_of_their_lifetime() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(600)),
            Duration::from_secs(480)
        );
    }
}
