//! End-to-end scheduling on in-memory nodes and pods: the full driver (queue, cache,
//! framework with the default plugins, binding through a fake API), checking that pods
//! land where kubectl users expect and that failures read like upstream's.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use skiff_scheduler::framework::SchedulerConfig;
use skiff_scheduler::testing::{NodeBuilder, PodBuilder, TestCluster, node_req};
use skiff_scheduler::{CycleOutcome, Outcome};

fn counts(placed: &[(String, String)], key: impl Fn(&str) -> String) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for (_, node) in placed {
        *m.entry(key(node)).or_default() += 1;
    }
    m
}

fn zoned_cluster(c: &TestCluster, zones: &[&str], per_zone: usize) {
    for z in zones {
        for i in 0..per_zone {
            c.add_nodes(vec![
                NodeBuilder::new(&format!("{z}-{i}"))
                    .label("topology.kubernetes.io/zone", z)
                    .build(),
            ]);
        }
    }
}

/// Adds `count` pods `<app>-<i>` labelled `app=<app>`, each shaped further by `with`
/// (a spread constraint, an anti-affinity on their own label).
fn add_app_pods(c: &TestCluster, app: &str, count: usize, with: impl Fn(PodBuilder) -> PodBuilder) {
    for i in 0..count {
        c.add_pod(with(PodBuilder::new(&format!("{app}-{i}")).label("app", app)).build());
    }
}

/// Adds `count` pods of `app` (as `add_app_pods`) spread over `topology_key` with a
/// maximum skew of 1; `when` says what an unsatisfiable spread does.
fn add_spread_pods(c: &TestCluster, app: &str, count: usize, topology_key: &str, when: &str) {
    add_app_pods(c, app, count, |p| {
        p.spread(1, topology_key, when, &[("app", app)])
    });
}

fn zone_of(node: &str) -> String {
    node.split('-').next().unwrap_or_default().to_string()
}

mod placement {
    use super::*;

