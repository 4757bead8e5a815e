//! Where a daemon is in its life, for `/health`: starting (and what it waits for), running on
//! its database and broker, or stopping. A probe reads it and checks the dependencies fresh.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::broker::Broker;
use super::database;
use crate::cli::AnyStore;

/// Shared by the daemon's start, its loops and its HTTP server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Status(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// The database, once connected.
    store: Option<AnyStore>,
    /// The broker's addresses, once connected (none for a daemon without one).
    broker: Option<Broker>,
    /// What the daemon waits for while starting, and why the last try failed.
    waiting: Option<(&'static str, String)>,
    running: bool,
    stopping: bool,
}

impl Status {
    /// The last try at `what` failed with `error`.
    pub(crate) fn waiting_for(&self, what: &'static str, error: &anyhow::Error) {
        self.lock().waiting = Some((what, format!("{error:#}")));
    }

    /// The database is connected: `/health` checks it at each request from now on, and what
    /// the daemon waited for is no longer the database.
    pub(crate) fn database(&self, store: AnyStore) {
        let mut state = self.lock();
        state.store = Some(store);
        state.waiting = None;
    }

    /// Up and working: `/health` checks `broker`, when there is one, at each request too.
    pub(crate) fn running(&self, broker: Option<Broker>) {
        let mut state = self.lock();
        state.broker = broker;
        state.waiting = None;
        state.running = true;
    }

    /// A stop was asked for: unready from now on, so that a load balancer sends nothing more.
    pub(crate) fn stopping(&self) {
        self.lock().stopping = true;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Readiness: 200 while running with the database answering, its migrations current and
    /// the broker reachable; 503 with the reason otherwise.
    pub(crate) async fn ready(&self) -> (StatusCode, Value) {
        let (store, broker) = {
            let state = self.lock();
            let unready = |body| (StatusCode::SERVICE_UNAVAILABLE, body);
            if state.stopping {
                return unready(json!({ "status": "stopping" }));
            }
            match (&state.store, state.running, &state.waiting) {
                (Some(store), true, _) => (store.clone(), state.broker.clone()),
                (_, _, Some((what, error))) => {
                    return unready(
                        json!({ "status": "starting", "waiting_for": what, "error": error }),
                    );
                }
                _ => return unready(json!({ "status": "starting" })),
            }
        };
        let (database, broker) = tokio::join!(database::health(&store), async {
            match &broker {
                Some(broker) => Some(broker.reachable(PROBE_DEADLINE).await),
                None => None,
            }
        });
        let (mut code, mut body) = database;
        if let Some(reached) = broker {
            body["broker"] = match reached {
                Ok(()) => json!("reachable"),
                Err(e) => {
                    code = StatusCode::SERVICE_UNAVAILABLE;
                    body["status"] = json!("down");
                    json!(e)
                }
            };
        }
        (code, body)
    }
}

/// How long a probe waits for the broker to accept a connection.
const PROBE_DEADLINE: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    /// Once the database is up, `/health` no longer blames it, although the broker has not
    /// been tried yet.
    #[tokio::test]
    async fn a_connected_database_is_not_what_the_daemon_waits_for() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("status.db").display());
        let status = Status::default();
        status.waiting_for("the database", &anyhow::anyhow!("connection refused"));
        let (code, body) = status.ready().await;
        assert_eq!(
            (code, &body["waiting_for"]),
            (StatusCode::SERVICE_UNAVAILABLE, &json!("the database"))
        );
        status.database(AnyStore::connect(&url, 1).await.unwrap());
        let (code, body) = status.ready().await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, json!({ "status": "starting" }));
    }
}
