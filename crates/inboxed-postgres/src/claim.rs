//! The claim: one key, or a batch's keys in one statement, and for a key not inserted, why.

use std::collections::HashSet;

use sqlx::{PgConnection, Postgres, Row};

use inboxed_core::store::Claim;
use inboxed_core::{ConsumerName, Envelope, StoreError, StoredHash};

use crate::key::message_key;
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
        let consumer = consumer.as_str();
        let id = env.id().as_str();
        let claim = if self.partitions.is_some() {
            self.query(&self.queries.lock_key)
                .bind(consumer)
                .bind(id)
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from_sqlx)?;
            &self.queries.claim_partitioned
        } else {
            &self.queries.claim
        };
        let inserted = self
            .query(claim)
            .bind(consumer)
            .bind(id)
            .bind(message_key(id))
            // The same 32 bits as a signed integer, the column's type.
            .bind(env.hash().fingerprint().cast_signed())
            .execute(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?
            .rows_affected();
        if inserted == 1 {
            return Ok(Claim::New);
        }
        self.not_inserted(conn, consumer, id).await
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
        let ids: Vec<&str> = envelopes.iter().map(|e| e.id().as_str()).collect();
        let keys: Vec<Vec<u8>> = ids.iter().map(|id| message_key(id).into_owned()).collect();
        let fingerprints: Vec<i32> = envelopes
            .iter()
            .map(|e| e.hash().fingerprint().cast_signed())
            .collect();
        let rows = self
            .query(&self.queries.claim_many)
            .bind(consumer.as_str())
            .bind(&ids)
            .bind(&keys)
            .bind(fingerprints)
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        let inserted: HashSet<Vec<u8>> = rows
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from_sqlx)?;
        let mut claims = Vec::with_capacity(envelopes.len());
        for (id, key) in ids.iter().zip(&keys) {
            claims.push(if inserted.contains(key) {
                Claim::New
            } else {
                self.not_inserted(conn, consumer.as_str(), id).await?
            });
        }
        Ok(claims)
    }

    /// Why a claim inserted nothing: processed (with its fingerprint) or dead-lettered.
    async fn not_inserted(
        &self,
        conn: &mut PgConnection,
        consumer: &str,
        id: &str,
    ) -> Result<Claim, StoreError> {
        let row = self
            .lookup(consumer, id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        let Some(row) = row else {
            // The row that blocked the insert is gone already (purged or discarded between the
            // two statements). Nothing was written: report contention so the caller retries.
            return Err(StoreError::Timeout(sqlx::Error::RowNotFound));
        };
        let state: &str = row.try_get(0).map_err(StoreError::from_sqlx)?;
        if state == "dead_lettered" {
            return Ok(Claim::DeadLettered);
        }
        let fingerprint: Option<i32> = row.try_get(1).map_err(StoreError::from_sqlx)?;
        Ok(Claim::Duplicate {
            stored: fingerprint.map(|f| StoredHash::Fingerprint(f.cast_unsigned())),
        })
    }

    /// lookup.sql for one key: why did a claim or dead letter of it write nothing?
    pub(crate) fn lookup(
        &self,
        consumer: &str,
        id: &str,
    ) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
        self.query(&self.queries.lookup)
            .bind(consumer.to_owned())
            .bind(id.to_owned())
            .bind(message_key(id).into_owned())
    }
}
