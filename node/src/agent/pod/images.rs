//! Making sure a container's image is present, by its `imagePullPolicy`,
//! pulling with the pod's registry credentials ([`super::pull_secrets`]),
//! and saying so in upstream's words: the events a kubelet's image manager
//! records (`Pulling`, `Pulled`, `Failed`, `BackOff`, `ErrImageNeverPull`)
//! and the waiting reason and message of a container whose image is not
//! there (`ErrImagePull`, `ImagePullBackOff` carrying the last pull error).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::backoff::{BackoffConfig, go_duration};
use super::cri_text;
use super::pull_secrets;
use crate::runtime::Runtime;

/// Why the image is not available (the container's waiting reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageProblem {
    /// `ErrImageNeverPull`, `ErrImagePull`, `ImagePullBackOff` or
    /// `ImageInspectError`.
    pub reason: &'static str,
    /// Details.
    pub message: String,
}

/// Where pull credentials come from.
pub(crate) struct PullContext<'a> {
    /// API access for pull secrets and the service account.
    pub client: &'a kube::Client,
    /// The pod whose container is pulled.
    pub pod: &'a Pod,
}

/// One event the image manager records, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PullEvent {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// The event's reason.
    pub reason: &'static str,
    /// The event's message.
    pub message: String,
}

impl PullEvent {
    fn normal(reason: &'static str, message: String) -> Self {
        Self {
            warning: false,
            reason,
            message,
        }
    }

    fn warning(reason: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            message,
        }
    }
}

/// What a pull attempt tells the user besides the waiting reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PullNotes {
    /// Pull secrets the pod names that do not exist.
    pub missing_secrets: Vec<String>,
    /// The image manager's events, in the order upstream records them.
    pub events: Vec<PullEvent>,
}

impl PullNotes {
    /// The problem `reason` whose message a Warning event `event` also
    /// tells.
    fn warned(
        &mut self,
        event: &'static str,
        reason: &'static str,
        message: String,
    ) -> ImageProblem {
        self.events.push(PullEvent::warning(event, message.clone()));
        ImageProblem { reason, message }
    }
}

/// One image's failed pulls.
#[derive(Debug, Clone)]
struct Failure {
    delay: Duration,
    /// When it failed (monotonic, as the agent's deadlines are).
    at: Instant,
    /// `<reason>: <message>` of the last failure, which the waiting message
    /// repeats while the pull backs off.
    last: String,
}

/// The pod's image pull back-off, keyed by image as upstream keys it (per
/// pod and image): after a failed pull no pull happens for `initial`, the
/// delay doubling with each failure up to `max`; a success forgets it.
#[derive(Debug, Clone)]
pub(crate) struct PullBackoff {
    config: BackoffConfig,
    failures: HashMap<String, Failure>,
}

impl PullBackoff {
    /// No failures yet.
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            failures: HashMap::new(),
        }
    }

    /// The last failure's `<reason>: <message>` while `image` backs off at
    /// `now`.
    fn backing_off(&self, image: &str, now: Instant) -> Option<&str> {
        let failure = self.failures.get(image)?;
        let since = now.saturating_duration_since(failure.at);
        (since < failure.delay).then_some(failure.last.as_str())
    }

    /// Records a failed pull at `now`: the first waits `initial`, each
    /// later one twice the last delay (at most `max`); one long after the
    /// last (twice `max`) starts over, as upstream's back-off expires.
    fn failed(&mut self, image: &str, now: Instant, last: String) {
        let delay = match self.failures.get(image) {
            Some(f) if now.saturating_duration_since(f.at) <= self.config.max * 2 => {
                (f.delay * 2).min(self.config.max)
            }
            _ => self.config.initial,
        };
        let failure = Failure {
            delay,
            at: now,
            last,
        };
        self.failures.insert(image.to_string(), failure);
    }

    fn succeeded(&mut self, image: &str) {
        self.failures.remove(image);
    }
}

/// The effective pull policy: the spec's, or upstream's default
/// (`Always` for `:latest` or untagged images, `IfNotPresent` otherwise).
pub(crate) fn pull_policy(container: &Container) -> String {
    if let Some(p) = &container.image_pull_policy {
        return p.clone();
    }
    let image = container.image.as_deref().unwrap_or_default();
    let last = image.rsplit('/').next().unwrap_or(image);
    let tagged = last.contains(':') && !last.ends_with(":latest");
    if tagged || image.contains('@') {
        "IfNotPresent".to_string()
    } else {
        "Always".to_string()
    }
}

