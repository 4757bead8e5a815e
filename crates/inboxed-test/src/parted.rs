//! [`PgParted`]: PostgreSQL with the time-partitioned dedup table (`PgStore::partitioned`), so
//! the processor's guarantee cases run against it unchanged. The cases read
//! `inboxed_processed_messages` directly; here that name is a view of `inboxed_processed_log`.

use std::time::Duration;

use inboxed_core::retention::PartitionConfig;
use inboxed_postgres::PgStore;
use sqlx::PgConnection;

use crate::backend::{Backend, TestDb};
use crate::pg::Pg;

/// PostgreSQL in partitioned mode.
#[derive(Debug)]
pub struct PgParted;

fn parted(store: &PgStore) -> PgStore {
    PgStore::new(store.pool().clone()).partitioned(
        PartitionConfig::default()
            .interval(Duration::from_secs(24 * 3600))
            .ahead(2),
    )
}

impl Backend for PgParted {
    type Store = PgStore;
    const NAME: &'static str = "postgres-partitioned";
    const SERIAL_WRITERS: bool = false;
    const WORKER_LIVENESS: bool = true;
    const NOTIFIES: bool = true;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = true;
    const NAMESPACED_PROCESSED_COUNT: &'static str = Pg::NAMESPACED_PROCESSED_COUNT;

    async fn create() -> TestDb<Self> {
        let mut db = Pg::create().await.retype::<Self>();
        db.store = parted(&db.store);
        db.store.migrate().await.expect("partitions");
        sqlx::raw_sql(
            "DROP TABLE inboxed_processed_messages CASCADE;
             CREATE VIEW inboxed_processed_messages AS SELECT * FROM inboxed_processed_log;",
        )
        .execute(db.store.pool())
        .await
        .expect("view of the partitioned table");
        db
    }

    async fn attach(locator: &str) -> PgStore {
        parted(&Pg::attach(locator).await)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> PgStore {
        parted(&Pg::make_non_durable(&db.view_as()).await)
    }

    async fn lock_inbox_row(
        store: &PgStore,
        id: i64,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        Pg::lock_inbox_row(store, id).await
    }

    async fn block_processed_key(
        store: &PgStore,
        id: &'static str,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        Pg::block_processed_key(store, id).await
    }

    async fn age_processed(store: &PgStore, prefix: &'static str, days: i64) {
        Pg::age_processed(store, prefix, days).await;
    }

    async fn analyze(store: &PgStore) {
        sqlx::raw_sql("ANALYZE inboxed_processed_log")
            .execute(store.pool())
            .await
            .expect("analyze");
    }

    async fn drop_db(db: TestDb<Self>) {
        Pg::drop_db(db.retype()).await;
    }

    async fn namespaced(db: &TestDb<Self>) -> PgStore {
        Pg::namespaced(&db.view_as()).await
    }

    async fn execute(store: &PgStore, sql: &'static str) {
        Pg::execute(store, sql).await;
    }

    async fn scalar(store: &PgStore, sql: &'static str) -> i64 {
        Pg::scalar(store, sql).await
    }

    async fn settled_rows(store: &PgStore, id: &str) -> i64 {
        Pg::settled_rows(store, id).await
    }

    async fn ledger_last(conn: &mut PgConnection, account: &str) -> Result<i64, sqlx::Error> {
        Pg::ledger_last(conn, account).await
    }

    async fn ledger_insert(
        conn: &mut PgConnection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        Pg::ledger_insert(conn, id, account, amount).await
    }

    async fn orphan_insert(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        Pg::orphan_insert(conn).await
    }

    async fn failing_statement(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        Pg::failing_statement(conn).await
    }

    async fn acquire(
        store: &PgStore,
    ) -> impl std::ops::DerefMut<Target = sqlx::PgConnection> + Send {
        Pg::acquire(store).await
    }

    async fn run_on(conn: &mut PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        Pg::run_on(conn, sql).await
    }

    async fn balance_rmw(
        conn: &mut PgConnection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        Pg::balance_rmw(conn, account, amount).await
    }
}
