//! Running an election against a coordination.k8s.io/v1 Lease, and the
//! leadership handle components wait on.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;

use super::decision::{Decision, ElectionConfig, LeaseObserver, release_spec, should_step_down};

/// Errors that stop an election from starting.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The timings or identity would not give exclusive leadership.
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
}

/// Whether this process currently leads; cloneable, cheap to poll or await.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    /// Keeps the channel open for the no-op variant, which has no elector.
    _always: Option<std::sync::Arc<watch::Sender<bool>>>,
}

impl Leadership {
    /// Leadership for a process running alone: leader at once, never lost.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Self {
            rx,
            _always: Some(std::sync::Arc::new(tx)),
        }
    }

    /// True while this process holds the lease.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until this process leads. Returns false if the election ended first.
    pub async fn acquired(&self) -> bool {
        let mut rx = self.rx.clone();
        rx.wait_for(|leader| *leader).await.is_ok()
    }

    /// Waits until this process does not lead: returns at once if it does not
    /// lead now, otherwise when leadership is lost, given up or the election ends.
    /// Never returns for [`Leadership::always`].
    pub async fn lost(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|leader| !*leader).await;
    }

    /// A channel of leadership changes.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }
}

/// Competes for one Lease and reports leadership through [`Leadership`].
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    config: ElectionConfig,
    leader: watch::Sender<bool>,
}

