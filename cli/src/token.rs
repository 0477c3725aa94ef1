//! `skiff token create|list|delete`: bootstrap tokens, as `kubeadm token`
//! and k3s's `token` manage them — Secrets `kube-system/bootstrap-token-<id>`
//! written through the running server with the admin kubeconfig, so every
//! change is authenticated, authorized and audited like any request.
//! `create` prints the join token `K10<sha256 of the CA>::<id>.<secret>`,
//! which `skiff agent --token` checks the server's CA against.

use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use skiff_apiserver::bootstrap_tokens::{
    self, NAMESPACE, NewToken, SECRET_PREFIX, SECRET_TYPE, USAGES,
};
use skiff_common::join_token::{self, JoinToken};

/// `skiff token` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct TokenArgs {
    /// The server.
    #[command(flatten)]
    pub target: crate::admin_client::ServerTarget,

    #[command(subcommand)]
    pub command: TokenCommand,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a bootstrap token and print its join token.
    Create {
        /// How long the token works, a duration such as 24h or 30m; 0:
        /// forever.
        #[arg(long, default_value = "24h")]
        ttl: String,
        /// What the token may be used for (authentication, signing).
        #[arg(long, value_delimiter = ',', default_value = "signing,authentication")]
        usages: Vec<String>,
        /// A description kept with the token.
        #[arg(long)]
        description: Option<String>,
        /// Extra groups the token authenticates in (each
        /// system:bootstrappers:...).
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// The token to create (`[a-z0-9]{6}.[a-z0-9]{16}`); default: a
        /// random one.
        #[arg(value_name = "TOKEN")]
        token: Option<String>,
    },
    /// List the bootstrap tokens.
    #[command(alias = "ls")]
    List,
    /// Delete bootstrap tokens by id (or whole token).
    Delete {
        /// Token ids (`abcdef`) or tokens (`abcdef.0123456789abcdef`).
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

/// Runs `skiff token`.
pub(crate) async fn run(args: TokenArgs) -> anyhow::Result<()> {
    let client = args.target.client().await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    match args.command {
        TokenCommand::Create {
            ttl,
            usages,
            description,
            groups,
            token,
        } => {
            let ttl = parse_ttl(&ttl)?;
            for usage in &usages {
                if !USAGES.contains(&usage.as_str()) {
                    bail!("usage {usage:?} is not one of {USAGES:?}");
                }
            }
            for group in &groups {
                if !group.starts_with("system:bootstrappers:") {
                    bail!("extra group {group:?} must start with system:bootstrappers:");
                }
            }
            let (id, secret) = match &token {
                Some(text) => {
                    let (id, secret) = join_token::bootstrap_parts(text).with_context(|| {
                        "the token must be [a-z0-9]{6}.[a-z0-9]{16}".to_string()
                    })?;
                    (id.to_string(), secret.to_string())
                }
                None => bootstrap_tokens::generate(),
            };
            let expiration = match ttl {
                Some(ttl) => Some(
                    Timestamp::now()
                        .checked_add(ttl)
                        .context("the --ttl is too long")?,
                ),
                None => None,
            };
            let new = NewToken {
                id: id.clone(),
                secret: secret.clone(),
                expiration,
                usages,
                description,
                groups,
            };
            let object: Secret = serde_json::from_value(bootstrap_tokens::secret_object(&new))
                .context("building the token Secret")?;
            secrets
                .create(&PostParams::default(), &object)
                .await
                .map_err(api_error)
                .with_context(|| format!("creating bootstrap token {id}"))?;
            let ca = crate::admin_client::call(&client, http::Method::GET, "/cacerts").await?;
            println!(
                "{}",
                JoinToken::format(ca.as_bytes(), &format!("{id}.{secret}"))
            );
        }
        TokenCommand::List => {
            let list = secrets
                .list(&ListParams::default())
                .await
                .map_err(api_error)
                .context("listing bootstrap tokens")?;
            print!("{}", table(&list.items, Timestamp::now()));
        }
        TokenCommand::Delete { ids } => {
            for id in ids {
                let id = id.split('.').next().unwrap_or_default().to_string();
                secrets
                    .delete(&format!("{SECRET_PREFIX}{id}"), &DeleteParams::default())
                    .await
                    .map_err(api_error)
                    .with_context(|| format!("deleting bootstrap token {id}"))?;
                println!("bootstrap token {id:?} deleted");
            }
        }
    }
    Ok(())
}

/// `--ttl`: a Go duration; 0 means no expiration.
fn parse_ttl(text: &str) -> anyhow::Result<Option<Duration>> {
    let ttl = skiff_common::duration::parse_go_duration(text)
        .with_context(|| format!("--ttl {text:?} is not a duration such as 24h or 30m"))?;
    Ok((!ttl.is_zero()).then_some(ttl))
}

fn api_error(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(status) => anyhow::anyhow!("{}", status.message),
        other => anyhow::Error::new(other),
    }
}

