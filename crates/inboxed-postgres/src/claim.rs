//! The processor's claim on PostgreSQL: what differs from the shared claim
//! ([`inboxed_core::engine::claims`]) is the partitioned table's key lock and the set-based
//! claim of a batch's keys.

use sqlx::PgConnection;

use inboxed_core::engine::claims;
use inboxed_core::store::Claim;
use inboxed_core::{ConsumerName, Envelope, StoreError};

use crate::store::PgStore;

impl PgStore {
    /// Claims one key; in partitioned mode under its key lock, since the partitioned table
    /// cannot carry a unique index across partitions.
    pub(crate) async fn claim_key(
        &self,
        conn: &mut PgConnection,
        consumer: &ConsumerName,
        env: &Envelope,
    ) -> Result<Claim, StoreError> {
        let claim = if self.partitions.is_some() {
            self.query(&self.queries.lock_key)
                .bind(consumer.as_str())
                .bind(env.id().as_str())
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from_sqlx)?;
            &self.queries.claim_partitioned
        } else {
            &self.queries.claim
        };
        claims::claim_key(self, conn, claim, consumer, env).await
    }

    /// Claims distinct keys with one statement (`claim_many.sql`) on the plain table; in
    /// partitioned mode one by one, each under its key lock.
    pub(crate) async fn claim_keys(
        &self,
        conn: &mut PgConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        if self.partitions.is_some() {
            let mut claims = Vec::with_capacity(envelopes.len());
            for env in envelopes {
                claims.push(self.claim_key(conn, consumer, env).await?);
            }
            return Ok(claims);
        }
        crate::common::claim_many(self, conn, consumer, envelopes).await
    }
}
