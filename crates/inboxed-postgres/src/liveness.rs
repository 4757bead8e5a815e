//! Worker liveness: a running worker holds a session advisory lock on a connection of its own,
//! so that the reaper can tell, from another process, that it has died (its session ended and
//! the lock with it) and return its rows at once instead of after their lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use tokio::sync::oneshot;

use inboxed_core::StoreError;
use inboxed_core::inbox::store::Liveness;

use crate::PgStore;

/// How often the liveness connection is checked, by counting the registered workers
/// (`count_workers.sql`, which paced workers share the server's loops by: workers started
/// together learn of each other within this). A connection lost without notice (a server
/// restart) is found and registered again within this; until then the worker may look dead,
/// which costs only the claims the reaper returns under it (their completions are fenced).
const PING: Duration = Duration::from_secs(1);
/// Longest wait for a connection, a registration or a ping: a half-open socket must not hold
/// the check (or a worker's start) for the kernel's TCP timeout.
const DEADLINE: Duration = Duration::from_secs(10);

impl PgStore {
    /// `None` behind a transaction-pooling proxy (statements not persistent): a session lock
    /// there would belong to a server connection the proxy shares.
    pub(crate) async fn start_liveness(
        &self,
        worker: &str,
    ) -> Result<Option<Liveness>, StoreError> {
        if !self.persistent {
            return Ok(None);
        }
        let options = self.pool.connect_options();
        let this = self.clone();
        let id = worker.to_owned();
        let Some(first) = register(&options, &this, &id).await? else {
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
                    let count = this.query(&this.queries.count_workers).fetch_one(c);
                    if let Ok(Ok(row)) = tokio::time::timeout(DEADLINE, count).await {
                        let n: i32 = sqlx::Row::try_get(&row, 0).unwrap_or(0);
                        counted.store(u32::try_from(n).unwrap_or(0), Ordering::Relaxed);
                        continue;
                    }
                }
                // The old session goes first: if it still lives on the server, it holds the
                // lock a new one would need.
                drop(conn.take());
                tracing::warn!(worker = %id, "worker liveness connection lost; registering again");
                match register(&options, &this, &id).await {
                    Ok(Some(c)) => conn = Some(c),
                    Ok(None) => {
                        tracing::warn!(worker = %id, "this worker's liveness lock is held by another session; trying again")
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot register this worker's liveness again")
                    }
                }
            }
            // Through this session, which holds the lock: the registration goes first, then
            // the session.
            if let Some(mut c) = conn {
                let removed = this
                    .query(&this.queries.forget_workers)
                    .bind(vec![id])
                    .execute(&mut c);
                if !matches!(tokio::time::timeout(DEADLINE, removed).await, Ok(Ok(_))) {
                    tracing::warn!("could not remove this worker's registration; the reaper will");
                }
                let _ = tokio::time::timeout(DEADLINE, c.close()).await;
            }
        });
        Ok(Some(Liveness::new(task, stop).with_peers(peers)))
    }
}

/// A fresh session holding the worker's lock, with its registration written; `None` when
/// another session holds the lock.
async fn register(
    options: &Arc<PgConnectOptions>,
    store: &PgStore,
    worker: &str,
) -> Result<Option<PgConnection>, StoreError> {
    let attempt = async {
        let mut conn = PgConnection::connect_with(options)
            .await
            .map_err(StoreError::from_sqlx)?;
        let registered = store
            .query(&store.queries.register_worker)
            .bind(worker.to_owned())
            .fetch_optional(&mut conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(registered.map(|_| conn))
    };
    tokio::time::timeout(DEADLINE, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(sqlx::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no liveness session within 10 s",
                ),
            )))
        })
}
