//! The processor benchmark's store-then-process side: on each driver, a task stores a batch of
//! messages (one `store_many` call, through the same link) and drains them with the worker at
//! its defaults (`WorkerConfig::default()`: leases, batches of 50), its handler crediting one
//! account per message through that driver, as the processor's handler does.

use sqlx::{PgConnection, Postgres};

use inboxed_core::inbox::store::InboxStore;
use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId};

use crate::variants::UPDATE;

/// Messages a task stores before it drains: the worker's default batch.
const STORED: usize = 50;

/// Credits one account per message through sqlx, one statement a message (the processor's
/// handler credits a batch with one statement, a shape the other drivers' handlers lack).
pub(crate) struct SqlxRowCredit {
    pub(crate) accounts: i64,
}

impl Handler<Postgres> for SqlxRowCredit {
    async fn handle(&self, _msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        sqlx::query(UPDATE)
            .bind(fastrand::i64(0..self.accounts))
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// A worker at its defaults and the inbox it drains, for one consumer of its own.
pub(crate) struct Drain<S: InboxStore, H> {
    inbox: Inbox<S>,
    worker: Worker<S, H>,
}

impl<S: InboxStore + Clone, H> Clone for Drain<S, H> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            worker: self.worker.clone(),
        }
    }
}

impl<S, H> Drain<S, H>
where
    S: InboxStore + Clone,
    H: Handler<S::Db>,
{
    /// A worker over `store` for consumer `name`, registered.
    pub(crate) async fn new(store: &S, name: &str, handler: H) -> anyhow::Result<Self> {
        let consumer = ConsumerName::new(name)?;
        store.register_consumer(&consumer).await?;
        Ok(Self {
            inbox: Inbox::new(store.clone(), consumer.clone()),
            worker: Worker::new(store.clone(), consumer, handler, WorkerConfig::default()),
        })
    }

    /// Stores a batch, then runs the worker until a claim comes back empty; the rows it
    /// completed (another task's included, when it claimed them first).
    pub(crate) async fn once(&self) -> anyhow::Result<u64> {
        let batch: Vec<Envelope> = (0..STORED)
            .map(|_| {
                let id = MessageId::from_uuid(uuid::Uuid::now_v7());
                Envelope::new(id, b"{\"credit\":1}".to_vec())
            })
            .collect();
        self.inbox.store_many(&batch).await?;
        let mut done = 0;
        loop {
            let report = self.worker.run_once().await?;
            done += report.done;
            if report.claimed == 0 {
                return Ok(done);
            }
        }
    }
}
