//! The guarantee suite on MySQL or MariaDB (`INBOXED_MYSQL_URL`, default the local MariaDB):
//! every part (the outbox's relay lock-held and under a lease), and `serializable_conflicts_are_retried` and
//! `custom_namespace_keeps_tables_apart` as on the other engines. Left out: `non_durable_commit_setting_is_refused` (MySQL's
//! durability settings are global; the refusal is tested on `inboxed_mysql::judge`) and
//! `batch_whose_commit_fails_isolates_the_culprit` (it makes a COMMIT fail with a deferred
//! foreign key, and InnoDB checks every foreign key at once: the handler fails instead, which
//! other cases cover).
inboxed_test::conformance_tests!(@dedup inboxed_test::My);
inboxed_test::conformance_tests!(@inbox inboxed_test::My);
inboxed_test::conformance_tests!(@retention inboxed_test::My);
inboxed_test::conformance_tests!(@outbox inboxed_test::My);
inboxed_test::conformance_tests!(@testkit inboxed_test::My);
inboxed_test::conformance_tests!(@cases inboxed_test::My;
    serializable_conflicts_are_retried,
    custom_namespace_keeps_tables_apart,
);

/// The processor's guarantee cases on the time-partitioned table (`MySqlStore::partitioned`).
mod partitioned {
    inboxed_test::conformance_tests!(inboxed_test::MyParted, dedup_only);
}
