//! [`OutboxStore`] for SQLite.

use sqlx::SqliteConnection;

use inboxed_core::StoreError;
use inboxed_core::engine;
use inboxed_core::outbox::store::{OutboxStore, WriteParams};

use crate::SqliteStore;

impl OutboxStore for SqliteStore {
    async fn write_outbox(
        &self,
        conn: &mut SqliteConnection,
        params: &WriteParams<'_>,
    ) -> Result<(), StoreError> {
        engine::outbox::write(self, conn, params).await
    }
}
