//! What the processor benchmark measures: the processor, the same statements issued directly
//! through sqlx (with and without the settling statement), and the business update without
//! the claim.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres};

use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, MessageId, Processor, ProcessorConfig,
};
use inboxed_postgres::PgStore;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Variant {
    Processor,
    RawSqlx,
    BusinessOnly,
    /// The same statements through sqlx without the settling statement: what that one round
    /// trip costs.
    RawNoSettle,
    /// The processor on tokio-postgres.
    TokioProcessor,
    /// The business update alone through tokio-postgres.
    TokioBusinessOnly,
    /// The processor on diesel-async.
    DieselProcessor,
    /// The business update alone through diesel-async.
    DieselBusinessOnly,
    /// The processor on SeaORM.
    SeaProcessor,
    /// The business update alone through SeaORM.
    SeaBusinessOnly,
    /// The store-then-process worker at its defaults, on sqlx.
    SqlxWorker,
    /// The same on tokio-postgres.
    TokioWorker,
    /// The same on diesel-async.
    DieselWorker,
    /// The same on SeaORM.
    SeaWorker,
}

pub(crate) const UPDATE: &str = "UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1";
/// A statement exactly as the store issues it, rendered from the store's own SQL file.
fn store_sql(template: &str) -> Arc<str> {
    Arc::from(inboxed_postgres::default_namespace().render(template))
}

/// The processor's own begin statement with its default settings, less the shared lock on the
/// key that the processor adds (to keep a key from ending processed and dead-lettered at once):
/// a hand-written consumer has no dead-letter path to guard, so the lock is the library's cost.
const BEGIN: &str = "BEGIN; SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
                     SELECT set_config('lock_timeout', '5000', true), \
                     set_config('statement_timeout', '30000', true), \
                     set_config('idle_in_transaction_session_timeout', '60000', true)";

/// Credits one random account per message; a batch credits all of its accounts in one
/// statement, locking them in id order so that concurrent batches cannot deadlock.
pub(crate) struct Credit {
    pub(crate) accounts: i64,
}

/// The batch's accounts locked in id order, then credited: what a batch handler that must
/// not deadlock with its concurrent peers writes.
const UPDATE_BATCH: &str = "WITH d AS (SELECT id, count(*) AS n FROM unnest($1::bigint[]) AS u(id) GROUP BY id),
    l AS (SELECT a.id FROM bench_accounts a JOIN d USING (id) ORDER BY a.id FOR UPDATE OF a)
    UPDATE bench_accounts a SET balance = a.balance + d.n FROM d JOIN l USING (id) WHERE a.id = d.id";

impl Handler<Postgres> for Credit {
    const BATCHES: bool = true;

    async fn handle(&self, _msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        sqlx::query(UPDATE)
            .bind(fastrand::i64(0..self.accounts))
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        let ids: Vec<i64> = msgs
            .iter()
            .map(|_| fastrand::i64(0..self.accounts))
            .collect();
        sqlx::query(UPDATE_BATCH)
            .bind(&ids)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

pub(crate) struct Setup {
    store: PgStore,
    accounts: i64,
    processor: Processor<PgStore, Credit>,
    tokio: crate::variants_tokio::TokioSetup,
    diesel: crate::variants_diesel::DieselSetup,
    sea: crate::variants_sea_orm::SeaSetup,
    worker: crate::variants_worker::Drain<PgStore, crate::variants_worker::SqlxRowCredit>,
}

/// `BEGIN; UPDATE; COMMIT`: the business change of one message without the claim, as a
/// consumer without dedup commits it.
pub(crate) async fn business_only(pool: &PgPool, accounts: i64) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query(UPDATE)
        .bind(fastrand::i64(0..accounts))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// A fresh `inboxed_bench` database on `server` with the inbox tables migrated and
/// `bench_accounts` filled: the store every scenario starts from, on a pool of `connections`.
pub(crate) async fn bench_store(
    server: &str,
    connections: usize,
    accounts: i64,
) -> anyhow::Result<PgStore> {
    Ok(bench_database(server, connections, accounts).await?.1)
}

/// [`bench_store`] with the database's URL, for scenarios whose workers connect on their own.
pub(crate) async fn bench_database(
    server: &str,
    connections: usize,
    accounts: i64,
) -> anyhow::Result<(String, PgStore)> {
    let url = crate::fresh_database(server).await?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::try_from(connections).unwrap_or(8))
        .connect(&url)
        .await?;
    let store = PgStore::new(pool);
    store.migrate().await?;
    create_accounts(store.pool(), accounts).await?;
    Ok((url, store))
}

/// Creates `bench_accounts` with `accounts` rows at balance 0.
pub(crate) async fn create_accounts(pool: &PgPool, accounts: i64) -> anyhow::Result<()> {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
         INSERT INTO bench_accounts SELECT g, 0 FROM generate_series(0, {}) g;",
        accounts - 1
    )))
    .execute(pool)
    .await?;
    sqlx::raw_sql("VACUUM ANALYZE bench_accounts")
        .execute(pool)
        .await?;
    Ok(())
}

