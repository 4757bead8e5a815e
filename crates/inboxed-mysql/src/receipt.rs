//! A batch receipt in few statements (`enqueue_many.sql`): the batch's aggregates take their
//! turns at once, then each part of the batch is stored by one insert, every message or none,
//! and read back by key. A part that holds a stored key (or one twice) is stored one message
//! at a time ([`claims::enqueue_in`], as SQLite stores every batch), and so is a message too
//! large to share a statement.

use std::collections::{BTreeSet, HashMap};

use sqlx::{MySqlConnection, Row as _};

use inboxed_core::engine::{Args as _, Engine as _, claims};
use inboxed_core::inbox::store::{EnqueueManyParams, Enqueued};
use inboxed_core::{ConsumerName, Envelope, StoreError};

use crate::parts::{base64, parts};
use crate::store::MySqlStore;

impl MySqlStore {
    /// Stores a batch in one transaction; one outcome per message, in order.
    pub(crate) async fn enqueue_batch(
        &self,
        p: &EnqueueManyParams<'_>,
    ) -> Result<Vec<Enqueued>, StoreError> {
        let aggregates: BTreeSet<&str> = p
            .envelopes
            .iter()
            .filter_map(Envelope::aggregate_id)
            .collect();
        let mut turns = Some(serde_json::json!(aggregates).to_string());
        let mut tx = self.begin_write().await?;
        let mut outcomes = Vec::with_capacity(p.envelopes.len());
        let size = |e: &Envelope| {
            let texts = [
                Some(e.id().as_str()),
                e.aggregate_id(),
                e.message_type(),
                e.correlation_id(),
            ];
            crate::parts::item_size(e.payload(), &texts) + 64
        };
        for (envs, shared) in parts(p.envelopes, size) {
            // The whole batch's turns, with the first statement that runs.
            let turns = turns.take();
            let stored = if shared {
                let turns = turns.as_deref().unwrap_or("[]");
                self.store_part(&mut tx, p.consumer, turns, envs).await?
            } else {
                if let Some(turns) = &turns {
                    self.store_part(&mut tx, p.consumer, turns, &[]).await?;
                }
                None
            };
            match stored {
                Some(ids) => {
                    for env in envs {
                        // Every key of the part was inserted, and read back by key.
                        let id = ids.get(env.id().as_str()).copied();
                        let id = id.ok_or(StoreError::Database(sqlx::Error::RowNotFound))?;
                        outcomes.push(Enqueued::Stored { id });
                    }
                }
                None => outcomes.extend(claims::enqueue_in(self, &mut tx, p.consumer, envs).await?),
            }
        }
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(outcomes)
    }

    /// Takes `turns` (a JSON array of aggregate ids), then stores `envs` with one insert; the
    /// ids it drew by message id, or `None` when a key was stored already or given twice
    /// (nothing of the part is stored then) or the part is empty.
    async fn store_part(
        &self,
        conn: &mut MySqlConnection,
        consumer: &ConsumerName,
        turns: &str,
        envs: &[Envelope],
    ) -> Result<Option<HashMap<String, i64>>, StoreError> {
        let messages: Vec<serde_json::Value> = envs
            .iter()
            .map(|e| {
                serde_json::json!([
                    e.id().as_str(),
                    e.aggregate_id(),
                    e.message_type(),
                    e.correlation_id(),
                    base64(e.payload()),
                    hex::encode(e.hash().as_bytes()),
                    e.headers().to_stored(),
                ])
            })
            .collect();
        let rows = self
            .query(&self.queries.enqueue_many)
            .text(consumer.as_str())
            .text(turns)
            .text(&serde_json::Value::Array(messages).to_string())
            .fetch_all(conn)
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut ids = HashMap::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get(0).map_err(StoreError::from_sqlx)?;
            let key: String = row.try_get(1).map_err(StoreError::from_sqlx)?;
            ids.insert(key, id);
        }
        Ok(Some(ids))
    }
}
