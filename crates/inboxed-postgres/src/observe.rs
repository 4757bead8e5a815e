//! [`ObserveStore`] for PostgreSQL: the backlog and dead letters behind `inboxed serve`.

use sqlx::Row;
use sqlx::postgres::PgRow;

use inboxed_core::StoreError;
use inboxed_core::inbox::store::millis;
use inboxed_core::observe::{
    Backlog, DeadLetterCount, DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, Observation,
    ObserveStore, from_millis,
};

use crate::PgStore;

impl ObserveStore for PgStore {
    async fn observe(&self) -> Result<Observation, StoreError> {
        let backlog = self
            .autocommit(self.query(&self.queries.observe_inbox))
            .await?;
        let letters = self
            .autocommit(self.query(&self.queries.observe_dead_letters))
            .await?;
        Ok(Observation::new(
            backlog.iter().map(backlog_row).collect::<Result<_, _>>()?,
            letters.iter().map(letters_row).collect::<Result<_, _>>()?,
        ))
    }

    async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        crate::migrate::pending(&self.pool, &self.ns).await
    }

    async fn list_dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> Result<Vec<DeadLetterSummary>, StoreError> {
        let query = self
            .query(&self.queries.list_dead_letters)
            .bind(filter.consumer.map(str::to_owned))
            .bind(filter.reason.map(str::to_owned))
            .bind(filter.since.map(millis))
            .bind(filter.error_contains.map(str::to_owned))
            .bind(i64::from(filter.limit.max(1)));
        let rows = self.autocommit(query).await?;
        rows.iter().map(summary_row).collect()
    }

    async fn dead_letter_by_id(&self, id: i64) -> Result<Option<DeadLetterRecord>, StoreError> {
        let query = self.query(&self.queries.load_dead_letter_by_id).bind(id);
        let rows = self.autocommit(query).await?;
        rows.first().map(record_row).transpose()
    }

    async fn delete_dead_letter_by_id(&self, id: i64) -> Result<bool, StoreError> {
        let query = self.query(&self.queries.delete_dead_letter_by_id).bind(id);
        Ok(!self.autocommit(query).await?.is_empty())
    }
}

fn backlog_row(row: &PgRow) -> Result<Backlog, StoreError> {
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

fn letters_row(row: &PgRow) -> Result<DeadLetterCount, StoreError> {
    let get = StoreError::from_sqlx;
    Ok(DeadLetterCount::from_columns(
        row.try_get("consumer_name").map_err(get)?,
        row.try_get("reason").map_err(get)?,
        row.try_get("count").map_err(get)?,
        row.try_get("newest_ms").map_err(get)?,
    ))
}

fn summary_row(row: &PgRow) -> Result<DeadLetterSummary, StoreError> {
    let get = StoreError::from_sqlx;
    let bytes: i64 = row.try_get("payload_bytes").map_err(get)?;
    Ok(DeadLetterSummary {
        id: row.try_get("id").map_err(get)?,
        consumer: row.try_get("consumer_name").map_err(get)?,
        message_id: row.try_get("message_id").map_err(get)?,
        message_type: row.try_get("message_type").map_err(get)?,
        reason: row.try_get("reason").map_err(get)?,
        attempts: row.try_get::<i64, _>("attempts").map_err(get)?,
        last_failed: from_millis(row.try_get("last_failed_ms").map_err(get)?),
        payload_bytes: u64::try_from(bytes).unwrap_or(0),
        error: row.try_get("error").map_err(get)?,
    })
}

fn record_row(row: &PgRow) -> Result<DeadLetterRecord, StoreError> {
    let get = StoreError::from_sqlx;
    Ok(DeadLetterRecord {
        id: row.try_get("id").map_err(get)?,
        consumer: row.try_get("consumer_name").map_err(get)?,
        message_id: row.try_get("message_id").map_err(get)?,
        message_type: row.try_get("message_type").map_err(get)?,
        correlation_id: row.try_get("correlation_id").map_err(get)?,
        payload: row.try_get("payload").map_err(get)?,
        reason: row.try_get("reason").map_err(get)?,
        error: row.try_get("error").map_err(get)?,
        attempts: row.try_get::<i64, _>("attempts").map_err(get)?,
        first_failed: from_millis(row.try_get("first_failed_ms").map_err(get)?),
        last_failed: from_millis(row.try_get("last_failed_ms").map_err(get)?),
    })
}
