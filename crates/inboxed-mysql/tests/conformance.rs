//! The processor's guarantee suite on MySQL or MariaDB (`INBOXED_MYSQL_URL`, default the local
//! MariaDB). The store-then-process, retention and outbox cases join it as their statements
//! are written for this engine.
inboxed_test::conformance_tests!(inboxed_test::My, dedup_only);
