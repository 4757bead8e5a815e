//! The guarantee suite on PostgreSQL through SeaORM 2 (`inboxed_postgres::sea_orm_pg`): the
//! same cases as on sqlx, the test kit's included, on the same tables, through SeaORM's
//! statements and transactions.
inboxed_test::conformance_tests!(inboxed_test::SeaOrmPg);
