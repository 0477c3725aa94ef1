//! Upstream's token cleaner: deletes bootstrap token Secrets
//! (`kube-system`, type `bootstrap.kubernetes.io/token`) whose
//! `expiration` has passed (or does not parse), so `skiff token list` shows
//! only live tokens. The API server already refuses an expired token
//! whether or not it is deleted; this only tidies up. It looks every
//! [`CleanerConfig::period`] and acts as the `token-cleaner` service
//! account, which may delete Secrets in kube-system only.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;

use crate::manager::{Context, Stop};

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
const NAMESPACE: &str = "kube-system";

/// How the cleaner runs.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// How often expired tokens are looked for.
    pub period: Duration,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            period: Duration::from_secs(30),
        }
    }
}

/// Runs with the default period until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    run_with(ctx, stop, CleanerConfig::default()).await
}

/// Runs until `stop`.
pub async fn run_with(ctx: Context, mut stop: Stop, config: CleanerConfig) {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    loop {
        let span = tracing::info_span!("reconcile", controller = "tokencleaner", key = NAMESPACE);
        let _ = tracing::Instrument::instrument(clean(&api), span).await;
        tokio::select! {
            _ = tokio::time::sleep(config.period) => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

async fn clean(api: &Api<Secret>) -> Result<(), kube::Error> {
    let now = Timestamp::now();
    let secrets = api
        .list(&ListParams::default())
        .await
        .inspect_err(|error| {
            tracing::warn!(%error, "listing bootstrap tokens");
        })?;
    for secret in secrets.items {
        if secret.type_.as_deref() != Some(SECRET_TYPE) || !expired(&secret, now) {
            continue;
        }
        let name = secret.metadata.name.clone().unwrap_or_default();
        // Only the Secret that was judged.
        let params = crate::controller_utils::delete_exactly(&secret.metadata);
        match api.delete(&name, &params).await {
            Ok(_) => tracing::info!(secret = %name, "deleted an expired bootstrap token"),
            Err(error) => {
                tracing::warn!(secret = %name, %error, "deleting an expired bootstrap token")
            }
        }
    }
    Ok(())
}

/// Whether the token's expiration is at or before `now`; one without an
/// expiration never expires, one that does not parse already has.
pub fn expired(secret: &Secret, now: Timestamp) -> bool {
    let Some(value) = secret.data.as_ref().and_then(|d| d.get("expiration")) else {
        return false;
    };
    std::str::from_utf8(&value.0)
        .ok()
        .and_then(|t| t.trim().parse::<Timestamp>().ok())
        .is_none_or(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn token(expiration: Option<&str>) -> Secret {
        let mut data = std::collections::BTreeMap::new();
        if let Some(e) = expiration {
            data.insert("expiration".to_string(), ByteString(e.as_bytes().to_vec()));
        }
        Secret {
            type_: Some(SECRET_TYPE.into()),
            data: Some(data),
            ..Default::default()
        }
    }

    #[test]
    fn only_past_or_unreadable_expirations_expire() {
        let now = Timestamp::now();
        assert!(expired(&token(Some("2001-01-01T00:00:00Z")), now));
        assert!(expired(&token(Some("soon")), now));
        assert!(!expired(&token(Some("2099-01-01T00:00:00Z")), now));
        assert!(!expired(&token(None), now));
    }
}
