//! Checks that attack *your* inboxed handler on your real database.
//!
//! The inbox makes the library exactly-once; it cannot make a handler so. A handler that
//! writes through a second connection, commits on its own, reads a balance and writes it back
//! without a lock, or sends an email from inside the transaction breaks exactly-once without a
//! word. These checks find that, from your own `#[tokio::test]`, against the engine you run
//! (PostgreSQL, MySQL/MariaDB, SQLite), through the library's real processor: never a mock.
//!
//! You give the kit your store (on a test database), your handler, a `reset` that puts your
//! business tables back as each run starts, and a `probe` that reads the business state into a
//! comparable value. Each check then attacks one delivery of a message and compares the state
//! the probe reads with the state one plain delivery leaves:
//!
//! | check | the attack |
//! |---|---|
//! | [`Kit::sequential_duplicates`] | the message again after it was processed, then N times |
//! | [`Kit::concurrent_duplicates`] | N copies released together on separate connections |
//! | [`Kit::first_holder_rolls_back`] | three copies; the first to hold the key rolls back after its handler ran |
//! | [`Kit::crash_before_commit`] | the transaction killed after the handler returned, then redelivered |
//! | [`Kit::crash_between_commit_and_ack`] | committed, the ack lost, redelivered |
//! | [`Kit::contention`] | a serialization failure and a deadlock raised by the engine at the claim, inside the handler, at commit: retried in process |
//! | [`Kit::poison`] | failing after the handler every time: dead-lettered, with no effect at all |
//! | [`Kit::conflict`] | the same id with another payload: a conflict, no second effect |
//! | [`Kit::concurrent_messages`] | distinct messages at once against one after another (lost updates) |
//! | [`Kit::batches`] | distinct messages as one batch through `handle_batch`: each twice, killed before the commit, failing after it (redone one at a time) |
//! | [`Kit::worker_duplicates`] | stored several times, and again once done, then drained by a `Worker` |
//! | [`Kit::worker_crash_before_commit`] | a worker killed before its commit; its row reaped and processed by another |
//! | [`Kit::worker_lease_expires`] | a lease expiring under a running handler; the row taken by another worker, the first completion fenced |
//! | [`Kit::worker_batches`] | distinct messages claimed as one batch of rows (through `handle_batch` when the handler has one), the worker killed before the commit |
//! | [`Kit::worker_poison`] | a row failing after the handler every time: dead, with no effect |
//!
//! [`Kit::check_all`] runs the processor's checks on one message (all but `concurrent_messages`
//! and `batches`, which need several), [`Kit::check_all_workers`] the `worker_*` ones on one
//! message (all but `worker_batches`), for a store-then-process handler; both report every
//! failure, each naming the property that broke, the two states, and the usual cause. A check
//! fails as "could not run" (and never passes) when it could not attack: a probe that does not
//! see the handler's effect, a fault the engine would not raise, a lease that was not fenced.
//!
//! [`Chaos`] is the process-level harness: your consumer binary killed with SIGKILL at random
//! points while a producer publishes through your real broker, then your ledger audited.
//!
//! ```no_run
//! # async fn example(store: inboxed_sqlite::SqliteStore) -> Result<(), Box<dyn std::error::Error>> {
//! use inboxed_core::{Envelope, Handler, HandlerError, MessageId};
//! use inboxed_testkit::Kit;
//! use sqlx::{Sqlite, SqliteConnection};
//!
//! struct Credit;
//!
//! impl Handler<Sqlite> for Credit {
//!     async fn handle(&self, _msg: &Envelope, conn: &mut SqliteConnection) -> Result<(), HandlerError> {
//!         sqlx::query("UPDATE accounts SET balance = balance + 1 WHERE id = 'a'")
//!             .execute(&mut *conn)
//!             .await?;
//!         Ok(())
//!     }
//! }
//!
//! let kit = Kit::new(
//!     store,
//!     Credit,
//!     |store: inboxed_sqlite::SqliteStore| async move {
//!         sqlx::query("UPDATE accounts SET balance = 0").execute(store.pool()).await.map(drop)
//!     },
//!     |store: inboxed_sqlite::SqliteStore| async move {
//!         sqlx::query_scalar::<_, i64>("SELECT balance FROM accounts WHERE id = 'a'")
//!             .fetch_one(store.pool())
//!             .await
//!     },
//! );
//! let msg = Envelope::new(MessageId::new("credit-1")?, br#"{"amount": 1}"#.to_vec());
//! kit.check_all(&msg).await?;
//! # Ok(())
//! # }
//! ```

mod batch_checks;
mod chaos;
mod checks;
mod contention;
mod failure;
mod fault;
pub mod hooks;
mod kit;
mod worker_checks;

pub use chaos::{Chaos, ChaosConfig, ChaosFailure, ChaosReport};
pub use failure::{CheckFailure, Report};
pub use kit::{Kit, KitConfig};
