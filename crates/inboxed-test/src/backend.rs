//! The real engines the suite runs on, each behind the same small trait (`pg.rs`, `lite.rs`,
//! `parted.rs`), and the database each test gets.

use std::future::Future;

use inboxed_core::Store;
use inboxed_core::driver::Driver;
use inboxed_core::inbox::InboxStore;

/// The connection type a backend's handler writes through.
pub type Conn<B> = <<<B as Backend>::Store as Store>::Db as Driver>::Connection;

/// A database engine under test. Internal to the suite.
pub trait Backend: Send + Sync + Sized + 'static {
    /// The store.
    type Store: InboxStore
        + inboxed_core::retention::RetentionStore
        + inboxed_core::observe::ObserveStore
        + inboxed_core::outbox::store::OutboxStore;
    /// Name used in test output.
    const NAME: &'static str;
    /// Writers serialize at `BEGIN` (SQLite), so a concurrent duplicate waits there, not at
    /// the claim, and the barrier belongs before `begin`.
    const SERIAL_WRITERS: bool;
    /// Whether the store sees a worker's death (its session ending) and its reaper returns the
    /// dead worker's rows at once (PostgreSQL), or only when their lease expires (SQLite).
    const WORKER_LIVENESS: bool;
    /// Whether idle workers of other processes are woken through the database (PostgreSQL's
    /// `LISTEN/NOTIFY`), or poll (SQLite, MySQL).
    const NOTIFIES: bool;

    /// Whether a failed statement aborts the whole transaction (PostgreSQL) or only itself
    /// (SQLite).
    const FAILED_STATEMENT_ABORTS_TRANSACTION: bool;
    /// Counts the processed rows of the store made by [`Backend::namespaced`].
    const NAMESPACED_PROCESSED_COUNT: &'static str;

    /// A fresh, migrated database with the `ledger` and `accounts` tables.
    fn create() -> impl Future<Output = TestDb<Self>> + Send;
    /// Connects to a database created by [`Backend::create`] (from a child process).
    fn attach(locator: &str) -> impl Future<Output = Self::Store> + Send;
    /// Makes the database's commits non-durable (for the refusal test); returns a new store.
    fn make_non_durable(db: &TestDb<Self>) -> impl Future<Output = Self::Store> + Send;
    /// Locks inbox row `id` in a transaction of its own, held until the returned value drops
    /// (PostgreSQL; SQLite has no row locks and never calls it).
    fn lock_inbox_row(
        store: &Self::Store,
        id: i64,
    ) -> impl Future<Output = <<Self::Store as Store>::Db as Driver>::Transaction> + Send;
    /// Blocks the purge of processed key `id` until the returned transaction drops
    /// (PostgreSQL: a row lock on it; SQLite: the database's write lock).
    fn block_processed_key(
        store: &Self::Store,
        id: &'static str,
    ) -> impl Future<Output = <<Self::Store as Store>::Db as Driver>::Transaction> + Send;
    /// Moves the received time of the processed keys whose id starts with `prefix` `days`
    /// days into the past.
    fn age_processed(
        store: &Self::Store,
        prefix: &'static str,
        days: i64,
    ) -> impl Future<Output = ()> + Send;
    /// Refreshes the planner statistics of the processed-messages table.
    fn analyze(store: &Self::Store) -> impl Future<Output = ()> + Send;
    /// Removes the database of a passing test.
    fn drop_db(db: TestDb<Self>) -> impl Future<Output = ()> + Send;
    /// A store on the same database in another namespace (not migrated yet).
    fn namespaced(db: &TestDb<Self>) -> impl Future<Output = Self::Store> + Send;
    /// Runs statements without parameters, separated by `;` (a reset of the business tables).
    fn execute(store: &Self::Store, sql: &'static str) -> impl Future<Output = ()> + Send;
    /// Runs a statement without parameters that returns one integer.
    fn scalar(store: &Self::Store, sql: &'static str) -> impl Future<Output = i64> + Send;
    /// Committed rows for `id` in the processed and dead-letter tables, seen from the pool.
    fn settled_rows(store: &Self::Store, id: &str) -> impl Future<Output = i64> + Send;
    /// The largest amount in the ledger for `account` (0 when none), inside the transaction.
    fn ledger_last(
        conn: &mut Conn<Self>,
        account: &str,
    ) -> impl Future<Output = Result<i64, sqlx::Error>> + Send;
    /// Appends a ledger row, inside the inbox transaction.
    fn ledger_insert(
        conn: &mut Conn<Self>,
        id: &str,
        account: &str,
        amount: i64,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Inserts a row whose deferred foreign key has no parent: the statement succeeds and the
    /// transaction's COMMIT fails.
    fn orphan_insert(conn: &mut Conn<Self>)
    -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// A statement that fails (a duplicate primary key), for handlers that swallow its error.
    fn failing_statement(
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// A connection of the store's pool, outside any transaction.
    fn acquire(
        store: &Self::Store,
    ) -> impl Future<Output = impl std::ops::DerefMut<Target = Conn<Self>> + Send> + Send;
    /// Runs a statement without parameters through the handler's connection (a `COMMIT` of
    /// the handler's own, say).
    fn run_on(
        conn: &mut Conn<Self>,
        sql: &'static str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Read-modify-write of an account balance, the shape that loses updates without isolation.
    fn balance_rmw(
        conn: &mut Conn<Self>,
        account: &str,
        amount: i64,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// A driver's error as the backends' handler helpers return errors: the `sqlx::Error` the
/// library's classification carries it in (`StoreError::from_tokio_postgres`,
/// `StoreError::from_diesel`), so that its SQLSTATE classifies it as on sqlx.
pub(crate) fn carried(e: inboxed_core::StoreError) -> sqlx::Error {
    use inboxed_core::StoreError;
    match e {
        StoreError::Serialization(e)
        | StoreError::Deadlock(e)
        | StoreError::Timeout(e)
        | StoreError::Busy(e)
        | StoreError::Unavailable(e)
        | StoreError::UniqueViolation(e)
        | StoreError::TransactionEnded(e)
        | StoreError::Database(e) => e,
        other => sqlx::Error::Protocol(other.to_string()),
    }
}

/// A database for one test. Dropped after a passing test by [`TestDb::finish`]; kept after a
/// failing one (the test panics before `finish`) and swept by a later run.
#[derive(Debug)]
pub struct TestDb<B: Backend> {
    /// The migrated store.
    pub store: B::Store,
    /// How a child process finds the same database: a URL or a file path.
    pub locator: String,
    pub(crate) _dir: Option<tempfile::TempDir>,
}

impl<B: Backend> TestDb<B> {
    /// The same database seen as another backend of the same store type.
    pub(crate) fn retype<C: Backend<Store = B::Store>>(self) -> TestDb<C> {
        TestDb {
            store: self.store,
            locator: self.locator,
            _dir: self._dir,
        }
    }

    /// A handle on the same database as another backend of the same store type, for
    /// delegating to it (the temporary directory, if any, stays with `self`).
    pub(crate) fn view_as<C: Backend<Store = B::Store>>(&self) -> TestDb<C> {
        TestDb {
            store: self.store.clone(),
            locator: self.locator.clone(),
            _dir: None,
        }
    }

    /// Removes the database of a passing test. A failing test panics before calling this, so
    /// its database stays for inspection (PostgreSQL: swept an hour later by a later run).
    pub async fn finish(self) {
        B::drop_db(self).await;
    }

    /// Runs a scalar query.
    pub async fn scalar(&self, sql: &'static str) -> i64 {
        B::scalar(&self.store, sql).await
    }
}

/// The test schema: a ledger the scripted handler writes, accounts, and a deferred foreign key.
pub const LEDGER: &str =
    "CREATE TABLE ledger (message_id TEXT NOT NULL, account TEXT NOT NULL, amount BIGINT NOT NULL);
CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL);
CREATE TABLE fk_parent (id BIGINT PRIMARY KEY);
CREATE TABLE fk_child (parent BIGINT REFERENCES fk_parent (id) DEFERRABLE INITIALLY DEFERRED);
INSERT INTO accounts (id, balance) VALUES ('a', 0), ('b', 0);";
