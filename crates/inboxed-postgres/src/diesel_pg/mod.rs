//! The inbox on diesel-async (feature `diesel-async`): for a service whose handlers write
//! through diesel's `AsyncPgConnection` rather than sqlx.
//!
//! ```no_run
//! use diesel::sql_types::BigInt;
//! use diesel_async::RunQueryDsl;
//! use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor, ResultExt};
//! use inboxed_postgres::diesel_pg::{Connection, DieselPgStore, DieselPostgres};
//!
//! struct Billing;
//!
//! impl Handler<DieselPostgres> for Billing {
//!     async fn handle(&self, msg: &Envelope, conn: &mut Connection) -> Result<(), HandlerError> {
//!         let cents: i64 = msg.json().permanent()?;
//!         diesel::sql_query("UPDATE accounts SET balance = balance - $1 WHERE id = 1")
//!             .bind::<BigInt, _>(cents)
//!             .execute(&mut **conn)
//!             .await?;
//!         Ok(())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = DieselPgStore::connect("postgres://app@localhost/app", 10)?;
//! store.migrate().await?;
//! let processor = Processor::new(store, ConsumerName::new("billing")?, Billing);
//! processor.ensure_ready().await?; // checks durability, registers the consumer
//! # Ok(()) }
//! ```
//!
//! The transaction the library begins is diesel's own (its transaction manager counts it), so
//! the handler's `conn.transaction(|conn| …)` is a savepoint inside the inbox transaction, as
//! it would be inside any transaction of diesel's.

mod driver;
mod engine;
mod store;

pub use driver::{Connection, DieselPostgres, Savepoint, Transaction};
pub use store::DieselPgStore;