    #[tokio::test]
    async fn node_selector_and_affinity() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a", "b", "c"], 2);
        c.add_pod(
            PodBuilder::new("sel")
                .node_selector("topology.kubernetes.io/zone", "b")
                .build(),
        );
        c.add_pod(
            PodBuilder::new("aff")
                .required_node_term(
                    vec![node_req(
                        "topology.kubernetes.io/zone",
                        "NotIn",
                        &["a", "b"],
                    )],
                    vec![],
                )
                .build(),
        );
        c.add_pod(
            PodBuilder::new("pref")
                .preferred_node_term(
                    100,
                    vec![node_req("kubernetes.io/hostname", "In", &["a-1"])],
                )
                .build(),
        );
        let (placed, failed) = c.schedule_all().await;
        assert!(failed.is_empty());
        let by_pod: HashMap<_, _> = placed.into_iter().collect();
        assert_eq!(zone_of(&by_pod["sel"]), "b");
        assert_eq!(zone_of(&by_pod["aff"]), "c");
        assert_eq!(by_pod["pref"], "a-1");
    }

    #[tokio::test]
    async fn hard_zone_spread_is_even() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a", "b", "c"], 2);
        add_spread_pods(&c, "web", 9, "topology.kubernetes.io/zone", "DoNotSchedule");
        let (placed, failed) = c.schedule_all().await;
        assert!(failed.is_empty());
        let per_zone = counts(&placed, zone_of);
        assert_eq!(
            per_zone.values().copied().collect::<Vec<_>>(),
            vec![3, 3, 3]
        );
    }

    #[tokio::test]
    async fn soft_hostname_spread_uses_every_node() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a"], 4);
        add_spread_pods(&c, "w", 4, "kubernetes.io/hostname", "ScheduleAnyway");
        let (placed, _) = c.schedule_all().await;
        assert_eq!(counts(&placed, |n| n.to_string()).len(), 4);
    }

    #[tokio::test]
    async fn anti_affinity_one_per_node_then_upstream_message() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a"], 3);
        add_app_pods(&c, "db", 4, |p| {
            p.pod_anti_affinity(&[("app", "db")], "kubernetes.io/hostname")
        });
        let (placed, failed) = c.schedule_all().await;
        assert_eq!(counts(&placed, |n| n.to_string()).len(), 3);
        assert_eq!(failed.len(), 1);
        assert_eq!(
            failed[0].message,
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. \
             preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        );
    }

    #[tokio::test]
    async fn pod_affinity_follows_the_target() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a", "b"], 2);
        c.add_pod(
            PodBuilder::new("cache")
                .label("app", "cache")
                .node("b-1")
                .build(),
        );
        for i in 0..3 {
            c.add_pod(
                PodBuilder::new(&format!("app-{i}"))
                    .pod_affinity(&[("app", "cache")], "topology.kubernetes.io/zone")
                    .build(),
            );
        }
        let (placed, failed) = c.schedule_all().await;
        assert!(failed.is_empty());
        assert!(placed.iter().all(|(_, n)| zone_of(n) == "b"), "{placed:?}");
    }

    #[tokio::test]
    async fn taints_and_resources_failure_message() {
        let c = TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("t1")
                .taint("key", "value", "NoSchedule")
                .build(),
            NodeBuilder::new("t2")
                .taint("key", "value", "NoSchedule")
                .build(),
            NodeBuilder::new("small")
                .allocatable(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "10")])
                .build(),
        ]);
        c.add_pod(
            PodBuilder::new("busy")
                .node("small")
                .container(&[("cpu", "1500m")])
                .build(),
        );
        c.add_pod(PodBuilder::new("p").container(&[("cpu", "1")]).build());
        let (placed, failed) = c.schedule_all().await;
        assert!(placed.is_empty());
        let msg = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {key: value}. \
                   preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
                   2 Preemption is not helpful for scheduling.";
        assert_eq!(failed[0].message, msg);
        let reports = c.api.reports.lock().clone();
        assert_eq!(
            reports,
            vec![(
                "default/p".to_string(),
                Outcome::Failed {
                    reason: "Unschedulable".into(),
                    message: msg.into(),
                    nominated_node: None
                }
            )]
        );
        // A toleration lets a new pod through the tainted nodes.
        c.add_pod(
            PodBuilder::new("tolerant")
                .toleration("key", "Equal", "value", "NoSchedule")
                .container(&[("cpu", "1")])
                .build(),
        );
        let (placed, _) = c.schedule_all().await;
        assert!(placed[0].1.starts_with('t'), "{placed:?}");
    }

    #[tokio::test]
    async fn least_allocated_spreads_load() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a"], 4);
        for i in 0..8 {
            c.add_pod(
                PodBuilder::new(&format!("p{i}"))
                    .container(&[("cpu", "1"), ("memory", "1Gi")])
                    .build(),
            );
        }
        let (placed, _) = c.schedule_all().await;
        assert_eq!(
            counts(&placed, |n| n.to_string())
                .values()
                .copied()
                .collect::<Vec<_>>(),
            vec![2, 2, 2, 2]
        );
        let used = c
            .scheduler
            .with_cache(|cache| cache.node("a-0").map(|n| n.requested.milli_cpu));
        assert_eq!(used, Some(2000));
    }

    #[tokio::test]
    async fn volumes_pin_pods_to_their_pv_zone() {
        let c = TestCluster::new();
        zoned_cluster(&c, &["a", "b"], 2);
        let meta = |name: &str| ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        };
        let claim = |name: &str, spec: PersistentVolumeClaimSpec| PersistentVolumeClaim {
            metadata: meta(name),
            spec: Some(spec),
            status: None,
        };
        let bound_to_pv_b = || PersistentVolumeClaimSpec {
            volume_name: Some("pv-b".into()),
            ..Default::default()
        };
        c.listers.put_pvc(claim("data", bound_to_pv_b()));
        c.listers.put_pv(PersistentVolume {
            metadata: meta("pv-b"),
            spec: Some(PersistentVolumeSpec {
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![node_req(
                                "topology.kubernetes.io/zone",
                                "In",
                                &["b"],
                            )]),
                            match_fields: None,
                        }],
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        });
        c.listers.put_pvc(claim(
            "eager",
            PersistentVolumeClaimSpec {
                storage_class_name: Some("fast".into()),
                ..Default::default()
            },
        ));
        c.listers.put_storage_class(StorageClass {
            metadata: meta("fast"),
            provisioner: "x".into(),
            ..Default::default()
        });
        c.add_pod(PodBuilder::new("db").pvc("data").build());
        c.add_pod(PodBuilder::new("waits").pvc("eager").build());
        let (placed, failed) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
        assert_eq!(zone_of(&placed[0].1), "b");
        assert_eq!(
            failed[0].message,
            "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
             preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        );
        // The PV controller binds the claim: the PVC update requeues the pod.
        c.listers.put_pvc(claim("eager", bound_to_pv_b()));
        c.scheduler
            .on_cluster_event(skiff_scheduler::framework::ClusterEvent::new(
                skiff_scheduler::framework::EventResource::PersistentVolumeClaim,
                skiff_scheduler::framework::ActionSet::UPDATE_OTHER,
            ));
        c.clock.advance(Duration::from_secs(1));
        c.scheduler.flush();
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
        assert_eq!(zone_of(&placed[0].1), "b");
    }
}

