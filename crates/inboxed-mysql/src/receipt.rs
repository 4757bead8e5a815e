//! A batch receipt in few statements (`enqueue_many.sql`): the batch's aggregates take their
//! turns at once, then each part of the batch is stored by one insert, every message or none,
//! and read back by key. A part that holds a stored key (or one twice) is stored one message
//! at a time ([`claims::enqueue_in`], as SQLite stores every batch), and so is a message too
//! large to share a statement.

use std::collections::{BTreeSet, HashMap};

use base64::Engine as _;
use sqlx::{MySqlConnection, Row as _};

use inboxed_core::engine::{Args as _, Engine as _, claims};
use inboxed_core::inbox::store::{EnqueueManyParams, Enqueued};
use inboxed_core::{ConsumerName, Envelope, StoreError};

use crate::store::MySqlStore;

/// The most payload, in base64, one insert carries. The statement travels as one packet, which
/// the server refuses above its `max_allowed_packet` (16 MiB by default on MariaDB, 64 MiB on
/// MySQL 8); a message larger than this is stored on its own, its payload bound as bytes.
const PART_BYTES: usize = 4 << 20;

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
        for (envs, shared) in parts(p.envelopes) {
            // The whole batch's turns, with the first statement that runs.
            let turns = turns.take();
            let stored = match (&turns, shared) {
                (_, true) => {
                    let turns = turns.as_deref().unwrap_or("[]");
                    self.store_part(&mut tx, p.consumer, turns, envs).await?
                }
                (Some(turns), false) => {
                    self.store_part(&mut tx, p.consumer, turns, &[]).await?;
                    None
                }
                (None, false) => None,
            };
            match stored {
                Some(ids) => outcomes.extend(envs.iter().map(|env| Enqueued::Stored {
                    id: ids.get(env.id().as_str()).copied().unwrap_or_default(),
                })),
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
        let b64 = base64::engine::general_purpose::STANDARD;
        let messages: Vec<serde_json::Value> = envs
            .iter()
            .map(|e| {
                serde_json::json!([
                    e.id().as_str(),
                    e.aggregate_id(),
                    e.message_type(),
                    e.correlation_id(),
                    b64.encode(e.payload()),
                    hex::encode(e.hash().as_bytes()),
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

/// The batch cut into runs, in order: `(run, true)` for messages that share one insert (their
/// payloads at most [`PART_BYTES`] in base64 together), `(one, false)` for a message larger.
fn parts(envelopes: &[Envelope]) -> Vec<(&[Envelope], bool)> {
    let encoded = |e: &Envelope| e.payload().len().div_ceil(3) * 4;
    let mut parts = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, env) in envelopes.iter().enumerate() {
        let size = encoded(env);
        if size > PART_BYTES || bytes + size > PART_BYTES {
            if start < i {
                parts.push((&envelopes[start..i], true));
            }
            start = i;
            bytes = 0;
        }
        if size > PART_BYTES {
            parts.push((&envelopes[i..=i], false));
            start = i + 1;
        } else {
            bytes += size;
        }
    }
    if start < envelopes.len() {
        parts.push((&envelopes[start..], true));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(n: usize) -> Envelope {
        let id = inboxed_core::MessageId::from_uuid(uuid::Uuid::new_v4());
        Envelope::new(id, vec![b'x'; n])
    }

    /// Runs keep arrival order, stay within the packet budget, and a message past the budget
    /// goes alone, bound as bytes.
    #[test]
    fn a_batch_is_cut_into_runs_within_the_budget_and_large_messages_alone() {
        let third = PART_BYTES / 4 * 3 / 3; // a third of the budget once in base64
        let batch = vec![
            sized(10),
            sized(third),
            sized(third),
            sized(third),      // the fourth would pass the budget: a new run
            sized(PART_BYTES), // past the budget on its own
            sized(10),
        ];
        let shape: Vec<(usize, bool)> = parts(&batch).iter().map(|(r, s)| (r.len(), *s)).collect();
        assert_eq!(shape, [(3, true), (1, true), (1, false), (1, true)]);
        let flat: Vec<&Envelope> = parts(&batch).iter().flat_map(|(r, _)| r.iter()).collect();
        assert!(flat.iter().zip(&batch).all(|(a, b)| std::ptr::eq(*a, b)));
        assert!(parts(&[]).is_empty());
    }
}
