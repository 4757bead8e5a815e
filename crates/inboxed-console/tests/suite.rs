//! The console's pages against a real SQLite database filled through the real processor: what
//! each page shows, that nothing a producer sent is ever rendered as markup, and that the
//! links work under the prefix a user nests the router at.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use inboxed_console::{Console, ConsoleConfig};
use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor, Store,
};
use inboxed_sqlite::SqliteStore;
use sqlx::{Sqlite, SqliteConnection};

/// Fails every message permanently: each ends dead-lettered.
struct Refuses;

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
async fn store_with_dead_letters(dir: &tempfile::TempDir) -> SqliteStore {
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
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

async fn get(url: &str) -> (u16, String) {
    let answer = reqwest::get(url).await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test]
async fn the_pages_show_the_dead_letters_and_never_render_what_a_producer_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let base = serve(Console::new(store.clone()).router()).await;

    let (status, overview) = get(&format!("{base}/")).await;
    assert_eq!(status, 200, "{overview}");
    assert!(overview.contains("billing"), "{overview}");
    assert!(
        overview.contains("<td>2</td>"),
        "two dead letters counted: {overview}"
    );

    let (status, list) = get(&format!("{base}/dead-letters?consumer=billing")).await;
    assert_eq!(status, 200);
    assert!(list.contains("charge-7"), "{list}");
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{list}"
    );
    assert!(
        !list.contains("<script>alert"),
        "a message id rendered as markup: {list}"
    );
    assert!(
        !list.contains("<b>not</b>"),
        "an error rendered as markup: {list}"
    );

    let (_, none) = get(&format!("{base}/dead-letters?consumer=nobody")).await;
    assert!(none.contains("0 shown"), "{none}");

    let id: i64 =
        sqlx::query_scalar("SELECT id FROM inboxed_dead_letters WHERE message_id = 'charge-7'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let (status, one) = get(&format!("{base}/dead-letters/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert!(
        one.contains("Hidden"),
        "payloads are hidden by default: {one}"
    );
    assert!(!one.contains("cents"), "{one}");
    assert_eq!(get(&format!("{base}/dead-letters/999999")).await.0, 404);
}

#[tokio::test]
async fn payloads_show_as_json_or_hex_when_allowed_and_links_keep_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let mut config = ConsoleConfig::default();
    config.prefix = "/ops/inboxed".to_owned();
    config.show_payloads = true;
    let console = Console::new(store.clone()).with_config(config).router();
    let base = serve(axum::Router::new().nest("/ops/inboxed", console)).await;

    let (status, overview) = get(&format!("{base}/ops/inboxed")).await;
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview
            .contains(r#"href="/ops/inboxed/dead-letters?consumer=billing&amp;reason=permanent""#),
        "{overview}"
    );
    let ids: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, message_id FROM inboxed_dead_letters ORDER BY id")
            .fetch_all(store.pool())
            .await
            .unwrap();
    let (_, markup) = get(&format!("{base}/ops/inboxed/dead-letters/{}", ids[0].0)).await;
    assert!(markup.contains("3c 69 6d 67"), "not JSON: hex ({markup})");
    assert!(!markup.contains("<img"), "{markup}");
    let (_, json) = get(&format!("{base}/ops/inboxed/dead-letters/{}", ids[1].0)).await;
    assert!(
        json.contains("&quot;cents&quot;: 250"),
        "pretty JSON: {json}"
    );
}
