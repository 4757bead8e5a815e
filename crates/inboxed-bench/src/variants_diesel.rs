//! The processor benchmark's diesel-async side: the processor on [`DieselPgStore`] and the
//! business update alone through the same driver, the usual way (`conn.transaction(…)` around
//! the update), so that the two compare like for like at a link's latency.

use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, RunQueryDsl};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ProcessorConfig};
use inboxed_postgres::diesel_pg::{Connection, DieselPgStore, DieselPostgres};

use crate::variants::UPDATE;

/// Credits one random account per message, through diesel-async.
pub(crate) struct DieselCredit {
    accounts: i64,
}

impl Handler<DieselPostgres> for DieselCredit {
    async fn handle(&self, _msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        diesel::sql_query(UPDATE)
            .bind::<BigInt, _>(fastrand::i64(0..self.accounts))
            .execute(&mut **conn)
            .await?;
        Ok(())
    }
}

/// The processor and the pool on diesel-async.
pub(crate) struct DieselSetup {
    store: DieselPgStore,
    processor: Processor<DieselPgStore, DieselCredit>,
    worker: crate::variants_worker::Drain<DieselPgStore, DieselCredit>,
}

impl DieselSetup {
    /// A store of `connections` on `url` (the database the sqlx side set up).
    pub(crate) async fn new(url: &str, connections: usize, accounts: i64) -> anyhow::Result<Self> {
        // The URL's query holds sqlx's own options, which diesel-async does not know.
        let url = url.split('?').next().unwrap_or(url);
        let store = DieselPgStore::connect(url, connections)?;
        let processor = Processor::with_config(
            store.clone(),
            ConsumerName::new("bench-diesel")?,
            DieselCredit { accounts },
            ProcessorConfig::default(),
        );
        processor.ensure_ready().await?;
        let worker = crate::variants_worker::Drain::new(
            &store,
            "bench-diesel-worker",
            DieselCredit { accounts },
        )
        .await?;
        Ok(Self {
            store,
            processor,
            worker,
        })
    }

    pub(crate) fn worker(&self) -> crate::variants_worker::Drain<DieselPgStore, DieselCredit> {
        self.worker.clone()
    }

    pub(crate) fn processor(&self) -> Processor<DieselPgStore, DieselCredit> {
        self.processor.clone()
    }

    pub(crate) fn store(&self) -> DieselPgStore {
        self.store.clone()
    }
}

/// `conn.transaction(…)` around the update through diesel-async: `BEGIN`, the update,
/// `COMMIT`.
pub(crate) async fn business_only(store: &DieselPgStore, accounts: i64) -> anyhow::Result<()> {
    let mut conn = store.pool().get().await?;
    conn.transaction(async |c| -> Result<(), diesel::result::Error> {
        diesel::sql_query(UPDATE)
            .bind::<BigInt, _>(fastrand::i64(0..accounts))
            .execute(c)
            .await?;
        Ok(())
    })
    .await?;
    Ok(())
}
