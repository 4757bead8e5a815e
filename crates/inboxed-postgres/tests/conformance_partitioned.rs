//! The processor's dedup guarantee cases on PostgreSQL in time-partitioned mode
//! (`PgStore::partitioned`): duplicates sequential and concurrent, crashes before and after
//! the commit, poison, dead letters, all on business state. SERIALIZABLE is refused in this
//! mode (docs/retention.md), so its case is not among them; retention has its own cases in
//! partitions.rs.
inboxed_test::conformance_tests!(inboxed_test::PgParted, dedup_only);
