//! A PostgreSQL database of its own for one test of the billing service, with its tables and
//! two accounts of 10,000 cents; shared by the handler's kit tests and the process-level
//! storm (`tests/chaos.rs`).

use inboxed::postgres::PgStore;
use sqlx::{Connection, Executor, PgConnection};

/// A database of its own (on `DATABASE_URL`'s server, default the local one), with the
/// service's tables; dropped by [`finish`]. Returns its store and its URL.
pub async fn database() -> (PgStore, String) {
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432/postgres".to_owned());
    let name = format!("billing_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&server).await.expect("PostgreSQL");
    admin
        .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create the test database");
    let (base, _) = server.rsplit_once('/').expect("a URL with a database");
    let url = format!("{base}/{name}");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(&url)
        .await
        .expect("the test database");
    pool.execute(include_str!("schema.sql"))
        .await
        .expect("the service's tables");
    pool.execute("INSERT INTO accounts VALUES ('alice', 10000), ('bob', 10000)")
        .await
        .expect("the accounts");
    (PgStore::new(pool), url)
}

/// Drops the test's database.
pub async fn finish(store: PgStore) {
    let name = sqlx::query_scalar::<_, String>("SELECT current_database()")
        .fetch_one(store.pool())
        .await
        .expect("the database's name");
    store.pool().close().await;
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432/postgres".to_owned());
    let mut admin = PgConnection::connect(&server).await.expect("PostgreSQL");
    admin
        .execute(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE {name} WITH (FORCE)"
        )))
        .await
        .expect("drop the test database");
}
