//! inboxed's side of `inboxed-bench peer` in pgmq's shape: a batch handler that updates its
//! accounts one statement a row, in account order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{PgConnection, Postgres};

use inboxed_core::{Envelope, Handler, HandlerError};

use crate::defaults::sorted_accounts;

/// inboxed's worker in pgmq's shape: a batch, one update a row, in account order.
pub(crate) struct PerRow {
    pub(crate) calls: Arc<AtomicU64>,
}

impl Handler<Postgres> for PerRow {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.handle_batch(&[msg], conn).await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        self.calls.fetch_add(msgs.len() as u64, Ordering::Relaxed);
        for account in sorted_accounts(msgs)? {
            sqlx::query("UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1")
                .bind(account)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }
}
