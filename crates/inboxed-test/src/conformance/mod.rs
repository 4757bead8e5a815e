//! The guarantee suite: one function per case, generic over the engine, each asserting on
//! business state (rows in `ledger`, balances in `accounts`), instantiated per backend by
//! [`conformance_tests!`](crate::conformance_tests).

mod batch;
mod consumer;
mod crash;
mod dead_race;
mod duplicates;
mod failures;
mod inbox;
mod input;
mod outbox;
mod outbox_batch;
mod outbox_crash;
mod outbox_delete;
mod outbox_operate;
mod rate_limit;
mod redrive;
mod retention;
mod stress;
mod switches;
mod testkit;

pub use batch::{
    a_mixed_batch_counts_attempts_as_one_at_a_time, batch_processes_each_key_once,
    concurrent_batches_commit_each_key_once, first_deliveries_skip_the_store_count,
    poison_in_a_batch_spares_its_batch_mates, redrive_in_a_batch_lifts_its_dead_letter,
};
pub use consumer::{
    a_failed_ack_names_the_message_and_its_cause, consumer_acks_only_after_commit,
    consumer_in_batches_acks_only_after_commit, consumer_in_ordered_batches_keeps_the_order,
    long_handler_extends_the_delivery_deadline,
};
pub use crash::{
    crash_before_commit_redoes_the_work, crash_between_commit_and_ack_does_not_reapply,
    poison_that_kills_a_batch_is_dead_lettered, poison_that_kills_the_process_is_dead_lettered,
};
pub use dead_race::{
    deliveries_that_wait_out_a_claim_are_not_attempts,
    exhausted_redelivery_waits_for_a_batch_in_flight,
    exhausted_redelivery_waits_for_the_claim_in_flight,
};
pub use duplicates::{
    concurrent_duplicate_proceeds_after_first_rolls_back,
    concurrent_duplicates_commit_exactly_once, hung_claimant_does_not_block_its_duplicate,
    sequential_duplicate_applies_effect_once,
};
pub use failures::{
    dead_letter_retry_and_discard, handler_rollback_leaves_no_partial_state,
    non_durable_commit_setting_is_refused, payload_conflict_is_reported,
    permanent_failure_is_dead_lettered_not_processed, serializable_conflicts_are_retried,
    swallowed_statement_error_is_not_acked, transient_failure_is_retried_then_dead_lettered,
};
pub use inbox::{
    a_row_asked_to_retry_later_keeps_its_attempts, a_worker_ignoring_the_group_limit_is_charged,
    batch_handler_is_all_or_nothing, batch_receipt_stores_each_key_once,
    batch_whose_commit_fails_isolates_the_culprit, claim_batch_skips_rows_locked_by_another_worker,
    complete_after_reclaim_is_fenced, concurrent_claims_never_share_a_row,
    dead_claims_are_redone_in_halves, dead_letters_are_retried_into_the_inbox_and_discarded,
    dead_worker_rows_return_at_the_next_pass, graceful_shutdown_loses_nothing,
    killed_worker_process_loses_nothing, lock_held_mode_processes_exactly_once,
    observation_counts_backlog_and_dead_letters, ordered_mode_can_skip_dead_events,
    ordered_mode_keeps_order_and_parks_dead_aggregates, poison_rows_go_dead_after_max_attempts,
    process_killing_row_spares_its_batch_mates, purge_removes_only_old_done_rows,
    reaper_returns_expired_claims, receipt_stores_once_and_reports_conflicts,
    replay_and_audited_redrive, rows_and_the_audit_trail_are_listed,
    sigterm_to_a_worker_process_loses_nothing, stored_rows_keep_their_headers,
    stored_rows_wake_idle_workers, workers_process_each_row_exactly_once,
};
pub use input::{
    custom_namespace_keeps_tables_apart, invalid_input_is_rejected_and_nothing_is_written,
};
pub use outbox::{
    handler_outbox_messages_land_once_per_inbound_message,
    outbox_claims_follow_key_order_and_marks_are_fenced, outbox_failures_park_only_their_key,
    outbox_purge_deletes_only_old_sent_rows,
    outbox_writes_commit_and_roll_back_with_the_business_change,
};
pub use outbox_batch::{
    outbox_write_many_keeps_order_and_commits_with_the_transaction,
    worker_batches_announce_each_message_once,
};
pub use outbox_crash::{
    a_reap_beside_a_live_lock_held_batch_judges_nothing,
    a_row_that_kills_its_relay_is_cornered_alone, rows_past_a_batch_limit_are_left_to_other_relays,
};
pub use outbox_delete::outbox_delete_sent_is_fenced_and_frees_the_key;
pub use outbox_operate::{
    outbox_operator_lists_retries_and_discards_dead_rows,
    outbox_rows_are_searched_newest_first_within_a_window,
};
pub use rate_limit::{
    consumer_rate_limits_defer_by_bucket_and_pace_overall,
    worker_rate_limits_defer_by_bucket_and_cap_claims,
};
pub use redrive::redrive_lifts_the_dead_letter_once;
pub use retention::{
    other_tables_have_their_own_windows, processed_stats_report_age_growth_and_size,
    purge_deletes_only_expired_keys_in_bounded_batches, purge_timeouts_are_applied,
    short_retention_window_is_refused,
};
pub use stress::concurrent_stress_ledger_is_exact;
pub use switches::an_open_kill_switch_is_recorded_until_it_closes;
pub use testkit::{
    testkit_catches_a_batch_override_on_a_second_connection,
    testkit_catches_a_handler_that_commits_itself,
    testkit_catches_a_handler_that_counts_deliveries, testkit_catches_a_lost_update,
    testkit_catches_a_write_on_a_second_connection, testkit_passes_a_correct_handler,
};

