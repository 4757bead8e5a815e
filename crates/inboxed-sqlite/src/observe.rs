//! [`ObserveStore`] for SQLite: the backlog and dead letters behind `inboxed serve`.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use inboxed_core::StoreError;
use inboxed_core::observe::{Backlog, DeadLetterCount, Observation, ObserveStore};

use crate::SqliteStore;

impl ObserveStore for SqliteStore {
    async fn observe(&self) -> Result<Observation, StoreError> {
        let backlog = self
            .query(&self.queries.observe_inbox)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        let letters = self
            .query(&self.queries.observe_dead_letters)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(Observation::new(
            backlog.iter().map(backlog_row).collect::<Result<_, _>>()?,
            letters.iter().map(letters_row).collect::<Result<_, _>>()?,
        ))
    }

    async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        crate::migrate::pending(&self.pool, &self.ns).await
    }
}

fn backlog_row(row: &SqliteRow) -> Result<Backlog, StoreError> {
    let get = |c: &str| row.try_get::<i64, _>(c).map_err(StoreError::from_sqlx);
    Ok(Backlog::from_columns(
        row.try_get("consumer_name")
            .map_err(StoreError::from_sqlx)?,
        [
            get("pending")?,
            get("processing")?,
            get("dead")?,
            get("expired_leases")?,
        ],
        row.try_get("oldest_pending_ms")
            .map_err(StoreError::from_sqlx)?,
    ))
}

fn letters_row(row: &SqliteRow) -> Result<DeadLetterCount, StoreError> {
    let get = StoreError::from_sqlx;
    Ok(DeadLetterCount::from_columns(
        row.try_get("consumer_name").map_err(get)?,
        row.try_get("reason").map_err(get)?,
        row.try_get("count").map_err(get)?,
        row.try_get("newest_ms").map_err(get)?,
    ))
}
