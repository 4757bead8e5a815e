//! The guarantee suite on MySQL or MariaDB (`INBOXED_MYSQL_URL`, default the local MariaDB):
//! the processor's cases, the store-then-process cases in lease and lock-held modes, retention
//! and observation. The worker-registry and outbox cases join it as their statements are
//! written for this engine. `batch_whose_commit_fails_isolates_the_culprit` cannot run here:
//! it makes a COMMIT fail with a deferred foreign key, and InnoDB checks every foreign key at
//! once (the handler fails instead, which other cases cover).
inboxed_test::conformance_tests!(inboxed_test::My, dedup_only);
inboxed_test::conformance_tests!(@cases inboxed_test::My;
    receipt_stores_once_and_reports_conflicts,
    batch_receipt_stores_each_key_once,
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
    sigterm_to_a_worker_process_loses_nothing,
    ordered_mode_can_skip_dead_events,
    concurrent_claims_never_share_a_row,
    process_killing_row_spares_its_batch_mates,
    dead_claims_are_redone_in_halves,
    dead_worker_rows_return_at_the_next_pass,
    a_worker_ignoring_the_group_limit_is_charged,
    observation_counts_backlog_and_dead_letters,
    batch_handler_is_all_or_nothing,
    lock_held_mode_processes_exactly_once,
    purge_deletes_only_expired_keys_in_bounded_batches,
    purge_timeouts_are_applied,
    short_retention_window_is_refused,
    processed_stats_report_age_growth_and_size,
    other_tables_have_their_own_windows,
);
