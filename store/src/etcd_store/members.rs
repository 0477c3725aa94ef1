//! Which endpoints the balanced client sends requests to. The client
//! spreads requests over every endpoint it was given and keeps sending a
//! dead one its share, which fails; so each member is checked on its own
//! at every probe, and one that does not answer is taken out of the
//! balance until it answers again. When none answers, all stay in, so
//! whichever comes back first is used.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

/// One endpoint with a client of its own (for checks and defragmentation).
pub(crate) struct Member {
    pub(crate) endpoint: String,
    pub(crate) client: Client,
    balanced: AtomicBool,
}

pub(crate) struct Members {
    list: Vec<Member>,
}

impl Members {
    /// A client per endpoint; connecting is lazy, so this does not wait.
    pub(crate) async fn new(
        endpoints: &[String],
        options: &ConnectOptions,
    ) -> Result<Self, etcd_client::Error> {
        let mut list = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            list.push(Member {
                endpoint: endpoint.clone(),
                client: Client::connect([endpoint], Some(options.clone())).await?,
                balanced: AtomicBool::new(true),
            });
        }
        Ok(Self { list })
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Member> {
        self.list.iter()
    }

    /// Checks every member and moves `balanced`'s endpoints to the ones
    /// that answered within `timeout`.
    pub(crate) async fn check(&self, balanced: &Client, timeout: Duration) {
        if self.list.len() < 2 {
            return;
        }
        let answers = futures::future::join_all(self.list.iter().map(|member| {
            let mut client = member.client.clone();
            async move {
                matches!(
                    tokio::time::timeout(timeout, client.status()).await,
                    Ok(Ok(_))
                )
            }
        }))
        .await;
        let any = answers.iter().any(|up| *up);
        for (member, up) in self.list.iter().zip(answers) {
            let wanted = up || !any;
            if member.balanced.load(Ordering::Acquire) == wanted {
                continue;
            }
            let changed = if wanted {
                balanced.add_endpoint(&member.endpoint).await
            } else {
                balanced.remove_endpoint(&member.endpoint).await
            };
            match changed {
                Ok(()) => {
                    member.balanced.store(wanted, Ordering::Release);
                    if wanted {
                        tracing::info!(endpoint = %member.endpoint, "etcd member answers again; using it");
                    } else {
                        tracing::warn!(endpoint = %member.endpoint, "etcd member does not answer; not using it");
                    }
                }
                Err(e) => {
                    tracing::warn!(endpoint = %member.endpoint, error = %e, "cannot change the etcd client's endpoints")
                }
            }
        }
    }
}
