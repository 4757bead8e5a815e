//! [`ObserveStore`] for SQLite: the backlog and dead letters behind `inboxed serve`.

use inboxed_core::StoreError;
use inboxed_core::inbox::store::millis;
use inboxed_core::observe::{
    DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, Observation, ObserveStore, rows,
};

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
            backlog
                .iter()
                .map(rows::backlog)
                .collect::<Result<_, _>>()?,
            letters
                .iter()
                .map(rows::letter_count)
                .collect::<Result<_, _>>()?,
        ))
    }

    async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        crate::migrate::pending(&self.pool, &self.ns).await
    }

    async fn list_dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> Result<Vec<DeadLetterSummary>, StoreError> {
        let rows = self
            .query(&self.queries.list_dead_letters)
            .bind(filter.consumer.map(str::to_owned))
            .bind(filter.reason.map(str::to_owned))
            .bind(filter.since.map(millis))
            .bind(filter.error_contains.map(str::to_owned))
            .bind(i64::from(filter.limit.max(1)))
            .bind(filter.message_type.map(str::to_owned))
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        rows.iter().map(rows::summary).collect()
    }

    async fn dead_letter_by_id(&self, id: i64) -> Result<Option<DeadLetterRecord>, StoreError> {
        let row = self
            .query(&self.queries.load_dead_letter_by_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        row.as_ref().map(rows::record).transpose()
    }

    async fn delete_dead_letter_by_id(&self, id: i64) -> Result<bool, StoreError> {
        let gone = self
            .query(&self.queries.delete_dead_letter_by_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(gone.is_some())
    }
}
