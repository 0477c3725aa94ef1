//! Image garbage collection, as the kubelet's image manager does it: every
//! period, when the agent's file system is fuller than the high threshold,
//! images no container uses are removed, least recently used first, until
//! the low threshold would be reached. Images any container (running or
//! not) uses, the pause image, images the runtime pins, images imported
//! from the airgap directory (no registry may hold them, so k3s pins them
//! too) and images younger than the minimum age are kept. When not enough can be freed, the node
//! reports `ImageGCFailed` in upstream's words. Under disk pressure the
//! eviction manager removes every image that may go before it evicts a
//! pod ([`ImageGc::delete_unused`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use skiff_common::events::EventRecorder;
use skiff_common::wakeups::Ticks;
use tokio::sync::watch;

use crate::images::PAUSE_IMAGE;
use crate::runtime::{Runtime, RuntimeError, cri_api};

/// When and how far images are collected (the kubelet's `--image-gc-*`
/// and `--minimum-image-ttl-duration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Collect when the disk is at least this full (percent); 100 turns
    /// collection off.
    pub high_threshold_percent: u8,
    /// Free down to this fullness (percent).
    pub low_threshold_percent: u8,
    /// An image seen for less than this is kept.
    pub minimum_age: Duration,
    /// How often usage is checked (the kubelet's five minutes).
    pub period: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        Self {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            minimum_age: Duration::from_secs(120),
            period: Duration::from_secs(300),
        }
    }
}

/// The collector and what it remembers of each image (by id).
pub(crate) struct ImageGc {
    /// The runtime holding the images.
    pub runtime: Arc<dyn Runtime>,
    /// `DATA_DIR/agent`, whose file system the images fill.
    pub agent_dir: PathBuf,
    /// Thresholds and ages.
    pub policy: ImageGcPolicy,
    /// The node's events.
    pub events: EventRecorder,
    /// The Node, as its events name it.
    pub node: ObjectReference,
    /// When each image was first seen and last seen in use.
    pub seen: HashMap<String, (Instant, Option<Instant>)>,
    /// Names of the images imported from the airgap directory, never
    /// removed.
    pub keep: HashSet<String>,
}

/// The collector, shared by its own schedule and the eviction manager,
/// which reclaims images before it evicts pods for disk.
pub(crate) type SharedImageGc = Arc<tokio::sync::Mutex<ImageGc>>;

impl ImageGc {
    /// Collects every period until `stop` is raised (never, with a high
    /// threshold of 100%).
    pub(crate) async fn run(gc: SharedImageGc, stop: watch::Receiver<bool>) {
        let policy = gc.lock().await.policy;
        if policy.high_threshold_percent >= 100 {
            return;
        }
        let mut ticks = Ticks::new(policy.period, stop);
        while ticks.next().await {
            let mut gc = gc.lock().await;
            let (size, available) = crate::agent::node::host::disk_size(&gc.agent_dir);
            let Some(to_free) = amount_to_free(&gc.policy, size, available) else {
                continue;
            };
            let outcome = match gc.free(to_free, Instant::now()).await {
                Ok(freed) if freed < to_free => Err(ImageGcError::Short { to_free, freed }),
                Ok(_) => Ok(()),
                Err(error) => Err(error.into()),
            };
            if let Err(error) = outcome {
                tracing::warn!(%error, "image garbage collection failed");
                gc.events
                    .warning(&gc.node, "ImageGCFailed", "", error.to_string());
            }
        }
    }

    /// Removes every image that may go (the eviction manager's reclaim
    /// under disk pressure); the bytes freed.
    pub(crate) async fn delete_unused(&mut self) -> Result<u64, RuntimeError> {
        self.free(u64::MAX, Instant::now()).await
    }

    /// Removes unused images, least recently used first, until `to_free`
    /// bytes are freed or none is left that may go; the bytes freed.
    async fn free(&mut self, to_free: u64, now: Instant) -> Result<u64, RuntimeError> {
        let images = self.runtime.list_images().await?;
        let containers = self.runtime.list_containers(None).await?;
        let in_use: HashSet<&str> = containers
            .iter()
            .flat_map(|c| {
                let spec = c.image.as_ref().map(|i| i.image.as_str());
                [Some(c.image_ref.as_str()), spec].into_iter().flatten()
            })
            .collect();
        let used = |image: &cri_api::Image| {
            in_use.contains(image.id.as_str())
                || image.repo_tags.iter().any(|t| in_use.contains(t.as_str()))
                || image
                    .repo_digests
                    .iter()
                    .any(|d| in_use.contains(d.as_str()))
        };
        self.seen
            .retain(|id, _| images.iter().any(|image| &image.id == id));
        for image in &images {
            let seen = self.seen.entry(image.id.clone()).or_insert((now, None));
            if used(image) {
                seen.1 = Some(now);
            }
        }
        let mut candidates: Vec<(&cri_api::Image, Instant)> = images
            .iter()
            .filter(|image| {
                !used(image)
                    && !image.pinned
                    && !image
                        .repo_tags
                        .iter()
                        .any(|t| t == PAUSE_IMAGE || self.keep.contains(t))
            })
            .filter_map(|image| {
                let (first, last) = *self.seen.get(&image.id)?;
                (now.duration_since(first) >= self.policy.minimum_age)
                    .then_some((image, last.unwrap_or(first)))
            })
            .collect();
        candidates.sort_by_key(|(_, last)| *last);
        let mut freed = 0u64;
        for (image, _) in candidates {
            if freed >= to_free {
                break;
            }
            tracing::info!(image = %image.id, tags = ?image.repo_tags, size = image.size, "removing unused image");
            self.runtime.remove_image(&image.id).await?;
            self.seen.remove(&image.id);
            freed = freed.saturating_add(image.size);
        }
        Ok(freed)
    }
}

/// Bytes to free to get from `available` of `size` down to the low
/// threshold, once usage is at or over the high one; `None` below it.
fn amount_to_free(policy: &ImageGcPolicy, size: u64, available: u64) -> Option<u64> {
    if size == 0 {
        return None;
    }
    let used = size.saturating_sub(available);
    let percent = used * 100 / size;
    if percent < u64::from(policy.high_threshold_percent) {
        return None;
    }
    let wanted_free = size * (100 - u64::from(policy.low_threshold_percent).min(100)) / 100;
    Some(wanted_free.saturating_sub(available))
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageGcError {
    /// Listing or removing images failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Fewer unused images than needed.
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {to_free} bytes, but only found {freed} bytes eligible to free."
    )]
    Short {
        /// Bytes the low threshold asked for.
        to_free: u64,
        /// Bytes the eligible images held.
        freed: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_starts_at_the_high_threshold_and_aims_at_the_low_one() {
        let policy = ImageGcPolicy::default();
        assert_eq!(amount_to_free(&policy, 1000, 200), None, "80% full");
        assert_eq!(
            amount_to_free(&policy, 1000, 150),
            Some(50),
            "85% full: down to 80%"
        );
        assert_eq!(amount_to_free(&policy, 1000, 10), Some(190));
        assert_eq!(amount_to_free(&policy, 0, 0), None, "an unmeasured disk");
        let eager = ImageGcPolicy {
            high_threshold_percent: 1,
            low_threshold_percent: 0,
            ..policy
        };
        assert_eq!(
            amount_to_free(&eager, 1000, 900),
            Some(100),
            "everything used"
        );
    }
}
