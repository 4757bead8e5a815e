//! The `inboxed` binary against real databases: its output, its exit code, and the rows it
//! leaves behind.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Command;

use inboxed_test::{Backend, Lite, My, Pg};

use common::inboxed;

#[tokio::test]
async fn demo_on_sqlite_is_exact_and_leaves_the_ledger_behind() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("demo.db").display());
    let (code, out) = inboxed(&[
        "demo",
        "--database-url",
        &url,
        "--messages",
        "400",
        "--workers",
        "3",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: EXACT"), "{out}");
    let store = <Lite as Backend>::attach(dir.path().join("demo.db").to_str().unwrap()).await;
    let rows = <Lite as Backend>::scalar(&store, "SELECT count(*) FROM inboxed_demo_ledger").await;
    let processed =
        <Lite as Backend>::scalar(&store, "SELECT count(*) FROM inboxed_processed_messages").await;
    // 400 messages, of which 8 are poison (see the demo's plan): every valid one applied once.
    assert_eq!((rows, processed), (392, 392));
}

/// The store-then-process path of the demo, on both engines: receipts through the same faulty
/// broker, then workers; the ledger is exact and every valid message is a done row.
#[tokio::test]
async fn demo_store_then_process_is_exact_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("stp.db").display());
    let pg = Pg::create().await;
    for url in [sqlite.as_str(), pg.locator.as_str()] {
        let (code, out) = inboxed(&[
            "demo",
            "--database-url",
            url,
            "--messages",
            "400",
            "--mode",
            "store-then-process",
        ]);
        assert_eq!(code, 0, "{url}: {out}");
        assert!(
            out.contains("392 rows done by workers, 8 poison rows dead"),
            "{out}"
        );
        assert!(out.contains("result: EXACT"), "{out}");
    }
    let done = pg
        .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'demo' AND status = 'done'")
        .await;
    let ledger = pg
        .scalar("SELECT count(DISTINCT message_id) FROM inboxed_demo_ledger")
        .await;
    assert_eq!((done, ledger), (392, 392));
    pg.finish().await;
}

/// The demo on MySQL (the local MariaDB), in both modes, each run twice on one database: a
/// run starts from the demo's own reset, whatever the run before left. Then `stats` reads it.
#[tokio::test]
async fn demo_on_mysql_is_exact_in_both_modes_and_runs_again() {
    let db = My::create().await;
    for mode in [
        "direct",
        "store-then-process",
        "direct",
        "store-then-process",
    ] {
        let (code, out) = inboxed(&[
            "demo",
            "--database-url",
            &db.locator,
            "--messages",
            "400",
            "--mode",
            mode,
        ]);
        assert_eq!(code, 0, "{mode}: {out}");
        assert!(out.contains("result: EXACT"), "{mode}: {out}");
    }
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'demo' AND status = 'done'")
            .await,
        392
    );
    let (code, out) = inboxed(&["stats", "--database-url", &db.locator]);
    assert_eq!(code, 0, "{out}");
    // The backlog line of `demo`: nothing pending or in flight, the 8 poison rows dead.
    let backlog: Vec<&str> = out
        .lines()
        .find(|l| l.trim_start().starts_with("demo "))
        .map(|l| l.split_whitespace().take(4).collect())
        .unwrap_or_default();
    assert_eq!(backlog, ["demo", "0", "0", "8"], "{out}");
    db.finish().await;
}

