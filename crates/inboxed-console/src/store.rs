//! What the console reads: one small seam, so that the console serves any engine's store, and
//! a program that picks its engine at run time (the CLI) can serve its own dispatching store.

use std::future::Future;

use inboxed_core::BoxError;
use inboxed_core::observe::{
    DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, Observation, ObserveStore,
};

/// The reads behind the console's views. Implemented for every store of the library (through
/// [`ObserveStore`]); the same queries as `inboxed stats` and `inboxed dead-letters`.
pub trait ConsoleStore: Clone + Send + Sync + 'static {
    /// The backlog of every consumer, the dead letters kept, and the outbox's backlog.
    fn observe(&self) -> impl Future<Output = Result<Observation, BoxError>> + Send;

    /// Dead letters matching `filter`, newest failure first, without payloads.
    fn dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> impl Future<Output = Result<Vec<DeadLetterSummary>, BoxError>> + Send;

    /// One dead letter in full; `None` when there is no such id.
    fn dead_letter(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<Option<DeadLetterRecord>, BoxError>> + Send;
}

impl<S: ObserveStore + Clone + Send + Sync + 'static> ConsoleStore for S {
    async fn observe(&self) -> Result<Observation, BoxError> {
        Ok(ObserveStore::observe(self).await?)
    }

    async fn dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> Result<Vec<DeadLetterSummary>, BoxError> {
        Ok(self.list_dead_letters(filter).await?)
    }

    async fn dead_letter(&self, id: i64) -> Result<Option<DeadLetterRecord>, BoxError> {
        Ok(self.dead_letter_by_id(id).await?)
    }
}
