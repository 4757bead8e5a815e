//! The outbox on MySQL, as the shared layer has it but for its batch write and the settling of
//! a lock-held batch (lists travel as JSON: MySQL binds no arrays). Relays poll (no
//! notifications); a lock-held batch marks itself live by a named lock (outbox_lock.sql).

use sqlx::MySqlConnection;

use inboxed_core::engine::{Args as _, Engine as _, outbox};
use inboxed_core::inbox::store::millis_of;
use inboxed_core::outbox::store::{MarkParams, OutboxStore, WriteParams};
use inboxed_core::{ConsumerName, StoreError};

use crate::parts::{base64, parts};
use crate::store::MySqlStore;

impl OutboxStore for MySqlStore {
    /// One `INSERT … SELECT FROM JSON_TABLE(…)` a part of the list (`outbox_write_many.sql`):
    /// a round trip a batch instead of one a message. A message too large to share a statement
    /// is written on its own (`outbox_write.sql`, its payload bound as bytes).
    async fn write_outbox_many(
        &self,
        conn: &mut MySqlConnection,
        params: &[WriteParams<'_>],
    ) -> Result<(), StoreError> {
        let size = |p: &WriteParams<'_>| {
            let m = p.message;
            let headers = p.headers_json();
            let texts = [
                Some(p.message_id.as_str()),
                Some(m.destination()),
                m.ordering_key(),
                m.message_type(),
                m.correlation_id(),
                Some(headers.as_str()),
                p.caused_by_consumer.map(ConsumerName::as_str),
                p.caused_by_message_id,
            ];
            crate::parts::item_size(m.payload(), &texts)
        };
        for (part, shared) in parts(params, size) {
            if !shared {
                outbox::write_each(self, conn, part).await?;
                continue;
            }
            let messages: Vec<serde_json::Value> = part
                .iter()
                .map(|p| {
                    let m = p.message;
                    serde_json::json!([
                        p.message_id.as_str(),
                        m.destination(),
                        m.ordering_key(),
                        m.message_type(),
                        m.correlation_id(),
                        p.headers_json(),
                        base64(m.payload()),
                        p.caused_by_consumer.map(ConsumerName::as_str),
                        p.caused_by_message_id,
                    ])
                })
                .collect();
            let q = self
                .query(&self.queries.outbox_write_many)
                .text(&serde_json::Value::Array(messages).to_string());
            <Self as inboxed_core::engine::Engine>::execute(q, conn).await?;
        }
        Ok(())
    }

    fn locks_outbox(&self) -> bool {
        true
    }

    fn max_connections(&self) -> Option<u32> {
        Some(self.pool.options().get_max_connections())
    }

    /// `outbox_mark.sql`, the fates as one JSON array.
    async fn mark_outbox(
        &self,
        conn: &mut MySqlConnection,
        p: &MarkParams<'_>,
    ) -> Result<(), StoreError> {
        let fates: Vec<serde_json::Value> = p
            .fates
            .iter()
            .map(|f| serde_json::json!([f.id, f.status, f.error, millis_of(f.backoff), f.attempts]))
            .collect();
        let q = self
            .query(&self.queries.outbox_mark)
            .bytes(p.token.as_bytes())
            .text(&serde_json::Value::Array(fates).to_string())
            .flag(p.delete_sent)
            .text(p.relay);
        <Self as inboxed_core::engine::Engine>::execute(q, conn)
            .await
            .map(drop)
    }
}
