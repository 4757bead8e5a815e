//! [`MyParted`]: MySQL or MariaDB with the time-partitioned dedup table
//! (`MySqlStore::partitioned`), so that the processor's guarantee cases run against it
//! unchanged. The cases read `inboxed_processed_messages` directly; here that name is a view
//! of `inboxed_processed_log`.

use std::time::Duration;

use inboxed_core::retention::PartitionConfig;
use inboxed_mysql::MySqlStore;
use sqlx::MySqlConnection;

use crate::backend::{Backend, TestDb};
use crate::my::My;

/// MySQL in partitioned mode.
#[derive(Debug)]
pub struct MyParted;

fn parted(store: &MySqlStore) -> MySqlStore {
    store.clone().partitioned(
        PartitionConfig::default()
            .interval(Duration::from_secs(24 * 3600))
            .ahead(2),
    )
}

impl Backend for MyParted {
    type Store = MySqlStore;
    const NAME: &'static str = "mysql-partitioned";
    const SERIAL_WRITERS: bool = My::SERIAL_WRITERS;
    const WORKER_LIVENESS: bool = My::WORKER_LIVENESS;
    const NOTIFIES: bool = My::NOTIFIES;
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool = My::FAILED_STATEMENT_ABORTS_TRANSACTION;
    const NAMESPACED_PROCESSED_COUNT: &'static str = My::NAMESPACED_PROCESSED_COUNT;

    async fn create() -> TestDb<Self> {
        let mut db = My::create().await.retype::<Self>();
        db.store = parted(&db.store);
        db.store.migrate().await.expect("partitions");
        sqlx::raw_sql(
            "DROP TABLE inboxed_processed_messages;
             CREATE VIEW inboxed_processed_messages AS SELECT * FROM inboxed_processed_log;",
        )
        .execute(db.store.pool())
        .await
        .expect("view of the partitioned table");
        db
    }

    async fn attach(locator: &str) -> MySqlStore {
        parted(&My::attach(locator).await)
    }

    async fn make_non_durable(db: &TestDb<Self>) -> MySqlStore {
        parted(&My::make_non_durable(&db.view_as()).await)
    }

    async fn lock_inbox_row(
        store: &MySqlStore,
        id: i64,
    ) -> sqlx::Transaction<'static, sqlx::MySql> {
        My::lock_inbox_row(store, id).await
    }

    async fn block_processed_key(
        store: &MySqlStore,
        id: &'static str,
    ) -> sqlx::Transaction<'static, sqlx::MySql> {
        My::block_processed_key(store, id).await
    }

    async fn age_processed(store: &MySqlStore, prefix: &'static str, days: i64) {
        My::age_processed(store, prefix, days).await;
    }

    async fn analyze(store: &MySqlStore) {
        sqlx::raw_sql("ANALYZE TABLE inboxed_processed_log")
            .execute(store.pool())
            .await
            .expect("analyze");
    }

    async fn drop_db(db: TestDb<Self>) {
        My::drop_db(db.retype()).await;
    }

    async fn namespaced(db: &TestDb<Self>) -> MySqlStore {
        My::namespaced(&db.view_as()).await
    }

    async fn execute(store: &MySqlStore, sql: &'static str) {
        My::execute(store, sql).await;
    }

    async fn scalar(store: &MySqlStore, sql: &'static str) -> i64 {
        My::scalar(store, sql).await
    }

    async fn settled_rows(store: &MySqlStore, id: &str) -> i64 {
        My::settled_rows(store, id).await
    }

    async fn ledger_last(conn: &mut MySqlConnection, account: &str) -> Result<i64, sqlx::Error> {
        My::ledger_last(conn, account).await
    }

    async fn ledger_insert(
        conn: &mut MySqlConnection,
        id: &str,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        My::ledger_insert(conn, id, account, amount).await
    }

    async fn orphan_insert(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
        My::orphan_insert(conn).await
    }

    async fn failing_statement(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
        My::failing_statement(conn).await
    }

    async fn acquire(
        store: &MySqlStore,
    ) -> impl std::ops::DerefMut<Target = sqlx::MySqlConnection> + Send {
        My::acquire(store).await
    }

    async fn run_on(conn: &mut MySqlConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        My::run_on(conn, sql).await
    }

    async fn balance_rmw(
        conn: &mut MySqlConnection,
        account: &str,
        amount: i64,
    ) -> Result<(), sqlx::Error> {
        My::balance_rmw(conn, account, amount).await
    }
}
