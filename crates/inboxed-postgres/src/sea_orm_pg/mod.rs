//! The inbox on SeaORM 2 (feature `sea-orm`): for a service whose handlers write through
//! SeaORM rather than sqlx directly.
//!
//! ```no_run
//! use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ResultExt};
//! use inboxed_postgres::sea_orm_pg::{Connection, SeaOrmPgStore, SeaOrmPostgres};
//! use sea_orm::{ConnectionTrait, DbBackend, Statement};
//!
//! struct Billing;
//!
//! impl Handler<SeaOrmPostgres> for Billing {
//!     async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
//!         let cents: i64 = msg.json().permanent()?;
//!         conn.execute_raw(Statement::from_sql_and_values(
//!             DbBackend::Postgres,
//!             "UPDATE accounts SET balance = balance - $1 WHERE id = 1",
//!             [cents.into()],
//!         ))
//!         .await?;
//!         Ok(())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let db = sea_orm::Database::connect("postgres://app@localhost/app").await?;
//! let store = SeaOrmPgStore::new(db)?;
//! store.migrate().await?;
//! let processor = Processor::new(store, ConsumerName::new("billing")?, Billing);
//! processor.ensure_ready().await?; // checks durability, registers the consumer
//! # Ok(()) }
//! ```
//!
//! The transaction the library begins is SeaORM's own, so SeaORM's entities and queries run on
//! the handler's connection (`Entity::find().all(&*conn)`), and its `conn.transaction(…)` or
//! `conn.begin()` is a savepoint inside the inbox transaction. A nested transaction ends
//! inside the handler: dropped, it rolls back to its savepoint; kept past the handler (moved
//! into a spawned task), SeaORM's commit would release it instead of committing.
//!
//! SeaORM begins with a bare `BEGIN`, so the transaction's settings and the claim's key locks
//! follow in a round trip of their own: one more than [`PgStore`](crate::PgStore)'s. What
//! runs outside a transaction (a worker's liveness session, single statements, `LISTEN`) goes
//! through the sqlx pool beneath SeaORM.

mod driver;
mod engine;
mod store;

pub use driver::{Connection, Savepoint, SeaOrmPostgres, Transaction};
pub use store::SeaOrmPgStore;
