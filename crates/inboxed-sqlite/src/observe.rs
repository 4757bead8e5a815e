//! [`ObserveStore`] for SQLite: the backlog and dead letters behind `inboxed serve`.

use inboxed_core::StoreError;
use inboxed_core::engine::observe as glue;
use inboxed_core::observe::{
    DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, Observation, ObserveStore,
};

use crate::SqliteStore;

impl ObserveStore for SqliteStore {
    async fn observe(&self) -> Result<Observation, StoreError> {
        glue::observe(self).await
    }

    async fn pending_migrations(&self) -> Result<Vec<i64>, StoreError> {
        inboxed_core::engine::migrate::pending(self, &self.ns, crate::queries::MIGRATIONS).await
    }

    async fn list_dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> Result<Vec<DeadLetterSummary>, StoreError> {
        glue::list_dead_letters(self, filter).await
    }

    async fn dead_letter_by_id(&self, id: i64) -> Result<Option<DeadLetterRecord>, StoreError> {
        glue::dead_letter_by_id(self, id).await
    }

    async fn delete_dead_letter_by_id(&self, id: i64) -> Result<bool, StoreError> {
        glue::delete_dead_letter_by_id(self, id).await
    }
}