mod lifecycle {
    use super::*;

    /// A cluster of one roomy node, `n1`.
    fn one_node_cluster() -> TestCluster {
        let c = TestCluster::new();
        c.add_nodes(vec![NodeBuilder::new("n1").build()]);
        c
    }

    #[tokio::test]
    async fn failed_bind_is_retried_without_double_counting() {
        let c = one_node_cluster();
        c.api.fail_binds.store(1, Ordering::SeqCst);
        c.add_pod(PodBuilder::new("p").container(&[("cpu", "1")]).build());
        let (placed, failed) = c.schedule_all().await;
        assert!(placed.is_empty());
        assert_eq!(failed[0].reason, "SchedulerError");
        assert!(
            failed[0].message.starts_with("Binding rejected: "),
            "{}",
            failed[0].message
        );
        assert_eq!(
            c.scheduler
                .with_cache(|cache| cache.node("n1").unwrap().requested.milli_cpu),
            0
        );
        c.clock.advance(Duration::from_secs(1));
        c.scheduler.flush();
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed, vec![("p".to_string(), "n1".to_string())]);
        c.scheduler.with_cache(|cache| {
            let n = cache.node("n1").unwrap();
            assert_eq!(n.requested.milli_cpu, 1000);
            assert_eq!(n.pods.len(), 1);
        });
    }

    #[tokio::test]
    async fn node_added_later_unblocks_pending_pods() {
        let c = TestCluster::new();
        c.add_pod(PodBuilder::new("p").build());
        let (_, failed) = c.schedule_all().await;
        assert_eq!(failed[0].message, "no nodes available to schedule pods");
        c.clock.advance(Duration::from_secs(2));
        c.add_nodes(vec![NodeBuilder::new("n1").build()]);
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed, vec![("p".to_string(), "n1".to_string())]);
    }

    #[tokio::test]
    async fn gated_pod_waits_for_its_gate() {
        let c = one_node_cluster();
        let gated = PodBuilder::new("g").gate("example.com/ready").build();
        c.add_pod(gated.clone());
        let (placed, failed) = c.schedule_all().await;
        assert!(placed.is_empty() && failed.is_empty());
        c.scheduler
            .on_pod_update(&gated, Arc::new(PodBuilder::new("g").build()));
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
    }

    #[tokio::test]
    async fn deleted_assigned_pod_frees_room() {
        let c = TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("n1")
                .allocatable(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "10")])
                .build(),
        ]);
        let hog = PodBuilder::new("hog")
            .node("n1")
            .container(&[("cpu", "1")])
            .build();
        c.add_pod(hog.clone());
        c.add_pod(PodBuilder::new("p").container(&[("cpu", "1")]).build());
        let (_, failed) = c.schedule_all().await;
        assert_eq!(failed.len(), 1);
        c.clock.advance(Duration::from_secs(1));
        c.scheduler.on_pod_delete(&hog);
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
    }

    /// A pod shrunk in place holds its old size until the node reports the
    /// resize applied; that status update then frees the room.
    #[tokio::test]
    async fn an_applied_shrink_frees_room() {
        let c = TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("n1")
                .allocatable(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "10")])
                .build(),
        ]);
        let running_with = |cpu: &str| {
            let mut pod = PodBuilder::new("shrunk")
                .node("n1")
                .container(&[("cpu", "500m")])
                .build();
            let name = pod.spec.as_ref().unwrap().containers[0].name.clone();
            pod.status = Some(
                serde_json::from_value(serde_json::json!({"containerStatuses": [{
                    "name": name, "image": "i", "imageID": "", "ready": true,
                    "restartCount": 0, "allocatedResources": {"cpu": cpu},
                    "resources": {"requests": {"cpu": cpu}}}]}))
                .unwrap(),
            );
            pod
        };
        let before = running_with("1");
        c.add_pod(before.clone());
        c.add_pod(PodBuilder::new("p").container(&[("cpu", "500m")]).build());
        let (placed, failed) = c.schedule_all().await;
        assert!(placed.is_empty(), "the shrink is not applied yet");
        assert_eq!(failed.len(), 1);
        c.clock.advance(Duration::from_secs(1));
        c.scheduler
            .on_pod_update(&before, Arc::new(running_with("500m")));
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed, vec![("p".to_string(), "n1".to_string())]);
    }

    #[tokio::test]
    async fn node_label_update_requeues_affinity_rejections() {
        let c = TestCluster::new();
        let plain = NodeBuilder::new("n1").build();
        c.add_nodes(vec![plain.clone()]);
        c.add_pod(PodBuilder::new("p").node_selector("disk", "ssd").build());
        let (_, failed) = c.schedule_all().await;
        assert_eq!(failed.len(), 1);
        c.clock.advance(Duration::from_secs(1));
        // A taint change cannot help a node-affinity rejection; a label change can.
        c.scheduler.on_node_update(
            &plain,
            Arc::new(
                NodeBuilder::new("n1")
                    .taint("x", "y", "PreferNoSchedule")
                    .build(),
            ),
        );
        assert_eq!(c.scheduler.with_queue(|q| q.lens()), (0, 0, 1));
        let labelled = NodeBuilder::new("n1").label("disk", "ssd").build();
        c.scheduler.on_node_update(&plain, Arc::new(labelled));
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed, vec![("p".to_string(), "n1".to_string())]);
    }

    #[tokio::test]
    async fn other_schedulers_pods_are_left_alone() {
        let c = one_node_cluster();
        c.add_pod(PodBuilder::new("theirs").scheduler_name("custom").build());
        let (placed, failed) = c.schedule_all().await;
        assert!(placed.is_empty() && failed.is_empty());
        assert!(c.api.reports.lock().is_empty());
    }

    #[tokio::test]
    async fn run_loop_binds_with_the_real_clock() {
        let c = skiff_scheduler::testing::TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("n1").build(),
            NodeBuilder::new("n2").build(),
        ]);
        for i in 0..20 {
            c.add_pod(
                PodBuilder::new(&format!("p{i}"))
                    .container(&[("cpu", "100m")])
                    .build(),
            );
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(c.scheduler.clone().run(async {
            let _ = rx.await;
        }));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while c.api.binds.lock().len() < 20 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = tx.send(());
        handle.await.unwrap();
        assert_eq!(c.api.binds.lock().len(), 20);
        let scheduled_reports = c
            .api
            .reports
            .lock()
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Scheduled { .. }))
            .count();
        assert_eq!(scheduled_reports, 20);
    }

    /// The loop shares its runtime with the rest of the process (in `skiff server`,
    /// the API server): with a long queue it must still let other tasks run between
    /// its slices, not only once the queue is empty. On a one-thread runtime this
    /// test's own task gets its turn only when the loop yields.
    #[tokio::test(flavor = "current_thread")]
    async fn run_loop_lets_other_tasks_run_while_pods_wait() {
        let c = skiff_scheduler::testing::TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("n1")
                .allocatable(&[("cpu", "1000"), ("memory", "1Ti"), ("pods", "10000")])
                .build(),
        ]);
        let pods = 5_000;
        for i in 0..pods {
            c.add_pod(PodBuilder::new(&format!("p{i}")).build());
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(c.scheduler.clone().run(async {
            let _ = rx.await;
        }));
        tokio::task::yield_now().await;
        let (waiting, _, _) = c.scheduler.with_queue(|q| q.lens());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while c.api.binds.lock().len() < pods && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = tx.send(());
        handle.await.unwrap();
        assert!(
            waiting > 0,
            "the loop took all {pods} pods off the queue before any other task ran"
        );
        assert_eq!(c.api.binds.lock().len(), pods, "every pod bound in the end");
    }
}

