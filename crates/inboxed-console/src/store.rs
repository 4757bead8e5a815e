//! What the console reads and changes: one small seam, so that the console serves any engine's
//! store, and a program that picks its engine at run time (the CLI) can serve its own
//! dispatching store. Every change goes through the library's own operations, the ones the
//! CLI's commands run, each audited in the transaction of the change.

use std::future::Future;

use inboxed_core::inbox::{Inbox, InboxStore, Replayed, Selector};
use inboxed_core::metrics::DedupRate;
use inboxed_core::observe::{
    AuditRecord, DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, InboxEntry,
    LetterActParams, LettersActed, Observation, ObserveStore, RowFilter,
};
use inboxed_core::outbox::store::OutboxStore;
use inboxed_core::outbox::{DeadParams, OutboxBrowse, OutboxEntry};
use inboxed_core::retention::RetentionStore;
use inboxed_core::retention::store::ProcessedStats;
use inboxed_core::{BoxError, ConsumerName};

/// The reads and actions behind the console's views. Implemented for every store of the
/// library (through [`ObserveStore`], [`InboxStore`], [`OutboxStore`] and
/// [`RetentionStore`]).
pub trait ConsoleStore: Clone + Send + Sync + 'static {
    /// The backlog of every consumer, the dead letters kept, and the outbox's backlog.
    fn observe(&self) -> impl Future<Output = Result<Observation, BoxError>> + Send;

    /// The size, growth and age of a consumer's processed keys.
    fn processed(
        &self,
        consumer: &ConsumerName,
    ) -> impl Future<Output = Result<ProcessedStats, BoxError>> + Send;

    /// The dedup hit rate of each consumer, where something knows it; `None`: nothing does.
    /// Only the processes' counters know it (a duplicate writes nothing to the database), so
    /// the library's stores answer `None`; a store wrapped with a process's counters (as
    /// `inboxed serve --metrics-url` wraps its store with a scrape of them) answers.
    fn dedup_rates(&self) -> impl Future<Output = Result<Option<Vec<DedupRate>>, BoxError>> + Send {
        async { Ok(None) }
    }

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

    /// Retries (into the inbox) or discards dead letters, audited; or says what it would do.
    fn act_on_dead_letters(
        &self,
        params: &LetterActParams<'_>,
    ) -> impl Future<Output = Result<LettersActed, BoxError>> + Send;

    /// Store-then-process rows matching `filter`, newest first, without payloads.
    fn rows(
        &self,
        filter: &RowFilter<'_>,
    ) -> impl Future<Output = Result<Vec<InboxEntry>, BoxError>> + Send;

    /// One store-then-process row in full; `None` when there is no such id.
    fn row(&self, id: i64) -> impl Future<Output = Result<Option<InboxEntry>, BoxError>> + Send;

    /// The newest records of the audit trail, of one consumer or all.
    fn audit_trail(
        &self,
        consumer: Option<&str>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<AuditRecord>, BoxError>> + Send;

    /// Outbox rows `browse` selects, newest first, without payloads.
    fn outbox(
        &self,
        browse: &OutboxBrowse<'_>,
    ) -> impl Future<Output = Result<Vec<OutboxEntry>, BoxError>> + Send;

    /// One outbox row in full; `None` when there is no such id.
    fn outbox_row(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<Option<OutboxEntry>, BoxError>> + Send;

    /// Retries or discards dead outbox rows, audited, as `inboxed outbox retry|discard` do;
    /// or, with `apply` false, only finds them. The ids, in insert order.
    fn act_on_outbox(
        &self,
        params: &DeadParams<'_>,
    ) -> impl Future<Output = Result<Vec<i64>, BoxError>> + Send;

    /// Resets a consumer's dead rows (and done ones, with `include_done`: a re-drive) to
    /// pending, audited, as `inboxed replay` does; with `apply` false, only finds them.
    fn replay(
        &self,
        consumer: &ConsumerName,
        selector: &Selector,
        include_done: bool,
        actor: &str,
        reason: &str,
        apply: bool,
    ) -> impl Future<Output = Result<Replayed, BoxError>> + Send;
}

impl<S> ConsoleStore for S
where
    S: ObserveStore + InboxStore + OutboxStore + RetentionStore + Clone + Send + Sync + 'static,
{
    async fn processed(&self, consumer: &ConsumerName) -> Result<ProcessedStats, BoxError> {
        Ok(self.processed_stats(consumer).await?)
    }

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

    async fn act_on_dead_letters(
        &self,
        params: &LetterActParams<'_>,
    ) -> Result<LettersActed, BoxError> {
        Ok(ObserveStore::act_on_dead_letters(self, params).await?)
    }

    async fn rows(&self, filter: &RowFilter<'_>) -> Result<Vec<InboxEntry>, BoxError> {
        Ok(self.list_rows(filter).await?)
    }

    async fn row(&self, id: i64) -> Result<Option<InboxEntry>, BoxError> {
        Ok(self.row_by_id(id).await?)
    }

    async fn audit_trail(
        &self,
        consumer: Option<&str>,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, BoxError> {
        Ok(ObserveStore::audit_trail(self, consumer, limit).await?)
    }

    async fn outbox(&self, browse: &OutboxBrowse<'_>) -> Result<Vec<OutboxEntry>, BoxError> {
        Ok(self.browse_outbox(browse).await?)
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxEntry>, BoxError> {
        Ok(self.load_outbox(Some(id), None).await?)
    }

    async fn act_on_outbox(&self, params: &DeadParams<'_>) -> Result<Vec<i64>, BoxError> {
        Ok(self.act_on_dead(params).await?)
    }

    async fn replay(
        &self,
        consumer: &ConsumerName,
        selector: &Selector,
        include_done: bool,
        actor: &str,
        reason: &str,
        apply: bool,
    ) -> Result<Replayed, BoxError> {
        let inbox = Inbox::new(self.clone(), consumer.clone());
        Ok(if apply {
            inbox.replay(selector, include_done, actor, reason).await?
        } else {
            inbox.replay_preview(selector, include_done).await?
        })
    }
}
