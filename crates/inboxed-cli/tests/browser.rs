//! The console in a real browser: `inboxed demo` fills a SQLite database (40 permanent dead
//! letters among its transfers), `inboxed serve` shows it to an operator and a read-only user
//! from a users file, and `tests/browser/console.mjs` (Debian's Chromium driven by
//! playwright-core) checks each view at a desktop's and at a phone's width, takes their
//! screenshots (`target/console-screenshots/`, or `INBOXED_SCREENSHOTS`), and acts: the
//! read-only user is refused, the operator retries one dead letter and sees it processed by
//! the worker this test runs, retries a second that fails again and replays its dead row, and
//! discards the rest after a confirmation that counts them; it searches the rows by a JSON
//! path, and retries the outbox's three dead rows from their list. The business state is then
//! checked here: each retried transfer settled once, the outbox rows pending again. Fails, never skips, without Chromium,
//! Node or playwright-core: scripts/test.sh installs them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use inboxed_core::inbox::{Worker, WorkerConfig};
use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::store::BeginParams;
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Store};
use inboxed_sqlite::SqliteStore;
use sqlx::{Sqlite, SqliteConnection};
use tokio::process::Command;

/// The fixed handler of consumer `demo`: settles each message into `settled` (whose primary
/// key would refuse a second settlement), failing `fail_once` the first time (the fix is not
/// deployed everywhere yet), which sends that row dead.
struct Settles {
    fail_once: String,
    failed: AtomicBool,
}

impl Handler<Sqlite> for Settles {
    async fn handle(
        &self,
        msg: &Envelope,
        conn: &mut SqliteConnection,
    ) -> Result<(), HandlerError> {
        if msg.id().as_str() == self.fail_once && !self.failed.swap(true, Ordering::SeqCst) {
            return Err(HandlerError::permanent(
                "the fix is not deployed on this worker yet",
            ));
        }
        sqlx::query("INSERT INTO settled (message_id) VALUES (?)")
            .bind(msg.id().as_str())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

const USERS: &str = r#"
[[user]]
name = "ops"
role = "operator"
token = "browser-test-operator-token"

[[user]]
name = "viewer"
role = "read-only"
token_sha256 = "VIEWER_DIGEST"
"#;

#[tokio::test]
async fn the_console_works_in_a_browser_on_the_demo_database() {
    use sha2::Digest as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.db");
    let url = format!("sqlite://{}", path.display());
    let demo = std::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(["demo", "--database-url", &url])
        .output()
        .expect("run inboxed demo");
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stdout)
    );

    let store = SqliteStore::open(&path).await.unwrap();
    sqlx::query("CREATE TABLE settled (message_id TEXT PRIMARY KEY)")
        .execute(store.pool())
        .await
        .unwrap();
    let letters: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, message_id FROM inboxed_dead_letters \
         WHERE consumer_name = 'demo' AND reason = 'permanent' ORDER BY id LIMIT 2",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let [(first, _), (second, second_key)] = &letters[..] else {
        panic!("the demo leaves permanent dead letters: {letters:?}");
    };
    // The retried rows whose payload holds "acct-unknown" at `to`: a poison transfer of the
    // demo is either that or JSON cut short, which a JSON path never matches.
    let payloads: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT payload FROM inboxed_dead_letters WHERE id IN (?, ?)")
            .bind(first)
            .bind(second)
            .fetch_all(store.pool())
            .await
            .unwrap();
    let by_path = payloads
        .iter()
        .filter(|p| {
            serde_json::from_slice::<serde_json::Value>(p).is_ok_and(|v| v["to"] == "acct-unknown")
        })
        .count();
    let worker = Worker::new(
        store.clone(),
        ConsumerName::new("demo").unwrap(),
        Settles {
            fail_once: second_key.clone(),
            failed: AtomicBool::new(false),
        },
        WorkerConfig::default().poll_interval(Duration::from_millis(100)),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let working = tokio::spawn(async move {
        worker
            .run(async {
                let _ = stopped.await;
            })
            .await
    });

    // Six receipts the service announces through its outbox; the broker refused the first
    // three for good (no queue bound), as a relay records it.
    let outbox = Outbox::new(store.clone());
    let mut tx = store.begin(&BeginParams::default()).await.unwrap();
    for n in 1..=6 {
        let receipt = format!(r#"{{"receipt":{{"transfer":{n}}},"currency":"eur"}}"#);
        let m =
            OutgoingMessage::new("receipts", receipt.into_bytes()).with_key(format!("acct-{n}"));
        outbox.write(&mut tx, &m).await.unwrap();
    }
    tx.commit().await.unwrap();
    sqlx::query(
        "UPDATE inboxed_outbox_messages SET status = 'dead', attempts = 1, \
         last_error = 'NOT_ROUTED: no queue bound to receipts' WHERE id <= 3",
    )
    .execute(store.pool())
    .await
    .unwrap();

    let viewer_digest = hex::encode(sha2::Sha256::digest("browser-test-viewer-token"));
    let users = dir.path().join("users.toml");
    std::fs::write(&users, USERS.replace("VIEWER_DIGEST", &viewer_digest)).unwrap();
    let users = users.display().to_string();
    let (_serve, addr) = crate::common::spawn_serve(
        &url,
        &["--listen", "127.0.0.1:0", "--console-users", &users],
    )
    .await;
    let base = format!("http://{addr}");

    let shots = std::env::var("INBOXED_SCREENSHOTS").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/console-screenshots"
        )
        .to_owned()
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/console.mjs");
    let out = Command::new("node")
        .args([
            script,
            &base,
            &shots,
            &first.to_string(),
            &second.to_string(),
            &by_path.to_string(),
        ])
        .env("OPERATOR", "ops:browser-test-operator-token")
        .env("VIEWER", "viewer:browser-test-viewer-token")
        .output()
        .await
        .expect("node must be installed (scripts/test.sh installs it)");
    let _ = stop.send(());
    working.await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "the browser test failed (scripts/test.sh installs chromium and, in tests/browser, \
         playwright-core):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // What the clicks did, read from the tables: the two retried transfers settled once each,
    // the other 38 discarded, every action on the audit trail.
    let scalar = |sql: &'static str| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(scalar("SELECT count(*) FROM settled").await, 2);
    assert_eq!(
        scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'permanent'").await,
        0
    );
    assert_eq!(
        scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'done'").await,
        2
    );
    assert_eq!(
        scalar(
            "SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'ops' AND \
             ((action = 'letter retry' AND row_count = 1) OR (action = 'replay' AND row_count = 1) \
              OR (action = 'letter discard' AND row_count = 38) \
              OR (action = 'outbox retry' AND row_count = 3))"
        )
        .await,
        5
    );
    assert_eq!(
        scalar(
            "SELECT count(*) FROM inboxed_outbox_messages \
             WHERE status = 'pending' AND attempts = 0 AND last_error IS NULL"
        )
        .await,
        6,
        "the three dead receipts retried, the other three untouched"
    );
    assert_eq!(
        scalar(
            "SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'ops' \
             AND action = 'outbox retry' AND row_count = 3"
        )
        .await,
        1
    );
}
