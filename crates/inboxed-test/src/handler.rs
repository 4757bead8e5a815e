//! A ledger handler whose behaviour is scripted by the payload, so one handler serves every
//! case: plain writes, read-modify-write, permanent and transient failures, panics, aborts,
//! hangs and slow transactions.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use inboxed_core::driver::Transaction as _;
use inboxed_core::store::BeginParams;
use inboxed_core::{Envelope, Handler, HandlerError, MessageId, ResultExt, Store};

use crate::backend::{Backend, Conn};

/// What the handler does for one message. Serialized into the payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Script {
    /// Account to credit.
    pub account: String,
    /// Amount.
    pub amount: i64,
    /// Credit through a read-modify-write of `accounts` instead of appending to `ledger`.
    pub rmw: bool,
    /// Sleep this long after writing, holding the transaction open.
    pub sleep_ms: u64,
    /// After writing, run a statement that fails and ignore its error (a handler bug).
    pub swallow: bool,
    /// After writing, violate a deferred foreign key: the handler succeeds, COMMIT fails.
    pub commit_fails: bool,
    /// Fail transiently (after writing) while the handler's call count is at most this.
    pub fail_first: u32,
    /// With `fail_first`: ask to be retried after this many milliseconds
    /// (`HandlerError::retry_after`) instead of failing transiently.
    pub retry_after_ms: u64,
    /// Fail after writing: `permanent`, `transient` or `panic`.
    pub fail: Option<String>,
    /// Abort the whole process before writing (a poison message that kills its consumer).
    pub abort: bool,
    /// Fail transiently (after writing) with this probability.
    pub flaky: f64,
    /// Before writing, check that the ledger's last amount for `account` is `amount - 1`
    /// (per-aggregate sequence), failing permanently otherwise.
    pub check_order: bool,
    /// Fail permanently while the handler's `broken` switch is on.
    pub fail_while_broken: bool,
    /// In a child process started with `INBOXED_HANG=1`: after writing, print `inboxed-child: in-handler <id>`
    /// and hang, so the parent can kill the process before the commit.
    pub hang: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            account: "a".into(),
            amount: 1,
            rmw: false,
            sleep_ms: 0,
            swallow: false,
            commit_fails: false,
            fail_first: 0,
            retry_after_ms: 0,
            fail: None,
            abort: false,
            flaky: 0.0,
            check_order: false,
            fail_while_broken: false,
            hang: false,
        }
    }
}

impl Script {
    /// A message with this script as its payload.
    #[must_use]
    pub fn message(&self, id: &str) -> Envelope {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        Envelope::new(MessageId::new(id).expect("valid test id"), payload)
    }
}

/// A message crediting `amount` to account `a`.
#[must_use]
pub fn credit(id: &str, amount: i64) -> Envelope {
    Script {
        amount,
        ..Script::default()
    }
    .message(id)
}

/// The scripted ledger handler. `calls` counts every invocation, across clones.
#[derive(Debug)]
pub struct Ledger<B> {
    /// Invocations so far.
    pub calls: Arc<AtomicU32>,
    /// While on, messages scripted with `fail_while_broken` fail permanently.
    pub broken: Arc<std::sync::atomic::AtomicBool>,
    /// Calls of `handle_batch`, across clones.
    pub batches: Arc<AtomicU32>,
    /// While on, every message fails transiently before writing anything: the downstream
    /// service the handler calls is down.
    pub downstream_down: Arc<std::sync::atomic::AtomicBool>,
    _backend: PhantomData<fn() -> B>,
}

impl<B> Clone for Ledger<B> {
    fn clone(&self) -> Self {
        Self {
            calls: Arc::clone(&self.calls),
            broken: Arc::clone(&self.broken),
            batches: Arc::clone(&self.batches),
            downstream_down: Arc::clone(&self.downstream_down),
            _backend: PhantomData,
        }
    }
}

impl<B> Default for Ledger<B> {
    fn default() -> Self {
        Self {
            calls: Arc::default(),
            broken: Arc::default(),
            batches: Arc::default(),
            downstream_down: Arc::default(),
            _backend: PhantomData,
        }
    }
}

impl<B> Ledger<B> {
    /// Invocations so far.
    #[must_use]
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// `handle_batch` calls so far.
    #[must_use]
    pub fn batches(&self) -> u32 {
        self.batches.load(Ordering::SeqCst)
    }
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for Ledger<B> {
    const BATCHES: bool = true;

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut Conn<B>,
    ) -> Result<(), HandlerError> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        for msg in msgs {
            self.handle(msg, conn).await?;
        }
        Ok(())
    }

    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let script: Script = msg.json().permanent()?;
        if script.abort {
            std::process::abort();
        }
        if self.downstream_down.load(Ordering::SeqCst) {
            return Err(HandlerError::transient("downstream service unavailable"));
        }
        if script.fail_while_broken && self.broken.load(Ordering::SeqCst) {
            return Err(HandlerError::permanent("scripted failure while broken"));
        }
        if script.check_order {
            let last = B::ledger_last(conn, &script.account).await?;
            if last != script.amount - 1 {
                return Err(HandlerError::permanent(format!(
                    "out of order: {} after {last} for {}",
                    script.amount, script.account
                )));
            }
        }
        if script.rmw {
            B::balance_rmw(conn, &script.account, script.amount).await?;
        } else {
            B::ledger_insert(conn, msg.id().as_str(), &script.account, script.amount).await?;
        }
        if script.commit_fails {
            B::orphan_insert(conn).await?;
        }
        if script.swallow {
            let _ignored = B::failing_statement(conn).await;
        }
        if script.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(script.sleep_ms)).await;
        }
        if script.hang && std::env::var_os("INBOXED_HANG").is_some() {
            println!("inboxed-child: in-handler {}", msg.id());
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        if script.flaky > 0.0 && fastrand::f64() < script.flaky {
            return Err(HandlerError::transient("scripted flaky failure"));
        }
        if call <= script.fail_first && script.retry_after_ms > 0 {
            return Err(HandlerError::retry_after(
                Duration::from_millis(script.retry_after_ms),
                format!("scripted retry-after on call {call}"),
            ));
        }
        if call <= script.fail_first {
            return Err(HandlerError::transient(format!(
                "scripted transient failure on call {call}"
            )));
        }
        match script.fail.as_deref() {
            Some("permanent") => Err(HandlerError::permanent("scripted permanent failure")),
            Some("transient") => Err(HandlerError::transient("scripted transient failure")),
            Some("panic") => panic!("scripted panic"),
            _ => Ok(()),
        }
    }
}

/// A known-bad handler: writes its ledger row through a transaction of its own on another
/// connection of the pool, committed at once (the classic way to step outside the inbox's
/// transaction), then sleeps the script's `sleep_ms` inside the inbox's. A kill or a rollback
/// after its own commit leaves the row, and the redelivery writes another.
#[derive(Debug)]
pub struct SecondConnection<B: Backend> {
    /// The store whose pool the second connection comes from.
    pub store: B::Store,
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for SecondConnection<B> {
    async fn handle(&self, msg: &Envelope, _conn: &mut Conn<B>) -> Result<(), HandlerError> {
        let script: Script = msg.json().permanent()?;
        let mut tx = self
            .store
            .begin(&BeginParams::default())
            .await
            .map_err(HandlerError::transient)?;
        B::ledger_insert(&mut tx, msg.id().as_str(), &script.account, script.amount).await?;
        tx.commit().await?;
        if script.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(script.sleep_ms)).await;
        }
        Ok(())
    }
}