use inboxed_core::{ConsumerName, Processor, ProcessorConfig};

use crate::backend::{Backend, TestDb};
use crate::handler::Ledger;

/// The consumer name most cases use.
pub(crate) fn ledger() -> ConsumerName {
    ConsumerName::new("ledger").expect("valid name")
}

/// A processor for consumer `ledger` over the test database, and its handler.
pub(crate) fn processor<B: Backend>(
    db: &TestDb<B>,
    config: ProcessorConfig,
) -> (Processor<B::Store, Ledger<B>>, Ledger<B>) {
    let handler = Ledger::<B>::default();
    (
        Processor::with_config(db.store.clone(), ledger(), handler.clone(), config),
        handler,
    )
}

/// Rows and money in the ledger: `(rows, sum of amounts)`.
/// Rows and total amount of the test ledger.
pub async fn ledger_state<B: Backend>(db: &TestDb<B>) -> (i64, i64) {
    (
        db.scalar("SELECT count(*) FROM ledger").await,
        db.scalar("SELECT CAST(coalesce(sum(amount), 0) AS BIGINT) FROM ledger")
            .await,
    )
}

/// Instantiates every conformance case as a `#[tokio::test]` for one backend
/// (`inboxed_test::Pg` or `inboxed_test::Lite`).
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ty) => {
        $crate::conformance_tests!(@dedup $backend);
        $crate::conformance_tests!(@inbox $backend);
        $crate::conformance_tests!(@retention $backend);
        $crate::conformance_tests!(@outbox $backend);
        $crate::conformance_tests!(@testkit $backend);
        $crate::conformance_tests!(@cases $backend;
            serializable_conflicts_are_retried,
            custom_namespace_keeps_tables_apart,
            non_durable_commit_setting_is_refused,
            batch_whose_commit_fails_isolates_the_culprit,
        );
    };
    (@inbox $backend:ty) => {
        $crate::conformance_tests!(@cases $backend;
            receipt_stores_once_and_reports_conflicts,
            batch_receipt_stores_each_key_once,
            stored_rows_keep_their_headers,
            replay_and_audited_redrive,
            purge_removes_only_old_done_rows,
            complete_after_reclaim_is_fenced,
            reaper_returns_expired_claims,
            claim_batch_skips_rows_locked_by_another_worker,
            workers_process_each_row_exactly_once,
            poison_rows_go_dead_after_max_attempts,
            ordered_mode_keeps_order_and_parks_dead_aggregates,
            graceful_shutdown_loses_nothing,
            killed_worker_process_loses_nothing,
            stored_rows_wake_idle_workers,
            batch_handler_is_all_or_nothing,
            sigterm_to_a_worker_process_loses_nothing,
            lock_held_mode_processes_exactly_once,
            ordered_mode_can_skip_dead_events,
            concurrent_claims_never_share_a_row,
            process_killing_row_spares_its_batch_mates,
            observation_counts_backlog_and_dead_letters,
            dead_claims_are_redone_in_halves,
            dead_worker_rows_return_at_the_next_pass,
            a_worker_ignoring_the_group_limit_is_charged,
            dead_letters_are_retried_into_the_inbox_and_discarded,
            rows_and_the_audit_trail_are_listed,
            worker_rate_limits_defer_by_bucket_and_cap_claims,
            a_row_asked_to_retry_later_keeps_its_attempts,
        );
    };
    // The test kit's own cases (crate inboxed-testkit): it passes a correct handler and
    // catches each known-bad one.
    (@testkit $backend:ty) => {
        $crate::conformance_tests!(@cases $backend;
            testkit_passes_a_correct_handler,
            testkit_catches_a_write_on_a_second_connection,
            testkit_catches_a_handler_that_commits_itself,
            testkit_catches_a_handler_that_counts_deliveries,
            testkit_catches_a_lost_update,
            testkit_catches_a_batch_override_on_a_second_connection,
        );
    };
    (@retention $backend:ty) => {
        $crate::conformance_tests!(@cases $backend;
            purge_deletes_only_expired_keys_in_bounded_batches,
            purge_timeouts_are_applied,
            short_retention_window_is_refused,
            processed_stats_report_age_growth_and_size,
            other_tables_have_their_own_windows,
        );
    };
    (@outbox $backend:ty) => {
        $crate::conformance_tests!(@cases $backend;
            outbox_writes_commit_and_roll_back_with_the_business_change,
            handler_outbox_messages_land_once_per_inbound_message,
            outbox_claims_follow_key_order_and_marks_are_fenced,
            outbox_failures_park_only_their_key,
            outbox_purge_deletes_only_old_sent_rows,
            outbox_operator_lists_retries_and_discards_dead_rows,
            outbox_rows_are_searched_newest_first_within_a_window,
            outbox_write_many_keeps_order_and_commits_with_the_transaction,
            worker_batches_announce_each_message_once,
            outbox_delete_sent_is_fenced_and_frees_the_key,
            a_row_that_kills_its_relay_is_cornered_alone,
            a_reap_beside_a_live_lock_held_batch_judges_nothing,
            rows_past_a_batch_limit_are_left_to_other_relays,
        );
    };
    // The processor's dedup guarantee alone, for a store variant that changes only how keys
    // are recorded (the time-partitioned table).
    ($backend:ty, dedup_only) => {
        $crate::conformance_tests!(@dedup $backend);
    };
    (@dedup $backend:ty) => {
        $crate::conformance_tests!(@cases $backend;
            sequential_duplicate_applies_effect_once,
            concurrent_duplicates_commit_exactly_once,
            concurrent_duplicate_proceeds_after_first_rolls_back,
            hung_claimant_does_not_block_its_duplicate,
            exhausted_redelivery_waits_for_the_claim_in_flight,
            exhausted_redelivery_waits_for_a_batch_in_flight,
            deliveries_that_wait_out_a_claim_are_not_attempts,
            crash_between_commit_and_ack_does_not_reapply,
            crash_before_commit_redoes_the_work,
            payload_conflict_is_reported,
            permanent_failure_is_dead_lettered_not_processed,
            transient_failure_is_retried_then_dead_lettered,
            handler_rollback_leaves_no_partial_state,
            swallowed_statement_error_is_not_acked,
            dead_letter_retry_and_discard,
            redrive_lifts_the_dead_letter_once,
            batch_processes_each_key_once,
            poison_in_a_batch_spares_its_batch_mates,
            first_deliveries_skip_the_store_count,
            a_mixed_batch_counts_attempts_as_one_at_a_time,
            concurrent_batches_commit_each_key_once,
            redrive_in_a_batch_lifts_its_dead_letter,
            invalid_input_is_rejected_and_nothing_is_written,
            concurrent_stress_ledger_is_exact,
            consumer_acks_only_after_commit,
            consumer_in_batches_acks_only_after_commit,
            consumer_in_ordered_batches_keeps_the_order,
            consumer_rate_limits_defer_by_bucket_and_pace_overall,
            an_open_kill_switch_is_recorded_until_it_closes,
            long_handler_extends_the_delivery_deadline,
            a_failed_ack_names_the_message_and_its_cause,
            poison_that_kills_the_process_is_dead_lettered,
            poison_that_kills_a_batch_is_dead_lettered,
        );
    };
    (@cases $backend:ty; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                // The libtest name of this test, which crash cases re-run as a child process.
                let name = $crate::test_name!(stringify!($case));
                $crate::conformance::$case::<$backend>(&name).await;
            }
        )*
    };
}