impl LeaderElector {
    /// A candidate for Lease `name` in `namespace` (usually `kube-system`).
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        config: ElectionConfig,
    ) -> Result<(Self, Leadership), LeaderElectionError> {
        config
            .validate()
            .map_err(LeaderElectionError::InvalidConfig)?;
        let (leader, rx) = watch::channel(false);
        let elector = Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            config,
            leader,
        };
        Ok((elector, Leadership { rx, _always: None }))
    }

    /// Acquires and renews until `stop` completes; then releases the Lease if
    /// held, so another candidate takes over without waiting for expiry.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut observer = LeaseObserver::new();
        let mut last_renewed: Option<Instant> = None;
        loop {
            let leading = self.attempt(&mut observer, &mut last_renewed).await;
            self.set_leader(leading);
            let pause = if leading {
                self.config.retry_period
            } else {
                jittered(self.config.retry_period)
            };
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
        if *self.leader.borrow() {
            self.release().await;
        }
        self.set_leader(false);
    }

    /// One read-decide-write round; returns whether we lead afterwards.
    async fn attempt(
        &self,
        observer: &mut LeaseObserver,
        last_renewed: &mut Option<Instant>,
    ) -> bool {
        let was_leader = *self.leader.borrow();
        let renewed_at = *last_renewed;
        // A leader whose write failed keeps leading only until its renew deadline.
        let still_within_deadline = |now: Instant| {
            was_leader && renewed_at.is_some_and(|at| !should_step_down(&self.config, at, now))
        };
        let current = match self.api.get_opt(&self.name).await {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(lease = %self.name, %error, "could not read the leader lease");
                return still_within_deadline(Instant::now());
            }
        };
        let now = Instant::now();
        let spec = current.as_ref().map(|l| l.spec.clone().unwrap_or_default());
        let decision = observer.decide(&self.config, spec.as_ref(), now, Timestamp::now());
        let written = match decision {
            Decision::Wait { holder } => {
                if was_leader {
                    tracing::warn!(lease = %self.name, %holder, "leadership lost to another holder");
                }
                return false;
            }
            Decision::Create(spec) => self.create(spec).await,
            Decision::Acquire(spec) | Decision::Renew(spec) => match current {
                Some(lease) => self.replace(lease, spec).await,
                None => None,
            },
        };
        match written {
            Some(spec) => {
                observer.observe_written(&spec, now);
                *last_renewed = Some(now);
                if !was_leader {
                    tracing::info!(lease = %self.name, identity = %self.config.identity, "became leader");
                }
                true
            }
            None => still_within_deadline(Instant::now()),
        }
    }

    async fn create(&self, spec: LeaseSpec) -> Option<LeaseSpec> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: Some(spec.clone()),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Some(spec),
            Err(error) => {
                tracing::debug!(lease = %self.name, %error, "could not create the leader lease");
                None
            }
        }
    }

    /// Writes `spec` over `lease`; its resourceVersion makes a concurrent
    /// writer's update fail with a conflict instead of being overwritten.
    async fn replace(&self, mut lease: Lease, spec: LeaseSpec) -> Option<LeaseSpec> {
        lease.spec = Some(spec.clone());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Some(spec),
            Err(error) => {
                tracing::debug!(lease = %self.name, %error, "could not update the leader lease");
                None
            }
        }
    }

    async fn release(&self) {
        let Ok(Some(lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease
            .spec
            .as_ref()
            .and_then(|current| release_spec(&self.config, current, Timestamp::now()))
        else {
            return;
        };
        if self.replace(lease, spec).await.is_some() {
            tracing::info!(lease = %self.name, identity = %self.config.identity, "released leadership");
        }
    }

    fn set_leader(&self, leading: bool) {
        self.leader.send_if_modified(|current| {
            let changed = *current != leading;
            *current = leading;
            changed
        });
    }
}

/// `period` stretched by up to 20% so candidates do not retry in lockstep.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::rng().random_range(0.0..0.2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;

    fn fast(identity: &str) -> ElectionConfig {
        ElectionConfig {
            identity: identity.into(),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(100),
        }
    }

    #[tokio::test]
    async fn always_is_leader_at_once() {
        let leadership = Leadership::always();
        assert!(leadership.is_leader());
        assert!(leadership.acquired().await);
    }

    #[tokio::test(start_paused = true)]
    async fn one_of_two_candidates_leads_and_release_hands_over() {
        let fake = FakeApi::default();
        let client = fake.client();
        let (a, lead_a) =
            LeaderElector::new(client.clone(), "kube-system", "skiff", fast("a")).unwrap();
        let (b, lead_b) = LeaderElector::new(client, "kube-system", "skiff", fast("b")).unwrap();
        let (stop_a, stopped_a) = tokio::sync::oneshot::channel::<()>();
        let run_a = tokio::spawn(a.run(async move {
            let _ = stopped_a.await;
        }));
        tokio::time::timeout(Duration::from_secs(5), lead_a.acquired())
            .await
            .expect("a leads");
        let (stop_b, stopped_b) = tokio::sync::oneshot::channel::<()>();
        let run_b = tokio::spawn(b.run(async move {
            let _ = stopped_b.await;
        }));
        // b keeps trying while a renews: a stays the only leader.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(lead_a.is_leader());
        assert!(!lead_b.is_leader());
        let lease = fake.object("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/skiff");
        assert_eq!(
            lease.and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned)),
            Some("a".to_owned())
        );

        stop_a.send(()).unwrap();
        run_a.await.unwrap();
        assert!(!lead_a.is_leader());
        // Released, not expired: b takes over within a few retry periods.
        tokio::time::timeout(Duration::from_secs(1), lead_b.acquired())
            .await
            .expect("b takes over after the release");
        stop_b.send(()).unwrap();
        run_b.await.unwrap();
        lead_b.lost().await;
    }

    const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/skiff";

    async fn leading_candidate(fake: &FakeApi) -> (Leadership, tokio::sync::oneshot::Sender<()>) {
        let (elector, leadership) =
            LeaderElector::new(fake.client(), "kube-system", "skiff", fast("a")).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(elector.run(async move {
            let _ = stopped.await;
        }));
        tokio::time::timeout(Duration::from_secs(5), leadership.acquired())
            .await
            .expect("a leads");
        (leadership, stop)
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_finds_another_holder_steps_down() {
        let fake = FakeApi::default();
        let (leadership, _stop) = leading_candidate(&fake).await;
        fake.overwrite(LEASE_PATH, |lease| {
            lease["spec"]["holderIdentity"] = serde_json::json!("intruder");
        });
        tokio::time::timeout(Duration::from_secs(2), leadership.lost())
            .await
            .expect("steps down");
        // The intruder's fresh record is respected: no re-acquisition before expiry.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!leadership.is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_steps_down_at_the_renew_deadline() {
        let fake = FakeApi::default();
        let (leadership, _stop) = leading_candidate(&fake).await;
        let cut_off = Instant::now();
        fake.set_objects_unavailable(true);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(leadership.is_leader(), "still within the renew deadline");
        tokio::time::timeout(Duration::from_secs(2), leadership.lost())
            .await
            .expect("steps down");
        let stepped_down_after = cut_off.elapsed();
        assert!(
            stepped_down_after >= Duration::from_millis(1400)
                && stepped_down_after <= Duration::from_millis(1700),
            "stepped down {stepped_down_after:?} after losing the API"
        );
    }

    #[tokio::test]
    async fn unsafe_configs_are_refused() {
        let mut config = fast("a");
        config.renew_deadline = config.lease_duration;
        let client = FakeApi::default().client();
        assert!(matches!(
            LeaderElector::new(client, "kube-system", "skiff", config),
            Err(LeaderElectionError::InvalidConfig(_))
        ));
    }
}