#[tokio::test]
async fn demo_on_postgres_is_exact() {
    let db = Pg::create().await;
    let (code, out) = inboxed(&[
        "demo",
        "--database-url",
        &db.locator,
        "--messages",
        "400",
        "--workers",
        "6",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: EXACT"), "{out}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_demo_ledger").await,
        392
    );
    db.finish().await;
}

#[tokio::test]
async fn migrate_twice_is_a_no_op() {
    let db = Pg::create().await; // already migrated by the harness
    let (code, out) = inboxed(&["migrate", "--database-url", &db.locator]);
    assert_eq!(code, 0);
    assert!(out.contains("up to date"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    let (code, out) = inboxed(&["migrate", "--database-url", &url]);
    assert_eq!(
        (
            code,
            out.contains(
                "applied migrations [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]"
            )
        ),
        (0, true),
        "{out}"
    );
    let (code, out) = inboxed(&["migrate", "--database-url", &url]);
    assert_eq!((code, out.contains("up to date")), (0, true), "{out}");
    db.finish().await;
}

#[tokio::test]
async fn migrate_into_a_chosen_schema_and_prefix() {
    let db = Pg::create().await;
    let args = [
        "migrate",
        "--database-url",
        &db.locator,
        "--schema",
        "ops",
        "--table-prefix",
        "ib_",
    ];
    let (code, out) = inboxed(&args);
    assert_eq!(
        (
            code,
            out.contains(
                "applied migrations [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]"
            )
        ),
        (0, true),
        "{out}"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM ops.ib_processed_messages")
            .await,
        0
    );
    let (code, out) = inboxed(&[
        "migrate",
        "--database-url",
        &db.locator,
        "--table-prefix",
        "x\"; drop",
    ]);
    assert_eq!(code, 2, "{out}");
    db.finish().await;
}

#[test]
fn unreachable_database_is_a_clear_error_with_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args([
            "migrate",
            "--database-url",
            "postgres://nobody:secret@127.0.0.1:1/x",
        ])
        .env("INBOXED_CONNECT_TIMEOUT", "1s")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("cannot connect to PostgreSQL"), "{err}");
    assert!(
        !err.contains("secret"),
        "the password must never be printed: {err}"
    );
}

#[tokio::test]
async fn purge_is_a_dry_run_until_told_and_refuses_short_windows() {
    let db = Pg::create().await;
    let seeded = db
        .scalar(
            "WITH c AS (INSERT INTO inboxed_consumers (name) VALUES ('billing') RETURNING id),
                  now_s AS (SELECT (floor(extract(epoch FROM now())) - 1577836800)::int AS s),
                  i AS (INSERT INTO inboxed_processed_messages (consumer_id, message_key, received_s)
                        SELECT c.id, inboxed_message_key('k-' || g), now_s.s - 40 * 86400
                        FROM c, now_s, generate_series(1, 25) g
                        UNION ALL
                        SELECT c.id, inboxed_message_key('fresh-' || g), now_s.s
                        FROM c, now_s, generate_series(1, 5) g
                        RETURNING 1)
             SELECT count(*) FROM i",
        )
        .await;
    assert_eq!(seeded, 30);
    let keys = "SELECT count(*) FROM inboxed_processed_messages";
    let base = [
        "purge",
        "--database-url",
        &db.locator,
        "--consumer",
        "billing",
    ];
    let args = |extra: &[&'static str]| [&base[..], extra].concat();

    let (code, out) = inboxed(&args(&["--window", "30d", "--horizon", "7d"]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("dry run: 25 keys"), "{out}");
    assert_eq!(db.scalar(keys).await, 30, "a dry run deletes nothing");
    let (code, out) = inboxed(&args(&["--window", "30d", "--horizon", "7d", "--json"]));
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            &report["dry_run"],
            &report["expired_keys"],
            &report["window_seconds"]
        ),
        (&true.into(), &25.into(), &(30 * 86_400).into()),
        "{out}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(args(&["--window", "2d", "--horizon", "7d", "--yes"]))
        .output()
        .expect("run inboxed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("processed a second time"), "{err}");
    assert_eq!(
        db.scalar(keys).await,
        30,
        "a refused window deletes nothing"
    );

    let (code, out) = inboxed(&args(&[
        "--window",
        "30d",
        "--horizon",
        "7d",
        "--yes",
        "--json",
    ]));
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&report["dry_run"], &report["deleted_keys"]),
        (&false.into(), &25.into()),
        "{out}"
    );
    assert_eq!(db.scalar(keys).await, 5);
    let (code, out) = inboxed(&args(&["--window", "30d", "--horizon", "7d", "--yes"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("deleted 0 keys"),
        "nothing left to delete: {out}"
    );

    let (code, out) = inboxed(&[
        "stats",
        "--database-url",
        &db.locator,
        "--consumer",
        "billing",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("300 keys/hour"), "{out}");
    db.finish().await;
}

#[test]
fn migrate_status_reports_without_changing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    let (code, _) = inboxed(&["migrate", "--status", "--database-url", &url]);
    assert_eq!(code, 2, "a mistyped path is not a new database");
    assert!(
        !dir.path().join("s.db").exists(),
        "--status created nothing"
    );
    std::fs::write(dir.path().join("s.db"), b"").unwrap();
    let (code, out) = inboxed(&["migrate", "--status", "--database-url", &url]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "pending migrations [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]"
        ),
        "{out}"
    );
    let (code, out) = inboxed(&["migrate", "--status", "--database-url", &url]);
    assert_eq!(code, 1, "still pending: --status applied nothing: {out}");
    let (code, out) = inboxed(&["migrate", "--status", "--json", "--database-url", &url]);
    assert_eq!(code, 1, "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        status["pending"].as_array().map(Vec::len),
        Some(19),
        "{out}"
    );
    let (code, out) = inboxed(&["migrate", "--json", "--database-url", &url]);
    assert_eq!(code, 0, "{out}");
    let applied: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        applied["applied"].as_array().map(Vec::len),
        Some(19),
        "{out}"
    );
    assert_eq!(applied["pending"], serde_json::json!([]), "{out}");
    let (code, out) = inboxed(&["migrate", "--status", "--database-url", &url]);
    assert_eq!((code, out.contains("up to date")), (0, true), "{out}");
}

/// The first line of `--help` names every command the help lists (it named five of nine).
#[test]
fn help_names_every_command() {
    let (code, out) = inboxed(&["--help"]);
    assert_eq!(code, 0, "{out}");
    let about = out.lines().next().unwrap();
    let commands: Vec<&str> = out
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        // The rest of the `Commands:` line.
        .skip(1)
        .map_while(|line| line.strip_prefix("  "))
        // Wrapped descriptions are indented further.
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() >= 9, "{out}");
    for name in commands {
        assert!(
            about.contains(name),
            "the first line of --help does not name `{name}`: {about}"
        );
    }
}