/// Ensures the image of `container` is present, pulling when the policy
/// says so and the image is not backing off; `notes` gets the events
/// upstream's image manager records on the way. Returns the image
/// reference to run.
pub(crate) async fn ensure(
    runtime: &dyn Runtime,
    pull: &PullContext<'_>,
    container: &Container,
    backoff: &mut PullBackoff,
    notes: &mut PullNotes,
) -> Result<String, ImageProblem> {
    let image = container.image.clone().unwrap_or_default();
    let policy = pull_policy(container);
    let present = match runtime.image_status(&image).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            let message = format!(
                "Failed to inspect image \"{image}\": {}",
                cri_text::grpc_error(&e)
            );
            return Err(notes.warned("InspectFailed", "ImageInspectError", message));
        }
    };
    let already_present = || {
        PullEvent::normal(
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
        )
    };
    if present && policy != "Always" {
        notes.events.push(already_present());
        return Ok(image);
    }
    if !present && policy == "Never" {
        let message =
            format!("Container image \"{image}\" is not present with pull policy of Never");
        return Err(notes.warned("ErrImageNeverPull", "ErrImageNeverPull", message));
    }
    if let Some(last) = backoff.backing_off(&image, Instant::now()) {
        let message = format!("Back-off pulling image \"{image}\"");
        notes
            .events
            .push(PullEvent::normal("BackOff", message.clone()));
        // The waiting message carries the last pull's error, as upstream's
        // does since 1.32: the event that told it may be long gone.
        return Err(ImageProblem {
            reason: "ImagePullBackOff",
            message: format!("{message}: {last}"),
        });
    }
    let (credentials, missing) = pull_secrets::load(pull.client, pull.pod).await;
    notes.missing_secrets = missing;
    notes.events.push(PullEvent::normal(
        "Pulling",
        format!("Pulling image \"{image}\""),
    ));
    let started = Instant::now();
    match pull_with(
        runtime,
        &image,
        &pull_secrets::for_image(&credentials, &image),
    )
    .await
    {
        Ok(reference) => {
            let took = started.elapsed();
            backoff.succeeded(&image);
            let size = match runtime.image_status(&reference).await {
                Ok(Some(found)) => found.size,
                _ => 0,
            };
            notes.events.push(PullEvent::normal(
                "Pulled",
                pulled_message(&image, took, size),
            ));
            Ok(image)
        }
        // With `Always`, an image that is present still runs when the
        // registry cannot be reached (there is none in an airgap).
        Err(_) if present => {
            notes.events.push(already_present());
            Ok(image)
        }
        Err(e) => {
            let error = cri_text::pull_error(&e);
            notes.events.push(PullEvent::warning(
                "Failed",
                format!("Failed to pull image \"{image}\": {error}"),
            ));
            backoff.failed(&image, Instant::now(), format!("ErrImagePull: {error}"));
            Err(ImageProblem {
                reason: "ErrImagePull",
                message: error,
            })
        }
    }
}

/// The `Pulled` event's message after a pull that took `took`: upstream's,
/// with the durations cut to milliseconds and printed as Go prints them
/// (skiff pulls one at a time, so nothing is spent waiting).
fn pulled_message(image: &str, took: Duration, size: u64) -> String {
    let took = go_duration(took);
    format!(
        "Successfully pulled image \"{image}\" in {took} ({took} including waiting). Image size: {size} bytes."
    )
}

/// Pulls `image` with each matching credential in turn (the first that
/// works wins), or anonymously when none match.
pub(crate) async fn pull_with(
    runtime: &dyn Runtime,
    image: &str,
    auths: &[crate::runtime::cri_api::AuthConfig],
) -> Result<String, crate::runtime::RuntimeError> {
    let Some((last, rest)) = auths.split_last() else {
        return runtime.pull_image(image, None, None).await;
    };
    for auth in rest {
        if let Ok(reference) = runtime.pull_image(image, Some(auth.clone()), None).await {
            return Ok(reference);
        }
    }
    runtime.pull_image(image, Some(last.clone()), None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            image_pull_policy: policy.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn default_policy_follows_the_tag() {
        assert_eq!(pull_policy(&container("busybox", None)), "Always");
        assert_eq!(pull_policy(&container("busybox:latest", None)), "Always");
        assert_eq!(
            pull_policy(&container("skiff.local/busybox:1", None)),
            "IfNotPresent"
        );
        assert_eq!(pull_policy(&container("localhost:5000/x", None)), "Always");
        assert_eq!(pull_policy(&container("busybox", Some("Never"))), "Never");
    }
    #[test]
    fn pulled_messages_print_durations_as_go() {
        assert_eq!(
            pulled_message("x:1", Duration::from_millis(2500), 4_300_000),
            "Successfully pulled image \"x:1\" in 2.5s (2.5s including waiting). Image size: 4300000 bytes."
        );
    }

    #[test]
    fn a_failed_pull_backs_off_doubling_and_remembers_its_error() {
        let mut backoff = PullBackoff::new(BackoffConfig {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(25),
            reset_after: Duration::from_secs(600),
        });
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(backoff.backing_off("x", t0), None);
        backoff.failed("x", t0, "ErrImagePull: one".into());
        assert_eq!(backoff.backing_off("x", at(9)), Some("ErrImagePull: one"));
        assert_eq!(backoff.backing_off("y", at(9)), None);
        // Once the delay has passed the pull is tried again.
        assert_eq!(backoff.backing_off("x", at(10)), None);
        backoff.failed("x", at(10), "ErrImagePull: two".into());
        assert_eq!(backoff.backing_off("x", at(29)), Some("ErrImagePull: two"));
        assert_eq!(backoff.backing_off("x", at(30)), None);
        // Doubling stops at the max.
        backoff.failed("x", at(30), "ErrImagePull: three".into());
        assert!(backoff.backing_off("x", at(54)).is_some());
        assert_eq!(backoff.backing_off("x", at(55)), None);
        // A success forgets it; a failure long after the last starts over.
        backoff.succeeded("x");
        assert_eq!(backoff.backing_off("x", at(31)), None);
        backoff.failed("x", at(100), "ErrImagePull: four".into());
        backoff.failed("x", at(200), "ErrImagePull: five".into());
        assert!(backoff.backing_off("x", at(209)).is_some());
        assert_eq!(backoff.backing_off("x", at(210)), None);
    }
}
