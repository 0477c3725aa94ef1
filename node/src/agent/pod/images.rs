//! Making sure a container's image is present, by its `imagePullPolicy`,
//! pulling with the pod's registry credentials ([`super::pull_secrets`]).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::backoff::{Backoff, Verdict};
use super::pull_secrets;
use crate::runtime::Runtime;

/// Why the image is not available (the container's waiting reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageProblem {
    /// `ErrImageNeverPull`, `ErrImagePull` or `ImagePullBackOff`.
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

/// What a pull attempt tells the user besides the waiting reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PullNotes {
    /// Pull secrets the pod names that do not exist.
    pub missing_secrets: Vec<String>,
    /// Whether a pull was attempted (and so an event is due).
    pub pulled: bool,
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
/// says so. Returns the image reference to run.
pub(crate) async fn ensure(
    runtime: &dyn Runtime,
    pull: &PullContext<'_>,
    container: &Container,
    backoff: &mut Backoff,
    notes: &mut PullNotes,
) -> Result<String, ImageProblem> {
    let image = container.image.clone().unwrap_or_default();
    let policy = pull_policy(container);
    let present = match runtime.image_status(&image).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            return Err(ImageProblem {
                reason: "ErrImagePull",
                message: format!("checking image {image}: {e}"),
            });
        }
    };
    if present && policy != "Always" {
        return Ok(image);
    }
    if !present && policy == "Never" {
        return Err(ImageProblem {
            reason: "ErrImageNeverPull",
            message: format!(
                "Container image \"{image}\" is not present with pull policy of Never"
            ),
        });
    }
    let now = SystemTime::now();
    if let Verdict::Wait { delay, .. } = backoff.check(&container.name, now, Duration::ZERO, now) {
        return Err(ImageProblem {
            reason: "ImagePullBackOff",
            message: format!("Back-off {}s pulling image \"{image}\"", delay.as_secs()),
        });
    }
    let (credentials, missing) = pull_secrets::load(pull.client, pull.pod).await;
    notes.missing_secrets = missing;
    notes.pulled = true;
    match pull_with(
        runtime,
        &image,
        &pull_secrets::for_image(&credentials, &image),
    )
    .await
    {
        Ok(_) => {
            backoff.reset(&container.name);
            Ok(image)
        }
        // With `Always`, an image that is present still runs when the
        // registry cannot be reached (there is none in an airgap).
        Err(_) if present => Ok(image),
        Err(e) => Err(ImageProblem {
            reason: "ErrImagePull",
            message: format!("pulling image \"{image}\": {e}"),
        }),
    }
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
}
