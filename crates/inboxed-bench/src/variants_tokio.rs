//! The processor benchmark's tokio-postgres side: the processor on [`TokioPgStore`] and the
//! business update alone through the same driver, the usual way (`transaction()`, the update,
//! `commit()`), so that the two compare like for like at a link's latency.

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ProcessorConfig};
use inboxed_postgres::tokio_pg::{Connection, TokioPgStore, TokioPostgres};

use crate::variants::UPDATE;

/// Credits one random account per message, through tokio-postgres.
pub(crate) struct TokioCredit {
    accounts: i64,
}

impl Handler<TokioPostgres> for TokioCredit {
    async fn handle(&self, _msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        let update = conn.prepare_cached(UPDATE).await?;
        conn.execute(&update, &[&fastrand::i64(0..self.accounts)])
            .await?;
        Ok(())
    }
}

/// The processor and the pool on tokio-postgres.
pub(crate) struct TokioSetup {
    store: TokioPgStore,
    processor: Processor<TokioPgStore, TokioCredit>,
    worker: crate::variants_worker::Drain<TokioPgStore, TokioCredit>,
}

impl TokioSetup {
    /// A store of `connections` on `url` (the database the sqlx side set up).
    pub(crate) async fn new(url: &str, connections: usize, accounts: i64) -> anyhow::Result<Self> {
        // The URL's query holds sqlx's own options, which tokio-postgres does not know.
        let url = url.split('?').next().unwrap_or(url);
        let store = TokioPgStore::connect(url, connections)?;
        let processor = Processor::with_config(
            store.clone(),
            ConsumerName::new("bench-tokio")?,
            TokioCredit { accounts },
            ProcessorConfig::default(),
        );
        processor.ensure_ready().await?;
        let worker = crate::variants_worker::Drain::new(
            &store,
            "bench-tokio-worker",
            TokioCredit { accounts },
        )
        .await?;
        Ok(Self {
            store,
            processor,
            worker,
        })
    }

    pub(crate) fn worker(&self) -> crate::variants_worker::Drain<TokioPgStore, TokioCredit> {
        self.worker.clone()
    }

    pub(crate) fn processor(&self) -> Processor<TokioPgStore, TokioCredit> {
        self.processor.clone()
    }

    pub(crate) fn pool(&self) -> deadpool_postgres::Pool {
        self.store.pool().clone()
    }
}

/// `transaction()`, the update, `commit()` through tokio-postgres: three round trips.
pub(crate) async fn business_only(
    pool: &deadpool_postgres::Pool,
    accounts: i64,
) -> anyhow::Result<()> {
    let mut client = pool.get().await?;
    let update = client.prepare_cached(UPDATE).await?;
    let tx = client.transaction().await?;
    tx.execute(&update, &[&fastrand::i64(0..accounts)]).await?;
    tx.commit().await?;
    Ok(())
}
