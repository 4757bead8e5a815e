//! A small runner over templated migrations: `sqlx::migrate!` embeds fixed SQL, and the
//! schema and prefix here are chosen at run time.

use sqlx::{AssertSqlSafe, PgPool};

use inboxed_core::migration;
use inboxed_core::{Namespace, StoreError};

use crate::queries::MIGRATIONS;

/// Statements here are unnamed (`persistent(false)`): they run once per deploy, and may run
/// through a transaction-pooling proxy that does not track prepared statements.
///
/// Applies the missing migrations in one transaction, serialised across processes by a
/// transaction-scoped advisory lock. Returns the versions applied now.
pub(crate) async fn run(pool: &PgPool, ns: &Namespace) -> Result<Vec<i64>, StoreError> {
    let mut tx = pool.begin().await.map_err(StoreError::from_sqlx)?;
    let lock_key = format!("inboxed:migrate:{}:{}", ns.schema(), ns.prefix());
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(&lock_key)
        .persistent(false)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
    let schema_exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(ns.schema())
            .persistent(false)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
    if !schema_exists {
        sqlx::raw_sql(AssertSqlSafe(
            ns.render("CREATE SCHEMA IF NOT EXISTS {{schema}}"),
        ))
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
    }
    let table = ns.render(r#"{{schema}}."{{prefix}}migrations""#);
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version bigint PRIMARY KEY, description text NOT NULL, \
         checksum bytea NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )))
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from_sqlx)?;
    let applied: Vec<(i64, Vec<u8>)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT version, checksum FROM {table} ORDER BY version"
    )))
    .persistent(false)
    .fetch_all(&mut *tx)
    .await
    .map_err(StoreError::from_sqlx)?;
    let mut now = Vec::new();
    for m in migration::pending(MIGRATIONS, &applied)? {
        sqlx::raw_sql(AssertSqlSafe(ns.render(m.sql)))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {table} (version, description, checksum) VALUES ($1, $2, $3)"
        )))
        .bind(m.version)
        .bind(m.description)
        .bind(m.checksum())
        .persistent(false)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        now.push(m.version);
    }
    tx.commit().await.map_err(StoreError::from_sqlx)?;
    Ok(now)
}

/// The versions not applied yet, without applying anything (a health check's question). All of
/// them when the migrations table does not exist.
pub(crate) async fn pending(pool: &PgPool, ns: &Namespace) -> Result<Vec<i64>, StoreError> {
    let table = ns.render(r#"{{schema}}."{{prefix}}migrations""#);
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(&table)
        .persistent(false)
        .fetch_one(pool)
        .await
        .map_err(StoreError::from_sqlx)?;
    let applied: Vec<(i64, Vec<u8>)> = if exists {
        sqlx::query_as(AssertSqlSafe(format!(
            "SELECT version, checksum FROM {table} ORDER BY version"
        )))
        .persistent(false)
        .fetch_all(pool)
        .await
        .map_err(StoreError::from_sqlx)?
    } else {
        Vec::new()
    };
    migration::pending_versions(MIGRATIONS, &applied)
}
