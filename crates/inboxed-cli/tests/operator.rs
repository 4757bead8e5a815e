//! The operator's commands as processes against real databases: `stats`, `dead-letters`,
//! `replay`, and where every command finds its database. Each asserts on the
//! output and on the rows left behind.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Command;

use inboxed_test::{Backend, Pg};

use common::inboxed;

/// `stats` with no consumer named reports every consumer with rows: its backlog, its open kill
/// switches (not one whose process stopped refreshing it), its dead letters and its processed
/// keys, as tables and as JSON with the same figures.
#[tokio::test]
async fn stats_reports_backlog_dead_letters_and_keys_of_every_consumer() {
    use inboxed_core::inbox::Inbox;
    use inboxed_core::{ConsumerName, EnvelopeError};

    let db = Pg::create().await;
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("shipping").unwrap());
    for id in ["t-1", "t-2"] {
        inbox.store(&inboxed_test::credit(id, 1)).await.unwrap();
    }
    // A dead row of an aggregate: the aggregate counts as parked.
    inbox
        .store(&inboxed_test::credit("t-3", 1).with_aggregate("order-9"))
        .await
        .unwrap();
    let killed = "WITH d AS (UPDATE inboxed_inbox_messages SET status = 'dead' \
                  WHERE message_id = 't-3' RETURNING 1) SELECT count(*) FROM d";
    assert_eq!(db.scalar(killed).await, 1);
    inbox
        .dead_letter_invalid(b"{}", &EnvelopeError::MissingId)
        .await
        .unwrap();
    // Shipping's switch opened two minutes ago and probes in 20 s; billing's process died
    // with its switch open ten minutes ago.
    let now = std::time::SystemTime::now();
    let opened = inboxed_core::kill_switch::Opened {
        at: now - std::time::Duration::from_secs(120),
        next_probe: now + std::time::Duration::from_secs(20),
    };
    let shipping = ConsumerName::new("shipping").unwrap();
    inboxed_core::Store::report_switch(&db.store, &shipping, "replica-1", Some(opened))
        .await
        .unwrap();
    let stale = "WITH s AS (INSERT INTO inboxed_kill_switches VALUES ('billing', 'gone', \
                 now() - interval '11 minutes', now() - interval '10 minutes', \
                 now() - interval '10 minutes') RETURNING 1) SELECT count(*) FROM s";
    assert_eq!(db.scalar(stale).await, 1);
    let (code, out) = inboxed(&["stats", "--database-url", &db.locator]);
    assert_eq!(code, 0, "{out}");
    let switch = out
        .lines()
        .skip_while(|l| *l != "kill switches")
        .nth(2)
        .unwrap_or_else(|| panic!("no kill switch row:\n{out}"));
    let cells: Vec<&str> = switch.split_whitespace().collect();
    assert_eq!(cells[..3], ["shipping", "1", "2m"], "{switch}");
    assert!(!out.contains("billing"), "{out}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("shipping") && !l.contains("ago"))
        .unwrap_or_else(|| panic!("no backlog row for shipping:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..4],
        ["2", "0", "1"],
        "pending, processing, dead: {row}"
    );
    assert_eq!(cells.last(), Some(&"1"), "parked aggregates: {row}");
    assert!(
        out.lines()
            .any(|l| l.contains("shipping") && l.contains("invalid_message") && l.contains(" 1 ")),
        "{out}"
    );
    assert!(out.contains("processed keys of `shipping`"), "{out}");

    let (code, out) = inboxed(&["stats", "--json", "--database-url", &db.locator]);
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["backlog"][0]["consumer"], "shipping");
    assert_eq!(report["backlog"][0]["pending"], 2);
    assert_eq!(report["backlog"][0]["parked_aggregates"], 1);
    assert_eq!(
        report["backlog"][0]["next_lease_expiry_in_seconds"],
        serde_json::Value::Null,
        "nothing claimed"
    );
    assert_eq!(report["dead_letters"][0]["count"], 1);
    assert_eq!(report["processed_keys"][0]["consumer"], "shipping");
    let switches = report["kill_switches"].as_array().unwrap();
    assert_eq!(switches.len(), 1, "{switches:?}");
    assert_eq!(switches[0]["consumer"], "shipping");
    assert_eq!(switches[0]["open"], 1);
    let probe = switches[0]["next_probe_in_seconds"].as_i64().unwrap();
    assert!((15..=20).contains(&probe), "{probe}");
    // Closed: gone from the report.
    inboxed_core::Store::report_switch(&db.store, &shipping, "replica-1", None)
        .await
        .unwrap();
    let (_, out) = inboxed(&["stats", "--database-url", &db.locator]);
    assert!(out.contains("kill switches\n  (none open)"), "{out}");
    db.finish().await;
}

