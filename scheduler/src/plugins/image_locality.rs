//! ImageLocality: prefer nodes that already have the pod's images, weighted by image size
//! and by how widely the image is spread (an image on every node says little).

use std::sync::Arc;

use super::stateless_plugin;
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "ImageLocality";
const STATE_KEY: &str = "PreScoreImageLocality";
const MB: i64 = 1024 * 1024;
/// Below this total the score is 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per-container cap of the total.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// Adds ":latest" to image names without a tag or digest, as the runtime does.
pub(crate) fn normalize_image(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') || last.contains('@') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

#[derive(Clone)]
struct PodImages {
    /// (normalized image, spread = nodes having it / total nodes)
    images: Vec<(String, f64)>,
    containers: i64,
}

stateless_plugin! {
    /// The ImageLocality plugin.
    ImageLocality = NAME;
    views!(pre_score, score);
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let spec = pod.spec();
        let all = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter());
        let total = snapshot.len().max(1) as f64;
        let mut containers = 0;
        let mut images = Vec::new();
        for c in all {
            containers += 1;
            if let Some(img) = c.image.as_deref().filter(|i| !i.is_empty()) {
                let n = normalize_image(img);
                let spread = snapshot.image_node_count(&n) as f64 / total;
                // An image no node has scores zero everywhere: leave it out, so
                // scoring does not look it up on every node.
                if spread > 0.0 {
                    images.push((n, spread));
                }
            }
        }
        if images.is_empty() {
            return Status::skip();
        }
        state.write(STATE_KEY, PodImages { images, containers });
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(p) = state.read::<PodImages>(STATE_KEY) else {
            return (0, Status::success());
        };
        let sum: i64 = p
            .images
            .iter()
            .filter_map(|(img, spread)| {
                node.images
                    .get(img)
                    .map(|size| (*size as f64 * spread) as i64)
            })
            .sum();
        let max = MAX_CONTAINER_THRESHOLD * p.containers.max(1);
        let clamped = sum.clamp(MIN_THRESHOLD, max);
        (
            MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max - MIN_THRESHOLD),
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::node_info_with;
    use crate::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn normalizes_names() {
        assert_eq!(normalize_image("nginx"), "nginx:latest");
        assert_eq!(normalize_image("nginx:1.25"), "nginx:1.25");
        assert_eq!(
            normalize_image("registry:5000/app"),
            "registry:5000/app:latest"
        );
        assert_eq!(normalize_image("app@sha256:abc"), "app@sha256:abc");
    }

    #[test]
    fn score_by_size_and_spread() {
        let big = NodeBuilder::new("big").image("app:1", 500 * MB);
        let small = NodeBuilder::new("small").image("app:1", 10 * MB);
        let nodes = vec![
            node_info_with(big.build(), vec![]),
            node_info_with(NodeBuilder::new("none").build(), vec![]),
            node_info_with(small.build(), vec![]),
        ];
        let snapshot = Snapshot::from_nodes(nodes.clone());
        let pod = PodInfo::new(Arc::new(PodBuilder::new("p").image("app:1").build()));
        let mut state = CycleState::new();
        assert!(
            ImageLocality
                .pre_score(&mut state, &pod, &[], &snapshot)
                .is_success()
        );
        let got: Vec<i64> = nodes
            .iter()
            .map(|n| ImageLocality.score(&state, &pod, n).0)
            .collect();
        // 500MB * 2/3 nodes = 333MB; (333-23)*100/(1000-23) = 31.
        assert_eq!(got, vec![31, 0, 0]);
        let no_image = PodInfo::new(Arc::new(PodBuilder::new("q").container(&[]).build()));
        assert!(
            ImageLocality
                .pre_score(&mut CycleState::new(), &no_image, &[], &snapshot)
                .is_skip()
        );
    }
}
