//! The guarantee suite on PostgreSQL through diesel-async (`inboxed_postgres::diesel_pg`): the
//! same cases as on sqlx, the test kit's included, on the same tables, through diesel's
//! statements and transaction manager.
inboxed_test::conformance_tests!(inboxed_test::DieselPg);