/// `dead-letters` on the demo's dead letters (8 permanent, a few without a key), on both engines:
/// list and filter, show, a dry-run retry that changes nothing, a retry into the consumer's
/// inbox (the row is pending, the dead letter gone), a refused retry of a keyless one, discard.
#[tokio::test]
async fn dead_letters_list_show_retry_and_discard() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("dl.db").display());
    let pg = Pg::create().await;
    for url in [sqlite.as_str(), pg.locator.as_str()] {
        let (code, out) = inboxed(&["demo", "--database-url", url, "--messages", "400"]);
        assert_eq!(code, 0, "{out}");
        let list = |extra: &[&str]| {
            let mut args = vec!["dead-letters", "list", "--database-url", url];
            args.extend_from_slice(extra);
            inboxed(&args)
        };
        let (code, out) = list(&["--reason", "permanent"]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("8 dead letter(s)"), "{url}: {out}");
        // The demo's deliveries are of type Transfer.
        let by_type = list(&["--reason", "permanent", "--type", "Transfer"]).1;
        assert!(by_type.contains("8 dead letter(s)"), "{url}: {by_type}");
        let by_type = list(&["--type", "Refund"]).1;
        assert!(by_type.contains("0 dead letter(s)"), "{url}: {by_type}");
        let (_, out) = list(&["--reason", "permanent", "--json"]);
        let ids: Vec<i64> = out
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids.len(), 8);
        let (_, out) = list(&["--reason", "invalid_message", "--json"]);
        let keyless_before = out.lines().count();
        let keyless = serde_json::from_str::<serde_json::Value>(out.lines().next().unwrap())
            .unwrap()["id"]
            .as_i64()
            .unwrap();

        let id = ids[0].to_string();
        let (code, out) = inboxed(&["dead-letters", "show", "--database-url", url, &id]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("permanent after"), "{out}");
        let (code, out) = inboxed(&["dead-letters", "retry", "--database-url", url, &id, "--yes"]);
        assert_eq!(code, 1, "not without --into-inbox: {out}");
        assert!(out.contains("--into-inbox"), "{out}");
        let retry = [
            "dead-letters",
            "retry",
            "--into-inbox",
            "--database-url",
            url,
            &id,
        ];
        let (code, out) = inboxed(&retry);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("would store"), "{out}");
        assert!(
            list(&["--reason", "permanent"])
                .1
                .contains("8 dead letter(s)"),
            "dry run"
        );

        let (code, out) = inboxed(&[&retry[..], &["--yes"]].concat());
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("of `demo`, pending for its workers"), "{out}");
        assert!(
            list(&["--reason", "permanent"])
                .1
                .contains("7 dead letter(s)")
        );
        let (_, stats) = inboxed(&["stats", "--json", "--database-url", url]);
        let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(stats["backlog"][0]["consumer"], "demo");
        assert_eq!(
            stats["backlog"][0]["pending"], 1,
            "the retried message waits in the inbox"
        );

        let keyless = keyless.to_string();
        let (code, out) = inboxed(&[
            "dead-letters",
            "retry",
            "--into-inbox",
            "--database-url",
            url,
            &keyless,
            "--yes",
        ]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("no message id"), "{out}");
        let (code, out) = inboxed(&[
            "dead-letters",
            "discard",
            "--database-url",
            url,
            &keyless,
            "--yes",
        ]);
        assert_eq!(code, 0, "{out}");
        let left = format!("{} dead letter(s)", keyless_before - 1);
        assert!(list(&["--reason", "invalid_message"]).1.contains(&left));
    }
    pg.finish().await;
}

/// `replay` resets dead rows to pending with an audit record, only with --yes, and touches done
/// rows only when told to.
#[tokio::test]
async fn replay_resets_dead_rows_with_an_audit_record() {
    use inboxed_core::ConsumerName;
    use inboxed_core::inbox::Inbox;

    let db = Pg::create().await;
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("billing").unwrap());
    for id in ["r-1", "r-2", "r-3"] {
        inbox.store(&inboxed_test::credit(id, 1)).await.unwrap();
    }
    let pool = db.store.pool();
    sqlx::query(
        "UPDATE inboxed_inbox_messages SET status = 'dead' WHERE message_id IN ('r-1', 'r-2')",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE inboxed_inbox_messages SET status = 'done', done_at = now() WHERE message_id = 'r-3'")
        .execute(pool)
        .await
        .unwrap();
    let args = |yes: bool| {
        let mut a = vec![
            "replay",
            "--database-url",
            &db.locator,
            "--consumer",
            "billing",
            "--actor",
            "oncall",
            "--reason",
            "handler fixed",
        ];
        if yes {
            a.push("--yes");
        }
        a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| inboxed(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, out) = run(args(false));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("would reset") && out.contains("2 dead rows"),
        "{out}"
    );
    let pending = "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending'";
    assert_eq!(db.scalar(pending).await, 0, "a dry run changes nothing");
    let (code, out) = run(args(true));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("reset 2 row(s)"), "{out}");
    assert_eq!(
        db.scalar(pending).await,
        2,
        "dead rows back, the done row left alone"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'oncall'")
            .await,
        1
    );
    db.finish().await;
}