impl Setup {
    /// The processor over `store`, which [`bench_store`] made with `accounts` accounts, and
    /// on tokio-postgres a pool of `connections` to `url` (the same database).
    pub(crate) async fn new(
        store: PgStore,
        accounts: i64,
        url: &str,
        connections: usize,
    ) -> anyhow::Result<Self> {
        let consumer = ConsumerName::new("bench")?;
        let processor = Processor::with_config(
            store.clone(),
            consumer,
            Credit { accounts },
            ProcessorConfig::default(),
        );
        processor.ensure_ready().await?;
        let tokio = crate::variants_tokio::TokioSetup::new(url, connections, accounts).await?;
        let diesel = crate::variants_diesel::DieselSetup::new(url, connections, accounts).await?;
        let sea = crate::variants_sea_orm::SeaSetup::new(url, connections, accounts).await?;
        let worker = crate::variants_worker::Drain::new(
            &store,
            "bench-sqlx-worker",
            crate::variants_worker::SqlxRowCredit { accounts },
        )
        .await?;
        Ok(Self {
            store,
            accounts,
            processor,
            tokio,
            diesel,
            sea,
            worker,
        })
    }

    pub(crate) fn store(&self) -> &PgStore {
        &self.store
    }

    /// Runs `variant` on `workers` tasks for `dur`; returns messages completed.
    pub(crate) async fn run(
        &self,
        variant: Variant,
        workers: usize,
        dur: Duration,
    ) -> anyhow::Result<u64> {
        let processor = self.processor.clone();
        let pool = self.store.pool().clone();
        let (tokio_processor, tokio_pool) = (self.tokio.processor(), self.tokio.pool());
        let (diesel_processor, diesel_store) = (self.diesel.processor(), self.diesel.store());
        let (sea_processor, sea_store) = (self.sea.processor(), self.sea.store());
        let drains = (
            self.worker.clone(),
            self.tokio.worker(),
            self.diesel.worker(),
            self.sea.worker(),
        );
        let accounts = self.accounts;
        let claim = store_sql(include_str!("../../inboxed-postgres/sql/claim.sql"));
        let settle = store_sql(include_str!(
            "../../inboxed-postgres/sql/clear_attempts.sql"
        ));
        let (n, _) = crate::load::for_duration(workers, dur, move || {
            let (processor, pool) = (processor.clone(), pool.clone());
            let (tokio_processor, tokio_pool) = (tokio_processor.clone(), tokio_pool.clone());
            let (diesel_processor, diesel_store) = (diesel_processor.clone(), diesel_store.clone());
            let (sea_processor, sea_store) = (sea_processor.clone(), sea_store.clone());
            let drains = drains.clone();
            let (claim, settle) = (claim.clone(), settle.clone());
            async move {
                let id = MessageId::from_uuid(uuid::Uuid::now_v7());
                let env = Envelope::new(id, b"{\"credit\":1}".to_vec());
                match variant {
                    Variant::Processor => {
                        processor.process(&env, Some(1)).await?;
                    }
                    Variant::RawSqlx | Variant::RawNoSettle => {
                        let mut tx = pool.begin_with(BEGIN).await?;
                        sqlx::query(AssertSqlSafe(claim))
                            .bind("bench")
                            .bind(env.id().as_str())
                            .bind(inboxed_postgres::message_key(env.id().as_str()))
                            .bind(env.hash().fingerprint().cast_signed())
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(UPDATE)
                            .bind(fastrand::i64(0..accounts))
                            .execute(&mut *tx)
                            .await?;
                        if matches!(variant, Variant::RawSqlx) {
                            sqlx::query(AssertSqlSafe(settle))
                                .bind("bench")
                                .bind(env.id().as_str())
                                .execute(&mut *tx)
                                .await?;
                        }
                        tx.commit().await?;
                    }
                    Variant::BusinessOnly => business_only(&pool, accounts).await?,
                    Variant::TokioProcessor => {
                        tokio_processor.process(&env, Some(1)).await?;
                    }
                    Variant::TokioBusinessOnly => {
                        crate::variants_tokio::business_only(&tokio_pool, accounts).await?;
                    }
                    Variant::DieselProcessor => {
                        diesel_processor.process(&env, Some(1)).await?;
                    }
                    Variant::DieselBusinessOnly => {
                        crate::variants_diesel::business_only(&diesel_store, accounts).await?;
                    }
                    Variant::SeaProcessor => {
                        sea_processor.process(&env, Some(1)).await?;
                    }
                    Variant::SeaBusinessOnly => {
                        crate::variants_sea_orm::business_only(&sea_store, accounts).await?;
                    }
                    Variant::SqlxWorker => return drains.0.once().await,
                    Variant::TokioWorker => return drains.1.once().await,
                    Variant::DieselWorker => return drains.2.once().await,
                    Variant::SeaWorker => return drains.3.once().await,
                }
                Ok(1)
            }
        })
        .await?;
        Ok(n)
    }
}