/// kubeadm's `token list` table: TOKEN, TTL, EXPIRES, USAGES, DESCRIPTION,
/// EXTRA GROUPS; tokens sorted by id.
fn table(secrets: &[Secret], now: Timestamp) -> String {
    let text = |s: &Secret, key: &str| -> Option<String> {
        s.data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
    };
    let mut rows = vec![[
        "TOKEN".to_string(),
        "TTL".into(),
        "EXPIRES".into(),
        "USAGES".into(),
        "DESCRIPTION".into(),
        "EXTRA GROUPS".into(),
    ]];
    let mut tokens: Vec<&Secret> = secrets
        .iter()
        .filter(|s| s.type_.as_deref() == Some(SECRET_TYPE))
        .collect();
    tokens.sort_by_key(|s| text(s, "token-id"));
    for secret in tokens {
        let (Some(id), Some(token_secret)) =
            (text(secret, "token-id"), text(secret, "token-secret"))
        else {
            continue;
        };
        let expiration = text(secret, "expiration");
        let (ttl, expires) = match expiration.as_deref().map(str::parse::<Timestamp>) {
            None => ("<forever>".to_string(), "<never>".to_string()),
            Some(Ok(at)) => {
                let left = at.duration_since(now).as_secs();
                let ttl = if left <= 0 {
                    "<invalid>".to_string()
                } else {
                    human(left as u64)
                };
                (ttl, at.to_string())
            }
            Some(Err(_)) => ("<invalid>".to_string(), "<invalid>".to_string()),
        };
        let mut usages: Vec<String> = secret
            .data
            .iter()
            .flatten()
            .filter_map(|(k, v)| {
                let usage = k.strip_prefix("usage-bootstrap-")?;
                (v.0 == b"true").then(|| usage.to_string())
            })
            .collect();
        usages.sort();
        rows.push([
            format!("{id}.{token_secret}"),
            ttl,
            expires,
            usages.join(","),
            text(secret, "description").unwrap_or_else(|| "<none>".into()),
            text(secret, "auth-extra-groups").unwrap_or_default(),
        ]);
    }
    crate::columns::columns(&rows)
}

/// A short duration as kubeadm prints TTLs (`23h`, `59m`, `3d`).
fn human(secs: u64) -> String {
    match secs {
        s if s >= 2 * 86_400 => format!("{}d", s / 86_400),
        s if s >= 3600 => format!("{}h", s / 3600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn token(id: &str, expiration: Option<&str>) -> Secret {
        let mut data = std::collections::BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            data.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
        };
        put("token-id", id);
        put("token-secret", "0123456789abcdef");
        put("usage-bootstrap-authentication", "true");
        put("usage-bootstrap-signing", "true");
        if let Some(e) = expiration {
            put("expiration", e);
        }
        Secret {
            type_: Some(SECRET_TYPE.into()),
            data: Some(data),
            ..Default::default()
        }
    }

    #[test]
    fn the_list_is_kubeadms_table() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let text = table(
            &[
                token("bbbbbb", None),
                token("aaaaaa", Some("2026-01-02T00:00:00Z")),
                Secret {
                    type_: Some("Opaque".into()),
                    ..Default::default()
                },
            ],
            now,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("TOKEN"), "{text}");
        let fields = |line: &str| {
            line.split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fields(lines[1]),
            [
                "aaaaaa.0123456789abcdef",
                "24h",
                "2026-01-02T00:00:00Z",
                "authentication,signing",
                "<none>"
            ],
            "{text}"
        );
        assert_eq!(
            fields(lines[2])[..3],
            ["bbbbbb.0123456789abcdef", "<forever>", "<never>"],
            "{text}"
        );
    }

    #[test]
    fn ttls_parse() {
        assert_eq!(parse_ttl("24h").unwrap(), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_ttl("0").unwrap(), None);
        assert!(parse_ttl("soon").is_err());
    }
}
