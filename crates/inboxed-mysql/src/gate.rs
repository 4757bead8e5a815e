//! The batch gate, on MySQL's session locks that many sessions can wait on (`GET_LOCK`):
//! `slots` named locks of the database, one held by a claim loop for the length of
//! each batch, so that the workers of a database together run at most `slots` batches at
//! once. Each worker paces its own loops (`pace.rs`), but none can take fewer than one; 16
//! default workers on MariaDB thus ran 16 batches at once on two cores and drained at half of
//! one worker's rate, each transaction waiting on the server's cores while it held its row
//! locks. A pause after each batch (tried first) left the server idle while slots were free; a
//! lock is handed to a waiter the moment it is freed.
//!
//! Each loop has a session of its own, outside the pool: a lock held on a pooled connection
//! would go on with it to its next user, and a loop holding one connection of the pool while
//! waiting for another could starve the pool. A session that dies frees its slot with it. The
//! gate only paces: a loop whose session cannot be had runs its batch ungated, and tries again
//! at the next.
//!
//! The engine's SQL says how a slot is taken (`gate_enter`: the slot's number, and how long to
//! wait for it) and freed (`gate_leave`).

use std::time::Duration;

use tokio::sync::mpsc;

use inboxed_core::driver::Driver;
use inboxed_core::engine::{Args, Columns, Conn, Engine};
use inboxed_core::inbox::store::{Gate, GateRequest};

/// How long a loop waits on one taken slot before it tries them all again: a wait is on one
/// lock, and another slot may be freed first.
const WAIT: Duration = Duration::from_millis(250);
/// Longest wait for a session: a server that does not answer must not hold a batch back.
const CONNECT: Duration = Duration::from_secs(2);

/// A loop's place at the gate of `slots` slots; its session is opened at its first batch.
pub(crate) fn open<E: Engine>(store: &E, slots: u32) -> Gate {
    let (requests, mut inbox) = mpsc::unbounded_channel();
    let store = store.clone();
    let slots = slots.max(1);
    let task = tokio::spawn(async move {
        let mut session: Option<Conn<E>> = None;
        while let Some(request) = inbox.recv().await {
            match request {
                GateRequest::Enter(reply) => {
                    let slot = enter(&store, &mut session, slots, &reply).await;
                    if let Err(Some(slot)) = reply.send(slot) {
                        // The loop stopped waiting: the slot is not its to free.
                        leave(&store, &mut session, slot).await;
                    }
                }
                GateRequest::Leave(slot) => leave(&store, &mut session, slot).await,
            }
        }
        // The loop is gone: the session ends with a word to the server (a dropped socket is
        // logged there as an aborted connection), and its slots with it.
        if let Some(conn) = session {
            let _ = tokio::time::timeout(CONNECT, E::Db::close(conn)).await;
        }
    });
    Gate::new(task, requests)
}

/// A free slot, trying each from a random one on and then waiting on one at random; `None`
/// when the session cannot be had or fails (it is dropped, and opened again next time).
async fn enter<E: Engine>(
    store: &E,
    session: &mut Option<Conn<E>>,
    slots: u32,
    reply: &tokio::sync::oneshot::Sender<Option<u32>>,
) -> Option<u32> {
    if session.is_none() {
        match tokio::time::timeout(CONNECT, store.session()).await {
            Ok(Ok(conn)) => *session = Some(conn),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "no batch gate session; running this batch ungated");
                return None;
            }
            Err(_) => return None,
        }
    }
    let conn = session.as_mut()?;
    match first_free(store, conn, slots, reply).await {
        Ok(slot) => slot,
        Err(()) => {
            *session = None;
            None
        }
    }
}

/// Tries each slot from a random one on, then waits on one at random, until one is taken:
/// `Ok(None)` when the loop stopped waiting; `Err` when the session failed.
async fn first_free<E: Engine>(
    store: &E,
    conn: &mut Conn<E>,
    slots: u32,
    reply: &tokio::sync::oneshot::Sender<Option<u32>>,
) -> Result<Option<u32>, ()> {
    let first = fastrand::u32(0..slots);
    loop {
        for i in 0..slots {
            let slot = (first + i) % slots;
            if take(store, conn, slot, Duration::ZERO).await? {
                return Ok(Some(slot));
            }
        }
        if reply.is_closed() {
            return Ok(None);
        }
        let slot = fastrand::u32(0..slots);
        if take(store, conn, slot, WAIT).await? {
            return Ok(Some(slot));
        }
    }
}

/// Takes `slot`, waiting at most `wait`: whether it was taken; `Err` when the session failed.
async fn take<E: Engine>(
    store: &E,
    conn: &mut Conn<E>,
    slot: u32,
    wait: Duration,
) -> Result<bool, ()> {
    let q = store
        .query(&store.queries().gate_enter)
        .count(slot)
        .int(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
    match tokio::time::timeout(wait + CONNECT, E::fetch_all(q, conn)).await {
        Ok(Ok(rows)) => Ok(rows
            .first()
            .and_then(|r| r.opt_int(0).ok().flatten())
            .is_some_and(|got| got == 1)),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "batch gate session failed");
            Err(())
        }
        Err(_) => Err(()),
    }
}

/// Frees `slot`; a session that fails is dropped, which frees every slot it held.
async fn leave<E: Engine>(store: &E, session: &mut Option<Conn<E>>, slot: u32) {
    let Some(conn) = session.as_mut() else {
        return;
    };
    let q = store.query(&store.queries().gate_leave).count(slot);
    if !matches!(
        tokio::time::timeout(CONNECT, E::execute(q, conn)).await,
        Ok(Ok(_))
    ) {
        *session = None;
    }
}
