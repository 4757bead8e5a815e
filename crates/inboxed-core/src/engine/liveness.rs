//! Worker liveness, for engines with a session-scoped lock (PostgreSQL's advisory locks,
//! MySQL's `GET_LOCK`): a running worker holds a lock on a connection of its own, so that the
//! reaper can tell from another process that it has died (its session ended and the lock with
//! it) and return its rows at once instead of after their lease. The engine's SQL says how a
//! lock is taken and probed (`register_worker`, `dead_workers`, `forget_workers`,
//! `count_workers`); the session's life is the same everywhere and written here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Args, Columns, Conn, Engine};
use crate::driver::Driver;
use crate::error::StoreError;
use crate::inbox::store::Liveness;

/// How often the liveness connection is checked, by counting the registered workers
/// (`count_workers.sql`, which paced workers share the server's loops by: workers started
/// together learn of each other within this). A connection lost without notice (a server
/// restart) is found and registered again within this; until then the worker may look dead,
/// which costs only the claims the reaper returns under it (their completions are fenced).
const PING: Duration = Duration::from_secs(1);
/// Longest wait for a connection, a registration or a ping: a half-open socket must not hold
/// the check (or a worker's start) for the kernel's TCP timeout.
const DEADLINE: Duration = Duration::from_secs(10);

/// Registers `worker` on a session of its own and keeps that session alive (and registered
/// again after a loss) until the guard is released or dropped. `None` when another session
/// holds the worker's lock (the same id running twice): the worker then runs unregistered,
/// judged by its leases, rather than wait.
///
/// # Errors
/// The first connection or registration failed.
pub async fn hold<E: Engine>(store: &E, worker: &str) -> Result<Option<Liveness>, StoreError> {
    let this = store.clone();
    let id = worker.to_owned();
    let Some(first) = register(&this, &id).await? else {
        tracing::warn!(worker = %id, "another session holds this worker's liveness lock; if it dies, its rows wait for their lease");
        return Ok(None);
    };
    let (stop, mut stopped) = oneshot::channel();
    let peers = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&peers);
    let task = tokio::spawn(async move {
        let mut conn = Some(first);
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                () = tokio::time::sleep(wait) => {}
            }
            wait = PING;
            // The count is the check that the connection lives.
            if let Some(c) = conn.as_mut() {
                let count = E::fetch_all(this.query(&this.queries().count_workers), c);
                if let Ok(Ok(rows)) = tokio::time::timeout(DEADLINE, count).await {
                    let n = rows.first().map_or(Ok(0), |r| r.count(0)).unwrap_or(0);
                    counted.store(n, Ordering::Relaxed);
                    continue;
                }
            }
            // The old session goes first: if it still lives on the server, it holds the
            // lock a new one would need.
            drop(conn.take());
            tracing::warn!(worker = %id, "worker liveness connection lost; registering again");
            match register(&this, &id).await {
                Ok(Some(c)) => conn = Some(c),
                Ok(None) => {
                    tracing::warn!(worker = %id, "this worker's liveness lock is held by another session; trying again");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot register this worker's liveness again")
                }
            }
        }
        // Through this session, which holds the lock: the registration goes first, then the
        // session.
        if let Some(mut c) = conn {
            let forget = this
                .query(&this.queries().forget_workers)
                .texts(&[id.as_str()]);
            let removed = E::execute(forget, &mut c);
            if !matches!(tokio::time::timeout(DEADLINE, removed).await, Ok(Ok(_))) {
                tracing::warn!("could not remove this worker's registration; the reaper will");
            }
            let _ = tokio::time::timeout(DEADLINE, E::Db::close(c)).await;
        }
    });
    Ok(Some(Liveness::new(task, stop).with_peers(peers)))
}

/// A fresh session holding the worker's lock, with its registration written; `None` when
/// another session holds the lock.
async fn register<E: Engine>(store: &E, worker: &str) -> Result<Option<Conn<E>>, StoreError> {
    let attempt = async {
        let mut conn = store.session().await?;
        let q = store.query(&store.queries().register_worker).text(worker);
        let registered = E::fetch_all(q, &mut conn).await?;
        Ok(if registered.is_empty() {
            None
        } else {
            Some(conn)
        })
    };
    tokio::time::timeout(DEADLINE, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(sqlx::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no worker liveness session within 10 s",
                ),
            )))
        })
}

/// Registered workers whose lock is free: their session ended, so their process (or its
/// connection) is gone.
///
/// # Errors
/// The statement failed.
pub async fn dead_workers<E: Engine>(store: &E) -> Result<Vec<String>, StoreError> {
    let rows = store
        .fetch_alone(store.query(&store.queries().dead_workers))
        .await?;
    rows.iter().map(|r| r.text(0)).collect()
}

/// Removes the registrations of `workers` whose lock is free. Returns how many.
///
/// # Errors
/// The statement failed.
pub async fn forget_workers<E: Engine>(store: &E, workers: &[String]) -> Result<u64, StoreError> {
    let ids: Vec<&str> = workers.iter().map(String::as_str).collect();
    store
        .execute_alone(store.query(&store.queries().forget_workers).texts(&ids))
        .await
}
