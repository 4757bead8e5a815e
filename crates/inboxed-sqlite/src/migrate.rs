//! The migration runner: templated migrations applied under `BEGIN IMMEDIATE`, which holds
//! SQLite's single write lock and so serialises concurrent migrators.

use sqlx::{AssertSqlSafe, SqlitePool};

use inboxed_core::migration;
use inboxed_core::{Namespace, StoreError};

use crate::queries::MIGRATIONS;

/// Applies the missing migrations in one transaction. Returns the versions applied now.
pub(crate) async fn run(pool: &SqlitePool, ns: &Namespace) -> Result<Vec<i64>, StoreError> {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(StoreError::from_sqlx)?;
    let table = ns.render(r#"{{schema}}."{{prefix}}migrations""#);
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY, description TEXT NOT NULL, \
         checksum BLOB NOT NULL, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT"
    )))
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from_sqlx)?;
    let applied: Vec<(i64, Vec<u8>)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT version, checksum FROM {table} ORDER BY version"
    )))
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
            "INSERT INTO {table} (version, description, checksum) VALUES (?1, ?2, ?3)"
        )))
        .bind(m.version)
        .bind(m.description)
        .bind(m.checksum())
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
pub(crate) async fn pending(pool: &SqlitePool, ns: &Namespace) -> Result<Vec<i64>, StoreError> {
    let master = ns.render("{{schema}}.sqlite_master");
    let exists: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM {master} WHERE type = 'table' AND name = ?1"
    )))
    .bind(format!("{}migrations", ns.prefix()))
    .fetch_one(pool)
    .await
    .map_err(StoreError::from_sqlx)?;
    let applied: Vec<(i64, Vec<u8>)> = if exists > 0 {
        let table = ns.render(r#"{{schema}}."{{prefix}}migrations""#);
        sqlx::query_as(AssertSqlSafe(format!(
            "SELECT version, checksum FROM {table} ORDER BY version"
        )))
        .fetch_all(pool)
        .await
        .map_err(StoreError::from_sqlx)?
    } else {
        Vec::new()
    };
    migration::pending_versions(MIGRATIONS, &applied)
}
