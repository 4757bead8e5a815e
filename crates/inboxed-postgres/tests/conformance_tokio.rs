//! The guarantee suite on PostgreSQL through tokio-postgres (`inboxed_postgres::tokio_pg`):
//! the same cases as on sqlx, on the same tables, through the other driver's statements and
//! transactions. The test kit's own cases are sqlx's alone for now.
inboxed_test::conformance_tests!(inboxed_test::TokioPg, without_testkit);
