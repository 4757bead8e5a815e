//! The inbox on tokio-postgres (feature `tokio-postgres`): for a service whose handlers write
//! through a deadpool-postgres pool rather than sqlx.
//!
//! ```no_run
//! use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ResultExt};
//! use inboxed_postgres::tokio_pg::{Connection, TokioPgStore, TokioPostgres};
//!
//! struct Billing;
//!
//! impl Handler<TokioPostgres> for Billing {
//!     async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
//!         let cents: i64 = msg.json().permanent()?;
//!         conn.execute("UPDATE accounts SET balance = balance - $1 WHERE id = 1", &[&cents])
//!             .await?;
//!         Ok(())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = TokioPgStore::connect("postgres://app@localhost/app", 10)?;
//! store.migrate().await?;
//! let processor = Processor::new(store, ConsumerName::new("billing")?, Billing);
//! processor.ensure_ready().await?; // checks durability, registers the consumer
//! # Ok(()) }
//! ```
//!
//! What differs from [`PgStore`](crate::PgStore): tokio-postgres sends a statement without
//! waiting for the answer to the one before, so a message's transaction costs the round trips
//! of the business change alone: the claim goes with the `BEGIN`, the settling statement with
//! the `COMMIT`.

mod driver;
mod engine;
mod inbox;
mod listen;
mod store;

pub use driver::{Connection, Savepoint, TokioPostgres, Transaction};
pub use store::TokioPgStore;
