//! `inboxed stats` and `inboxed serve` across a database per tenant: `--tenant NAME=URL` for
//! each; the report made for each under its name (and in JSON under `tenants`), the gauges
//! labelled with it, `/health` over all, and the console's index of tenants with each one's
//! pages under `/t/NAME`.

use crate::common;

use inboxed_core::{ConsumerName, Processor};
use inboxed_test::{Backend, Ledger, Lite, Pg, TestDb};

use common::{http_get, inboxed, inboxed_with, scrape_until, spawn_serve_with};

/// `n` keyless deliveries of `consumer` dead-lettered in `db`.
async fn dead_letters<B: Backend>(db: &TestDb<B>, consumer: &str, n: usize) {
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new(consumer).unwrap(),
        Ledger::<B>::default(),
    );
    for _ in 0..n {
        processor
            .dead_letter_invalid(b"{}", &inboxed_core::EnvelopeError::MissingId)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn stats_reports_each_tenants_database_under_its_name() {
    let (a, b) = (Pg::create().await, Pg::create().await);
    dead_letters(&a, "billing", 1).await;
    dead_letters(&b, "shipping", 2).await;
    let tenants = [
        "stats",
        "--tenant",
        &format!("a={}", a.locator),
        "--tenant",
        &format!("b={}", b.locator),
    ];
    let (code, out) = inboxed(&tenants);
    assert_eq!(code, 0, "{out}");
    let (first, second) = out.split_once("== tenant b").expect("a section for b");
    assert!(
        first.contains("== tenant a") && first.contains("billing"),
        "{out}"
    );
    assert!(
        !first.contains("shipping") && second.contains("shipping"),
        "{out}"
    );

    let (code, out) = inboxed(&[&tenants[..], &["--json"]].concat());
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let count = |tenant: &str| report["tenants"][tenant]["dead_letters"][0]["count"].as_i64();
    assert_eq!((count("a"), count("b")), (Some(1), Some(2)), "{out}");

    let (code, out) = inboxed_with(&[], &["stats", "--tenant", "a"]);
    assert_ne!(code, 0);
    assert!(out.contains("takes NAME=URL"), "{out}");
    // A name the console could not serve at /t/NAME is refused by every command alike.
    let (code, out) = inboxed_with(&[], &["stats", "--tenant", "a/b=sqlite://x.db"]);
    assert_ne!(code, 0);
    assert!(out.contains("path segment"), "{out}");
    let twice = &format!("a={}", a.locator);
    let (code, out) = inboxed_with(&[], &["stats", "--tenant", twice, "--tenant", twice]);
    assert_ne!(code, 0);
    assert!(out.contains("--tenant a is given twice"), "{out}");
    a.finish().await;
    b.finish().await;
}

/// `serve --tenant` for three databases (PostgreSQL, SQLite, and a SQLite never migrated):
/// each one's gauges under its `tenant` label, `/health` down while one is, and the console's
/// index of the three with each tenant's dead letters on its own pages only.
#[tokio::test]
async fn serve_shows_each_tenant_under_its_name() {
    let (a, b) = (Pg::create().await, Lite::create().await);
    dead_letters(&a, "billing", 1).await;
    dead_letters(&b, "shipping", 2).await;
    let dir = tempfile::tempdir().unwrap();
    let fresh = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let (_serve, addr) = spawn_serve_with(&[
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "1s",
        "--tenant",
        &format!("a={}", a.locator),
        "--tenant",
        &format!("b=sqlite://{}", b.locator),
        "--tenant",
        &format!("c={fresh}"),
    ])
    .await;

    scrape_until(
        &addr,
        &[
            r#"inboxed_dead_letters{consumer="billing",reason="invalid_message",tenant="a"} 1"#,
            r#"inboxed_dead_letters{consumer="shipping",reason="invalid_message",tenant="b"} 2"#,
            r#"inboxed_observe_up{tenant="a"} 1"#,
            r#"inboxed_observe_up{tenant="b"} 1"#,
            r#"inboxed_observe_up{tenant="c"} 0"#,
        ],
    )
    .await;

    let (status, body) = http_get(&addr, "/health").await;
    assert_eq!(status, 503, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "down", "{body}");
    let each = |t: &str| health["tenants"][t]["status"].as_str().map(str::to_owned);
    assert_eq!(
        (each("a"), each("b"), each("c")),
        (Some("ok".into()), Some("ok".into()), Some("down".into())),
        "{body}"
    );

    let (status, index) = http_get(&addr, "/").await;
    assert_eq!(status, 200, "{index}");
    for tenant in ["a", "b", "c"] {
        assert!(index.contains(&format!(r#"href="/t/{tenant}""#)), "{index}");
    }
    assert!(
        index.contains(r#"<a href="/t/b/dead-letters">2</a>"#),
        "{index}"
    );
    assert!(index.contains("not read"), "c's row says so: {index}");
    let (status, letters) = http_get(&addr, "/t/b/dead-letters").await;
    assert_eq!(status, 200, "{letters}");
    assert!(
        letters.contains("shipping") && !letters.contains("billing"),
        "{letters}"
    );
    let (_, letters) = http_get(&addr, "/t/a/dead-letters").await;
    assert!(
        letters.contains("billing") && !letters.contains("shipping"),
        "{letters}"
    );

    let migrated = inboxed(&["migrate", "--database-url", &fresh]);
    assert_eq!(migrated.0, 0, "{}", migrated.1);
    let (status, body) = http_get(&addr, "/health").await;
    assert_eq!(status, 200, "all three up: {body}");
    a.finish().await;
    b.finish().await;
}
