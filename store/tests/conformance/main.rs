//! The `Store` trait's conformance suite: the same backend-neutral checks,
//! each run against the embedded sled store and against a real etcd the
//! test starts itself (`/usr/bin/etcd`; a missing binary fails the etcd
//! half, it is never skipped). Checks that only make sense for one backend
//! live with it: `tests/sled_store/` (crash, group commit, defragmentation,
//! disk space) and `etcd_only.rs` (several servers on one cluster, TLS,
//! unreachable endpoints, etcd's NOSPACE alarm).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod api;
mod backend;
mod compaction;
mod etcd_only;
mod snapshot;
#[path = "../shared/tmpfs.rs"]
mod tmpfs;
mod watch;

/// Runs each named check once per backend, as `sled::<name>` and
/// `etcd::<name>`.
macro_rules! conformance {
    ($($module:ident :: $check:ident),* $(,)?) => {
        mod sled {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let fixture = crate::backend::sled();
                    crate::$module::$check(fixture.store.clone()).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let fixture = crate::backend::etcd().await;
                    crate::$module::$check(fixture.store.clone()).await;
                }
            )*
        }
    };
}

conformance! {
    api::a_new_store_is_at_revision_one_and_each_write_takes_the_next,
    api::create_refuses_an_existing_key_and_failed_writes_take_no_revision,
    api::update_and_delete_of_a_missing_key_are_not_found,
    api::compare_and_swap_refuses_a_stale_mod_revision,
    api::a_recreated_key_starts_a_new_incarnation,
    api::mod_revision_follows_writes_as_get_reports_them,
    api::list_pages_through_a_prefix_in_key_order,
    api::more_is_false_when_only_deleted_keys_remain,
    api::a_list_at_a_past_revision_shows_the_keys_as_they_were,
    api::concurrent_writers_get_distinct_increasing_revisions_that_watch_confirms,
    api::contended_compare_and_swap_loses_no_update,
    api::writes_after_close_fail_with_closed,
    watch::events_carry_kind_revision_and_previous_value,
    watch::a_watch_sees_only_its_prefix_and_replays_history_after_from_revision,
    watch::watches_started_while_writes_race_see_no_gap_and_no_duplicate,
    watch::a_future_from_revision_waits_for_that_revision,
    watch::watch_streams_end_when_the_store_closes,
    compaction::compaction_keeps_latest_values_and_fails_old_watches,
    compaction::compacting_the_future_clamps_and_compacting_the_past_is_a_no_op,
    compaction::compaction_runs_alongside_writes,
    compaction::a_watch_behind_a_compaction_skips_nothing_silently,
    compaction::defragmenting_after_compaction_keeps_every_live_value,
    snapshot::a_snapshot_is_one_revision_while_writes_go_on,
    snapshot::a_restored_store_goes_on_from_the_snapshot,
}