/// `outbox list|show|retry|discard` and the outbox's part of `stats`: two rows dead (their
/// keys parked), one pending; the list and the figures show them, `show` renders a JSON
/// payload, a dry run changes nothing, a bare retry is refused, a retry and a discard by key
/// change one row each with an audit record.
#[tokio::test]
async fn outbox_list_show_retry_and_discard() {
    use inboxed_core::outbox::OutgoingMessage;

    let db = Pg::create().await;
    let messages = [
        OutgoingMessage::new("billing.charged", br#"{"amount":5}"#.to_vec()).with_key("a"),
        OutgoingMessage::new("billing.charged", b"\xff\x00".to_vec()).with_key("b"),
        OutgoingMessage::new("billing.charged", b"later".to_vec()).with_key("a"),
    ];
    let ids = inboxed_test::outbox::write(&db.store, &messages).await;
    let dead = "WITH d AS (UPDATE inboxed_outbox_messages SET status = 'dead', attempts = 10, \
                last_error = 'NOT_ROUTED' WHERE ordering_key IN ('a', 'b') AND id < 3 \
                RETURNING 1) SELECT count(*) FROM d";
    assert_eq!(db.scalar(dead).await, 2);
    let url = db.locator.as_str();

    let (code, out) = inboxed(&["outbox", "list", "--database-url", url, "--status", "dead"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&ids[0]) && out.contains(&ids[1]), "{out}");
    assert!(!out.contains(&ids[2]) && out.contains("2 row(s)"), "{out}");
    let (code, out) = inboxed(&["outbox", "show", "--database-url", url, &ids[0]]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(r#"payload (json, 12 bytes)  {"amount":5}"#),
        "{out}"
    );
    assert!(
        out.contains("dead after 10 attempt(s)") && out.contains("NOT_ROUTED"),
        "{out}"
    );
    let (code, out) = inboxed(&["outbox", "show", "--database-url", url, "--json", "2"]);
    assert_eq!(code, 0, "{out}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["payload"], "ff00");
    assert_eq!(shown["payload_form"], "hex");

    let (code, out) = inboxed(&["stats", "--json", "--database-url", url]);
    assert_eq!(code, 0, "{out}");
    let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
    let outbox = &stats["outbox"][0];
    assert_eq!(outbox["destination"], "billing.charged", "{out}");
    assert_eq!(
        (outbox["pending"].as_u64(), outbox["dead"].as_u64()),
        (Some(1), Some(2))
    );

    let dead_args = |verb: &str, key: &str, yes: bool| {
        let mut a = vec!["outbox", verb, "--database-url", url, "--actor", "oncall"];
        a.extend(["--reason", "queue bound now"]);
        if !key.is_empty() {
            a.extend(["--key", key]);
        }
        if yes {
            a.push("--yes");
        }
        a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| inboxed(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, out) = run(dead_args("retry", "", true));
    assert_ne!(code, 0, "a retry that names no rows is refused: {out}");
    let (code, out) = run(dead_args("retry", "a", false));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would have 1 dead row(s) retried"), "{out}");
    let still_dead = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'";
    assert_eq!(db.scalar(still_dead).await, 2, "a dry run changes nothing");
    let (code, out) = run(dead_args("retry", "a", true));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("1 dead row(s) retried") && !out.contains("would have"),
        "{out}"
    );
    let (code, out) = run(dead_args("discard", "b", true));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("1 dead row(s) discarded") && !out.contains("would have"),
        "{out}"
    );
    assert_eq!(db.scalar(still_dead).await, 0);
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_outbox_messages")
            .await,
        2,
        "the discarded row is gone, the retried one pending beside the third"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM inboxed_redrive_audit WHERE actor = 'oncall' \
             AND action IN ('outbox retry', 'outbox discard')"
        )
        .await,
        2
    );
    db.finish().await;
}

/// The database comes from --database-url, else DATABASE_URL, else the --config file.
#[test]
fn database_url_from_flag_then_environment_then_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    let config = dir.path().join("inboxed.toml");
    std::fs::write(&config, format!("database_url = \"{}\"\n", at("file.db"))).unwrap();
    let config = config.to_str().unwrap();
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_inboxed"));
        cmd.args(args).env_remove("DATABASE_URL");
        if let Some(url) = env {
            cmd.env("DATABASE_URL", url);
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run(&["migrate", "--config", config], None);
    assert!(out.contains("file.db: applied"), "{out}");
    let out = run(&["migrate", "--config", config], Some(&at("env.db")));
    assert!(out.contains("env.db: applied"), "{out}");
    let out = run(
        &[
            "migrate",
            "--config",
            config,
            "--database-url",
            &at("flag.db"),
        ],
        Some(&at("env.db")),
    );
    assert!(out.contains("flag.db: applied"), "{out}");
    let none = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(["migrate"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no database"));
}
