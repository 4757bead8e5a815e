//! The store traits whose every method the non-sqlx drivers' stores (tokio-postgres,
//! diesel-async, SeaORM) answer the same way (`Store` but for tokio-postgres's pipelined
//! pair), from PostgreSQL's own operations ([`crate::common`]) and the shared layer: written
//! once here and stamped for each store, since a trait of another crate cannot be implemented
//! for every [`PgEngine`] at once.
//!
//! [`PgEngine`]: crate::common::PgEngine

/// `InboxStore`, `OutboxStore`, `ObserveStore` and `RetentionStore` for `$store`, a
/// [`PgEngine`](crate::common::PgEngine) with a `wakers` field.
macro_rules! driver_store {
    ($store:ty) => {
        /// The backlog and dead letters behind `inboxed serve`, as the shared layer reads
        /// them.
        impl inboxed_core::observe::ObserveStore for $store {}

        /// Retention as the shared layer has it: keys in one table (time partitions are
        /// [`PgStore`](crate::PgStore)'s).
        impl inboxed_core::retention::store::RetentionStore for $store {}

        /// The outbox as the shared layer has it, with PostgreSQL's own operations and NOTIFY
        /// wake-ups for its relays.
        impl inboxed_core::outbox::store::OutboxStore for $store {
            async fn write_outbox_many(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                params: &[inboxed_core::outbox::store::WriteParams<'_>],
            ) -> Result<(), inboxed_core::StoreError> {
                $crate::common::write_outbox_many(self, conn, params).await
            }

            fn locks_outbox(&self) -> bool {
                true
            }

            fn max_connections(&self) -> Option<u32> {
                Some($crate::common::PgEngine::max_connections(self))
            }

            async fn claim_outbox(
                &self,
                params: &inboxed_core::outbox::store::ClaimOutboxParams<'_>,
            ) -> Result<Vec<inboxed_core::outbox::OutboxRow>, inboxed_core::StoreError> {
                $crate::common::claim_outbox(self, params).await
            }

            async fn lock_outbox(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                params: &inboxed_core::outbox::store::LockOutboxParams,
            ) -> Result<Vec<inboxed_core::outbox::OutboxRow>, inboxed_core::StoreError> {
                $crate::common::lock_outbox(self, conn, params).await
            }

            async fn mark_outbox(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                p: &inboxed_core::outbox::store::MarkParams<'_>,
            ) -> Result<(), inboxed_core::StoreError> {
                $crate::common::mark_outbox(self, conn, p).await
            }

            async fn listen_outbox(
                &self,
                wake: std::sync::Arc<tokio::sync::Notify>,
            ) -> Result<Option<inboxed_core::inbox::store::Subscription>, inboxed_core::StoreError>
            {
                $crate::common::listen_outbox(self, wake).await
            }
        }

        /// The inbox's receipts, workers and wake-ups: PostgreSQL's own operations, the worker
        /// registry, and NOTIFY.
        impl inboxed_core::inbox::store::InboxStore for $store {
            async fn enqueue_many(
                &self,
                p: &inboxed_core::inbox::store::EnqueueManyParams<'_>,
            ) -> Result<Vec<inboxed_core::inbox::store::Enqueued>, inboxed_core::StoreError> {
                $crate::common::enqueue_many(self, p).await
            }

            async fn count_attempts(
                &self,
                consumer: &inboxed_core::ConsumerName,
                message_ids: &[String],
            ) -> Result<Vec<(String, u32)>, inboxed_core::StoreError> {
                $crate::common::count_attempts(self, consumer, message_ids).await
            }

            async fn finish_locked(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                consumer: &inboxed_core::ConsumerName,
                fates: &[inboxed_core::inbox::store::RowFate],
            ) -> Result<(), inboxed_core::StoreError> {
                $crate::common::finish_locked(self, conn, consumer, fates).await
            }

            async fn release_stale(
                &self,
                p: &inboxed_core::inbox::store::ReleaseStaleParams<'_>,
            ) -> Result<u64, inboxed_core::StoreError> {
                $crate::common::release_stale(self, p).await
            }

            async fn hold_liveness(
                &self,
                worker: &str,
            ) -> Result<Option<inboxed_core::inbox::store::Liveness>, inboxed_core::StoreError>
            {
                inboxed_core::engine::liveness::hold(self, worker).await
            }

            async fn dead_workers(&self) -> Result<Vec<String>, inboxed_core::StoreError> {
                inboxed_core::engine::liveness::dead_workers(self).await
            }

            async fn forget_workers(
                &self,
                workers: &[String],
            ) -> Result<u64, inboxed_core::StoreError> {
                inboxed_core::engine::liveness::forget_workers(self, workers).await
            }

            async fn notify(
                &self,
                consumer: &inboxed_core::ConsumerName,
            ) -> Result<(), inboxed_core::StoreError> {
                $crate::common::notify(self, consumer).await
            }

            async fn subscribe(
                &self,
                consumer: &inboxed_core::ConsumerName,
                wake: std::sync::Arc<tokio::sync::Notify>,
            ) -> Result<Option<inboxed_core::inbox::store::Subscription>, inboxed_core::StoreError>
            {
                $crate::common::subscribe(self, consumer, wake).await
            }

            fn local_wakers(&self) -> Option<&inboxed_core::inbox::LocalWakers> {
                Some($crate::common::PgEngine::wakers(self))
            }
        }
    };
}

pub(crate) use driver_store;

/// `Store` for `$store`, whose driver is `$db`: PostgreSQL's own migration, registration and
/// start-up check, every transaction begun with `begin.sql` (the claims' shared key locks with
/// it), the single and set-based claims; `$extra` holds a driver's own further methods
/// (tokio-postgres's pipelined ones).
macro_rules! driver_store_base {
    ($store:ty, $db:ty $(, { $($extra:tt)* })?) => {
        impl inboxed_core::Store for $store {
            type Db = $db;
            type Engine = Self;

            fn engine(&self) -> &Self {
                self
            }

            async fn migrate(&self) -> Result<Vec<i64>, inboxed_core::StoreError> {
                $crate::common::migrate(self).await
            }

            async fn register_consumer(
                &self,
                consumer: &inboxed_core::ConsumerName,
            ) -> Result<(), inboxed_core::StoreError> {
                $crate::common::register_consumer(self, consumer).await
            }

            async fn check_durability(
                &self,
            ) -> Result<inboxed_core::store::DurabilityReport, inboxed_core::StoreError> {
                $crate::common::check_durability(self).await
            }

            async fn begin(
                &self,
                params: &inboxed_core::store::BeginParams,
            ) -> Result<<$db as inboxed_core::driver::Driver>::Transaction, inboxed_core::StoreError> {
                let statement = $crate::store::begin_statement(params, &[]);
                $crate::common::PgEngine::begin_with(self, statement).await
            }

            /// The claims' shared key locks ride with the transaction's settings
            /// (`begin.sql`).
            async fn begin_claims(
                &self,
                params: &inboxed_core::store::BeginParams,
                consumer: &inboxed_core::ConsumerName,
                ids: &[&str],
            ) -> Result<<$db as inboxed_core::driver::Driver>::Transaction, inboxed_core::StoreError> {
                let locks = $crate::key_lock::claim_locks(consumer, ids);
                let statement = $crate::store::begin_statement(params, &locks);
                $crate::common::PgEngine::begin_with(self, statement).await
            }

            async fn claim(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                params: &inboxed_core::store::ClaimParams<'_>,
            ) -> Result<inboxed_core::store::Claim, inboxed_core::StoreError> {
                inboxed_core::engine::claims::claim_key(
                    self,
                    conn,
                    &self.queries.claim,
                    params.consumer,
                    params.envelope,
                )
                .await
            }

            /// One statement for the batch's keys (`claim_many.sql`).
            async fn claim_many(
                &self,
                conn: &mut inboxed_core::engine::Conn<Self>,
                consumer: &inboxed_core::ConsumerName,
                envelopes: &[&inboxed_core::Envelope],
            ) -> Result<Vec<inboxed_core::store::Claim>, inboxed_core::StoreError> {
                $crate::common::claim_many(self, conn, consumer, envelopes).await
            }

            $($($extra)*)?
        }
    };
}

pub(crate) use driver_store_base;
