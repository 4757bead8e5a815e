//! [`OutboxStore`] for PostgreSQL.

use sqlx::PgConnection;

use inboxed_core::StoreError;
use inboxed_core::engine;
use inboxed_core::outbox::store::{OutboxStore, WriteParams};

use crate::PgStore;

impl OutboxStore for PgStore {
    async fn write_outbox(
        &self,
        conn: &mut PgConnection,
        params: &WriteParams<'_>,
    ) -> Result<(), StoreError> {
        engine::outbox::write(self, conn, params).await
    }
}