mod config {
    use super::*;

    const CONFIG: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"#;

    #[tokio::test]
    async fn profiles_from_a_config_file() {
        let path = std::env::temp_dir().join(format!("skiff-sched-{}.yaml", std::process::id()));
        std::fs::write(&path, CONFIG).unwrap();
        let cfg = SchedulerConfig::from_file(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let c = TestCluster::with_config(&cfg).unwrap();
        let packer = c.scheduler.profile("bin-packer").unwrap();
        assert!(
            !packer
                .score_weights()
                .iter()
                .any(|(n, _)| *n == "NodeResourcesBalancedAllocation")
        );
        let default = c.scheduler.profile("default-scheduler").unwrap();
        assert_eq!(
            default.score_weights(),
            vec![
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
            ]
        );
        for i in 0..3 {
            c.add_nodes(vec![NodeBuilder::new(&format!("n{i}")).build()]);
        }
        for i in 0..4 {
            c.add_pod(
                PodBuilder::new(&format!("packed-{i}"))
                    .scheduler_name("bin-packer")
                    .container(&[("cpu", "500m")])
                    .build(),
            );
        }
        let (placed, _) = c.schedule_all().await;
        assert_eq!(
            counts(&placed, |n| n.to_string()).len(),
            1,
            "MostAllocated packs onto one node: {placed:?}"
        );
    }

    #[test]
    fn unknown_plugins_are_rejected() {
        let cfg = SchedulerConfig::from_yaml(
            "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin\n",
        )
        .unwrap();
        assert!(TestCluster::with_config(&cfg).is_err());
    }

    #[tokio::test]
    async fn disabling_a_filter_changes_placement() {
        let cfg = SchedulerConfig::from_yaml(
            "profiles:\n- plugins:\n    filter:\n      disabled:\n      - name: TaintToleration\n",
        )
        .unwrap();
        let c = TestCluster::with_config(&cfg).unwrap();
        c.add_nodes(vec![
            NodeBuilder::new("tainted")
                .taint("k", "v", "NoSchedule")
                .build(),
        ]);
        c.add_pod(PodBuilder::new("p").build());
        let (placed, _) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
    }

    #[test]
    fn single_feasible_node_skips_scoring() {
        let c = TestCluster::new();
        c.add_nodes(vec![
            NodeBuilder::new("only").build(),
            NodeBuilder::new("cordoned").unschedulable().build(),
        ]);
        c.add_pod(PodBuilder::new("p").build());
        match c.scheduler.schedule_one() {
            Some(CycleOutcome::Bind(job)) => {
                assert_eq!(job.node, "only");
                assert_eq!(
                    (job.result.feasible_nodes, job.result.evaluated_nodes),
                    (1, 2)
                );
            }
            _ => panic!("expected a binding"),
        }
    }
}

mod metrics {
    use super::*;
    use skiff_common::metrics::{Component, exposition, gather};

