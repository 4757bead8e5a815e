//! What the console's tests share: a real SQLite database with dead letters made by the real
//! processor, the router served on loopback, and requests as a user.

#![allow(dead_code)]

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor};
use inboxed_sqlite::SqliteStore;
use sqlx::{Sqlite, SqliteConnection};

/// An operator's name and token.
pub(crate) const OPS: (&str, &str) = ("ops", "0123456789abcdef-ops");
/// A read-only user's name and token.
pub(crate) const VIEWER: (&str, &str) = ("viewer", "0123456789abcdef-viewer");

/// Fails every message permanently: each ends dead-lettered.
pub(crate) struct Refuses;

impl Handler<Sqlite> for Refuses {
    async fn handle(
        &self,
        _msg: &Envelope,
        _conn: &mut SqliteConnection,
    ) -> Result<(), HandlerError> {
        Err(HandlerError::permanent(
            "refused: <b>not</b> a valid charge",
        ))
    }
}

/// A migrated store in `dir`, with two dead letters of consumer `billing`: one whose id and
/// payload carry markup, one with a JSON payload.
pub(crate) async fn store_with_dead_letters(dir: &tempfile::TempDir) -> SqliteStore {
    let store = SqliteStore::open(dir.path().join("console.db"))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let processor = Processor::new(
        store.clone(),
        ConsumerName::new("billing").unwrap(),
        Refuses,
    );
    let markup = Envelope::new(
        MessageId::new("<script>alert(1)</script>").unwrap(),
        b"<img src=x onerror=alert(2)>".to_vec(),
    );
    let json = Envelope::new(
        MessageId::new("charge-7").unwrap(),
        br#"{"cents":250}"#.to_vec(),
    );
    for msg in [&markup, &json] {
        let outcome = processor.process(msg, Some(1)).await.unwrap();
        assert!(
            matches!(outcome, Outcome::DeadLettered { .. }),
            "{outcome:?}"
        );
    }
    store
}

/// Serves `router` on a free port of loopback; its base URL.
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

pub(crate) async fn get(url: &str) -> (u16, String) {
    let answer = reqwest::get(url).await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// A GET as `user` (HTTP Basic); status and body.
pub(crate) async fn get_as(url: &str, user: (&str, &str)) -> (u16, String) {
    let answer = reqwest::Client::new()
        .get(url)
        .basic_auth(user.0, Some(user.1))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}
