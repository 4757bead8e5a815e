//! Worker liveness: a running worker holds a session advisory lock on a connection of its own,
//! so that the reaper can tell, from another process, that it has died (its session ended and
//! the lock with it) and return its rows at once instead of after their lease.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio::sync::oneshot;

use inboxed_core::StoreError;
use inboxed_core::inbox::store::Liveness;

use crate::PgStore;

/// How often the liveness connection is checked. A connection lost without notice (a server
/// restart) is found and registered again within this; until then the worker may look dead,
/// which costs only the claims the reaper returns under it (their completions are fenced).
const PING: Duration = Duration::from_secs(5);

impl PgStore {
    pub(crate) async fn start_liveness(&self, worker: &str) -> Result<Liveness, StoreError> {
        let options = self.pool.connect_options();
        let (register, forget) = (
            Arc::clone(&self.queries.register_worker),
            Arc::clone(&self.queries.forget_workers),
        );
        let this = self.clone();
        let id = worker.to_owned();
        let mut conn = connect(&options, &this, &register, &id).await?;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    () = tokio::time::sleep(PING) => {}
                }
                if conn.ping().await.is_ok() {
                    continue;
                }
                tracing::warn!(worker = %id, "worker liveness connection lost; registering again");
                loop {
                    match connect(&options, &this, &register, &id).await {
                        Ok(c) => {
                            conn = c;
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot register this worker's liveness again");
                            tokio::time::sleep(PING).await;
                        }
                    }
                }
            }
            // Through this session, which holds the lock: the registration goes first, then
            // the session.
            let removed = this.query(&forget).bind(vec![id]).execute(&mut conn).await;
            if let Err(e) = removed {
                tracing::warn!(error = %e, "could not remove this worker's registration; the reaper will");
            }
            let _ = conn.close().await;
        });
        Ok(Liveness::new(task, stop))
    }
}

/// A fresh session holding the worker's lock, with its registration written.
async fn connect(
    options: &sqlx::postgres::PgConnectOptions,
    store: &PgStore,
    register: &Arc<str>,
    worker: &str,
) -> Result<PgConnection, StoreError> {
    let mut conn = PgConnection::connect_with(options)
        .await
        .map_err(StoreError::from_sqlx)?;
    store
        .query(register)
        .bind(worker.to_owned())
        .execute(&mut conn)
        .await
        .map_err(StoreError::from_sqlx)?;
    Ok(conn)
}
