//! The guarantee suite on PostgreSQL (`DATABASE_URL`, or localhost:5432).
inboxed_test::conformance_tests!(inboxed_test::Pg);