    fn samples() -> Vec<exposition::Sample> {
        exposition::parse(&gather(&[Component::Scheduler])).expect("exposition text")
    }

    fn value(samples: &[exposition::Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        exposition::value(samples, name, labels).unwrap_or(0.0)
    }

    // The registry is the process's: other tests of this binary schedule
    // too, so counters are compared as at least what this test did.
    #[tokio::test]
    async fn attempts_latency_and_pending_pods_are_upstreams() {
        let c = TestCluster::new();
        skiff_scheduler::metrics::follow(&c.scheduler);
        let attempts = "scheduler_schedule_attempts_total";
        let scheduled = [("result", "scheduled"), ("profile", "default-scheduler")];
        let unschedulable = [
            ("result", "unschedulable"),
            ("profile", "default-scheduler"),
        ];
        let sli = "scheduler_pod_scheduling_sli_duration_seconds_count";
        let before = samples();

        c.add_nodes(vec![
            NodeBuilder::new("n1")
                .allocatable(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "10")])
                .build(),
        ]);
        c.add_pod(
            PodBuilder::new("fits")
                .container(&[("cpu", "500m")])
                .build(),
        );
        c.add_pod(
            PodBuilder::new("too-big")
                .container(&[("cpu", "2")])
                .build(),
        );
        c.add_pod(PodBuilder::new("gated").gate("example.com/ready").build());
        let (placed, failed) = c.schedule_all().await;
        assert_eq!(placed.len(), 1);
        assert_eq!(failed.len(), 1);

        let after = samples();
        let moved = |labels: &[(&str, &str)]| {
            value(&after, attempts, labels) - value(&before, attempts, labels)
        };
        assert!(moved(&scheduled) >= 1.0);
        assert!(moved(&unschedulable) >= 1.0);
        let first = [("attempts", "1")];
        assert!(value(&after, sli, &first) > value(&before, sli, &first));
        let pending = |queue: &str| value(&after, "scheduler_pending_pods", &[("queue", queue)]);
        assert!(pending("unschedulable") >= 1.0);
        assert!(pending("gated") >= 1.0);
    }
}
