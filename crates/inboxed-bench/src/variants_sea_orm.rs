//! The processor benchmark's SeaORM side: the processor on [`SeaOrmPgStore`] and the business
//! update alone through SeaORM, the usual way (`db.begin()`, the update, `commit()`), so that
//! the two compare like for like at a link's latency.

use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ProcessorConfig};
use inboxed_postgres::sea_orm_pg::{Connection, SeaOrmPgStore, SeaOrmPostgres};

use crate::variants::UPDATE;

fn credit(accounts: i64) -> Statement {
    Statement::from_sql_and_values(
        DbBackend::Postgres,
        UPDATE,
        [fastrand::i64(0..accounts).into()],
    )
}

/// Credits one random account per message, through SeaORM.
pub(crate) struct SeaCredit {
    accounts: i64,
}

impl Handler<SeaOrmPostgres> for SeaCredit {
    async fn handle(&self, _msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
        conn.execute_raw(credit(self.accounts)).await?;
        Ok(())
    }
}

/// The processor and the connection on SeaORM.
pub(crate) struct SeaSetup {
    store: SeaOrmPgStore,
    processor: Processor<SeaOrmPgStore, SeaCredit>,
    worker: crate::variants_worker::Drain<SeaOrmPgStore, SeaCredit>,
}

impl SeaSetup {
    /// A store of `connections` on `url` (the database the sqlx side set up).
    pub(crate) async fn new(url: &str, connections: usize, accounts: i64) -> anyhow::Result<Self> {
        let connections = u32::try_from(connections).unwrap_or(8);
        let store = SeaOrmPgStore::connect(url, connections).await?;
        let processor = Processor::with_config(
            store.clone(),
            ConsumerName::new("bench-sea-orm")?,
            SeaCredit { accounts },
            ProcessorConfig::default(),
        );
        processor.ensure_ready().await?;
        let worker = crate::variants_worker::Drain::new(
            &store,
            "bench-sea-orm-worker",
            SeaCredit { accounts },
        )
        .await?;
        Ok(Self {
            store,
            processor,
            worker,
        })
    }

    pub(crate) fn worker(&self) -> crate::variants_worker::Drain<SeaOrmPgStore, SeaCredit> {
        self.worker.clone()
    }

    pub(crate) fn processor(&self) -> Processor<SeaOrmPgStore, SeaCredit> {
        self.processor.clone()
    }

    pub(crate) fn store(&self) -> SeaOrmPgStore {
        self.store.clone()
    }
}

/// `db.begin()`, the update, `commit()` through SeaORM.
pub(crate) async fn business_only(store: &SeaOrmPgStore, accounts: i64) -> anyhow::Result<()> {
    let tx = store.connection().begin().await?;
    tx.execute_raw(credit(accounts)).await?;
    tx.commit().await?;
    Ok(())
}
