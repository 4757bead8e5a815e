//! The guarantee suite on PostgreSQL through tokio-postgres (`inboxed_postgres::tokio_pg`):
//! the same cases as on sqlx, the test kit's included, on the same tables, through the other
//! driver's statements and transactions.
inboxed_test::conformance_tests!(inboxed_test::TokioPg);
