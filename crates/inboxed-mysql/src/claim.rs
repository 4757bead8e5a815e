//! A batch's keys claimed in one round trip (`claim_many.sql`): what differs from the shared
//! claim ([`inboxed_core::engine::claims`]) is how the keys travel (a JSON array, since MySQL
//! binds no arrays) and how the claimed ones are known without `INSERT … RETURNING` (the insert
//! takes every key or none).

use std::collections::HashSet;

use sqlx::{MySqlConnection, Row as _};

use inboxed_core::engine::{Args as _, Engine as _, claims};
use inboxed_core::store::Claim;
use inboxed_core::{ConsumerName, Envelope, StoreError};

use crate::store::MySqlStore;

impl MySqlStore {
    /// Claims distinct keys in one round trip; a key not claimed there (dead-lettered) is
    /// looked up to say why. A batch holding a processed key is claimed key by key, in byte
    /// order of the ids (the order of the set-based statements, so that two batches sharing
    /// keys wait rather than deadlock).
    pub(crate) async fn claim_keys(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        // One text query carries the list three times, in hex: a list past the packet budget
        // (a batch of thousands of long ids) is claimed key by key, as the partitioned table
        // is (claim_many.sql writes the plain one).
        let size: usize = envelopes
            .iter()
            .map(|e| {
                crate::parts::item_size(
                    &[],
                    &[Some(e.id().as_str()), e.message_type(), e.correlation_id()],
                ) + 70
            })
            .sum();
        if self.partitions.is_some() || size * 6 > crate::parts::PART_BYTES {
            return self.claim_in_order(conn, consumer, envelopes).await;
        }
        let keys: Vec<serde_json::Value> = envelopes
            .iter()
            .map(|e| {
                serde_json::json!([
                    e.id().as_str(),
                    e.message_type(),
                    e.correlation_id(),
                    hex::encode(e.hash().as_bytes()),
                ])
            })
            .collect();
        let rows = self
            .query(&self.queries.claim_many)
            .text(consumer.as_str())
            .text(&serde_json::Value::Array(keys).to_string())
            .fetch_all(&mut *conn)
            .await?;
        if rows.is_empty() {
            return self.claim_in_order(conn, consumer, envelopes).await;
        }
        let claimed: HashSet<String> = rows
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from_sqlx)?;
        let mut claims = Vec::with_capacity(envelopes.len());
        for env in envelopes {
            let id = env.id().as_str();
            claims.push(if claimed.contains(id) {
                Claim::New
            } else {
                claims::not_claimed(self, conn, consumer, id).await?
            });
        }
        Ok(claims)
    }

    /// `claim.sql` for each key, in byte order of the ids; the claims in the caller's order.
    async fn claim_in_order(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        envelopes: &[&Envelope],
    ) -> Result<Vec<Claim>, StoreError> {
        let mut order: Vec<usize> = (0..envelopes.len()).collect();
        order.sort_by_key(|&i| envelopes[i].id().as_str().as_bytes());
        let mut claims = vec![Claim::New; envelopes.len()];
        for i in order {
            claims[i] = self.claim_one(conn, consumer, envelopes[i]).await?;
        }
        Ok(claims)
    }

    /// One key's claim (`claim.sql`, or `claim_partitioned.sql` in partitioned mode).
    pub(crate) async fn claim_one(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        env: &Envelope,
    ) -> Result<Claim, StoreError> {
        let claim = if self.partitions.is_some() {
            &self.queries.claim_partitioned
        } else {
            &self.queries.claim
        };
        claims::claim_key(self, conn, claim, consumer, env).await
    }
}
