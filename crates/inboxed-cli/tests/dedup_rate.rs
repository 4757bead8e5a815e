//! `inboxed stats --metrics-url` and the console of `inboxed serve --metrics-url`: the dedup
//! hit rate, which only counters know, read from a real `inboxed relay`'s Prometheus endpoint
//! after it stored RabbitMQ messages with producer retries among them.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::{Backend, Pg};

use common::inboxed;

const STORED: &str = "SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'billing'";

#[tokio::test]
async fn stats_reads_the_dedup_hit_rate_from_a_relays_counters() {
    let db = Pg::create().await;
    let amqp = std::env::var("INBOXED_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let (channel, name) = queue(&amqp).await;
    // Seven messages, three of them published twice (producer retries).
    publish_keyed(&channel, &name, "d", 0..7).await;
    publish_keyed(&channel, &name, "d", 0..3).await;
    let port = inboxed_test::free_port();
    let _relay = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args([
            "relay",
            "--from",
            &amqp,
            "--queue",
            &name,
            "--to",
            &db.locator,
        ])
        .args(["--consumer", "billing"])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .env("INBOXED_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start inboxed relay");
    let url = format!("http://127.0.0.1:{port}/metrics");
    let args = [
        "stats",
        "--json",
        "--database-url",
        &db.locator,
        "--metrics-url",
        &url,
    ];
    let mut report = serde_json::Value::Null;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if db.scalar(STORED).await < 7 {
            continue;
        }
        let (code, out) = inboxed(&args);
        if code != 0 {
            continue;
        }
        report = serde_json::from_str(&out).unwrap();
        if report["dedup_hit_rate"][0]["settled"] == 10.0 {
            break;
        }
    }
    let rate = &report["dedup_hit_rate"][0];
    assert_eq!(rate["consumer"], "billing", "{report}");
    assert_eq!(rate["counter"], "inboxed_receipts_total", "{report}");
    assert_eq!(
        (&rate["duplicates"], &rate["settled"]),
        (&3.0.into(), &10.0.into()),
        "{report}"
    );
    assert_eq!(rate["rate"], 0.3, "{report}");
    assert_eq!(db.scalar(STORED).await, 7, "each message stored once");

    let (code, out) = inboxed(&[
        "stats",
        "--database-url",
        &db.locator,
        "--metrics-url",
        &url,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("billing") && l.contains("30.0%")),
        "{out}"
    );

    // The console's overview shows the same rate beside billing's processed keys, and says
    // so when the endpoint cannot be read.
    let (_serve, addr) = common::spawn_serve(
        &db.locator,
        &["--listen", "127.0.0.1:0", "--metrics-url", &url],
    )
    .await;
    let overview = reqwest::get(format!("http://{addr}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let billing = overview
        .split("<tr>")
        .find(|row| row.contains("<td>billing</td>") && row.contains('%'))
        .unwrap_or_else(|| panic!("billing's processed keys: {overview}"));
    assert!(billing.contains("30.0% (3 of 10)"), "{billing}");
    let (_serve, addr) = common::spawn_serve(
        &db.locator,
        &[
            "--listen",
            "127.0.0.1:0",
            "--metrics-url",
            "http://127.0.0.1:1/metrics",
        ],
    )
    .await;
    let overview = reqwest::get(format!("http://{addr}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        overview.contains("the counters could not be read"),
        "{overview}"
    );

    let (code, _) = inboxed(&[
        "stats",
        "--database-url",
        &db.locator,
        "--metrics-url",
        "http://127.0.0.1:1/metrics",
    ]);
    assert_eq!(
        code, 2,
        "an unreachable endpoint is an error, not a missing figure"
    );
    db.finish().await;
}
