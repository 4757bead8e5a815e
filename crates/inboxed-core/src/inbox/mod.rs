//! The store-then-process inbox.
//!
//! Receipt ([`Inbox::store`], or [`Inbox::store_many`] for a batch in one transaction) only
//! stores the raw message and commits; the caller then acks. [`Worker`]s claim stored rows in
//! batches with `FOR UPDATE SKIP LOCKED` (an atomic `UPDATE … RETURNING` under `BEGIN IMMEDIATE`
//! on SQLite), run the handler (a batch handler for the whole batch at once, `handle` for each
//! row in a transaction of its own), and mark each row done in the same transaction as the
//! handler's writes. Claims
//! are leases with a token: a heartbeat extends them, the [`Reaper`] returns expired ones, and
//! completion checks the token, so a worker whose lease was taken away cannot also complete.
//!
//! Use it when handlers are slower than the broker's ack timeout, when you want to replay
//! stored messages after a fix, or when one aggregate's messages must be processed in arrival
//! order ([`WorkerConfig::ordered`]).

mod batch;
mod config;
mod guards;
mod limits;
mod locked;
mod outcomes;
mod pace;
mod reaper;
mod receipt;
mod relay;
mod replay;
mod rows;
pub mod store;
mod wake;
mod worker;

pub use config::{ClaimMode, OnDead, WorkerConfig};
pub use reaper::{Reaper, ReaperConfig};
pub use receipt::Inbox;
pub use relay::{InboxRelay, InboxRelayConfig, Relayed, relay_batch, relay_one};
pub use store::{Enqueued, InboxStore, Replayed, Selector};
pub use wake::LocalWakers;
pub use worker::{BatchReport, Worker};
