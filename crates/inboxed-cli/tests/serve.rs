//! `inboxed serve` as a process against real databases: the gauges it publishes match the rows
//! written, and `/health` says whether the database answers with current migrations.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use tokio::process::Child;

use inboxed_core::ConsumerName;
use inboxed_core::EnvelopeError;
use inboxed_core::inbox::Inbox;
use inboxed_test::{Backend, Pg, credit};

use common::{http_get, scrape_until};

/// Starts `inboxed serve` on a free port of loopback; returns the process and its address.
async fn serve(database_url: &str) -> (Child, String) {
    serve_with(database_url, &["--listen", "127.0.0.1:0"]).await
}

/// Starts `inboxed serve` with `args` added, its gauges refreshed every second; returns the
/// process and its address.
async fn serve_with(database_url: &str, args: &[&str]) -> (Child, String) {
    let mut all = args.to_vec();
    all.extend(["--interval", "1s", "--consumer", "billing"]);
    common::spawn_serve(database_url, &all).await
}

#[tokio::test]
async fn gauges_follow_the_rows_and_health_is_ok() {
    let db = Pg::create().await;
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("billing").unwrap());
    for id in ["s-1", "s-2", "s-3"] {
        inbox.store(&credit(id, 1)).await.unwrap();
    }
    inbox
        .dead_letter_invalid(b"{}", &EnvelopeError::MissingId)
        .await
        .unwrap();
    let outgoing: Vec<inboxed_core::outbox::OutgoingMessage> = (0..2_u8)
        .map(|i| inboxed_core::outbox::OutgoingMessage::new("billing.charged", vec![i]))
        .collect();
    inboxed_test::outbox::write(&db.store, &outgoing).await;
    let (_serve, addr) = serve(&db.locator).await;
    scrape_until(
        &addr,
        &[
            r#"inboxed_inbox_rows{consumer="billing",status="pending"} 3"#,
            r#"inboxed_inbox_rows{consumer="billing",status="processing"} 0"#,
            r#"inboxed_dead_letters{consumer="billing",reason="invalid_message"} 1"#,
            r#"inboxed_outbox_unsent_rows{destination="billing.charged",status="pending"} 2"#,
            r#"inboxed_outbox_sent_per_second{destination="billing.charged"} 0"#,
            "inboxed_observe_up 1",
        ],
    )
    .await;
    let (status, body) = http_get(&addr, "/health").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""status":"ok""#), "{body}");

    // A consumer whose backlog empties reads 0, not its last value.
    sqlx::query("UPDATE inboxed_inbox_messages SET status = 'done', done_at = now()")
        .execute(db.store.pool())
        .await
        .unwrap();
    scrape_until(
        &addr,
        &[r#"inboxed_inbox_rows{consumer="billing",status="pending"} 0"#],
    )
    .await;
    assert_eq!(http_get(&addr, "/nope").await.0, 404);
    let (status, console) = http_get(&addr, "/").await;
    assert_eq!(status, 200, "{console}");
    assert!(
        console.contains("<h1>Overview</h1>") && console.contains("billing"),
        "the console's overview: {console}"
    );
    assert_eq!(common::http_request(&addr, "POST", "/metrics").await.0, 405);
    db.finish().await;
}

#[tokio::test]
async fn health_is_503_until_the_tables_are_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let (_serve, addr) = serve(&url).await;
    let (status, body) = http_get(&addr, "/health").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains(r#""migrations_pending":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19]"#),
        "{body}"
    );
    let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(["migrate", "--database-url", &url])
        .output()
        .unwrap();
    assert!(migrated.status.success());
    let (status, body) = http_get(&addr, "/health").await;
    assert_eq!(status, 200, "{body}");
}

/// The console has no access control yet: on a non-loopback address it is shown only when
/// asked for; `/metrics` and `/health` are served there either way.
#[tokio::test]
async fn the_console_stays_off_beyond_loopback_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("served.db").display());
    let (_serve, addr) = serve_with(&url, &["--listen", "0.0.0.0:0"]).await;
    assert_eq!(
        http_get(&addr, "/").await.0,
        404,
        "the console beyond loopback"
    );
    assert_eq!(http_get(&addr, "/health").await.0, 503, "not migrated yet");
    let (_shown, addr) = serve_with(&url, &["--listen", "0.0.0.0:0", "--console", "on"]).await;
    let (status, page) = http_get(&addr, "/").await;
    assert_ne!(status, 404, "asked for: {page}");
    assert!(page.contains("<nav>"), "{page}");
    let (_off, addr) = serve_with(&url, &["--listen", "127.0.0.1:0", "--console", "off"]).await;
    assert_eq!(http_get(&addr, "/").await.0, 404, "turned off");
}
