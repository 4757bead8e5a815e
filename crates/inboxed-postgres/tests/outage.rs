//! A downstream service down for two minutes while store-then-process workers drain their rows,
//! at `WorkerConfig::default()` (`inboxed_test::outage::worker_outage`): the kill switch stops the
//! claim loops, the rows that fail meanwhile are handed back with their attempt, and afterwards
//! every row is done once; only the poison's row, which fails on its own, is dead.

use std::time::Duration;

use inboxed_core::KillSwitch;
use inboxed_test::outage::{POISON, worker_outage};
use inboxed_test::{Backend, Pg};

/// Few enough that each row left would use up its attempts in the outage without the switch.
const MESSAGES: i64 = 120;

#[tokio::test]
async fn a_two_minute_downstream_outage_kills_no_row() {
    let db = Pg::create().await;
    let outage = worker_outage(&db, MESSAGES, Duration::from_secs(120), KillSwitch::new()).await;
    println!("{outage:?}");
    assert_eq!(
        inboxed_test::conformance::ledger_state(&db).await,
        (MESSAGES, MESSAGES),
        "every row applied once"
    );
    let dead: Vec<(String,)> =
        sqlx::query_as("SELECT message_id FROM inboxed_inbox_messages WHERE status = 'dead'")
            .fetch_all(db.store.pool())
            .await
            .unwrap();
    assert_eq!(dead, [(POISON.to_owned(),)], "no row dead but the poison's");
    assert!(
        outage.max_charged <= 1,
        "the outage charged a valid message at most the one failure before the switch opened: {}",
        outage.max_charged
    );
    assert!(outage.opened, "the kill switch opened during the outage");
    assert!(outage.closed_after, "and closed after it");
    assert!(
        outage.max_unacked <= 4 * 50,
        "rows held at most the claim loops' batches: {}",
        outage.max_unacked
    );
    db.finish().await;
}

/// Without the switch, an outage of 20 s kills rows that would have been done a minute later.
#[tokio::test]
async fn without_the_kill_switch_a_short_outage_kills_rows() {
    let db = Pg::create().await;
    worker_outage(&db, 60, Duration::from_secs(20), KillSwitch::off()).await;
    let dead = db
        .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'dead' AND message_id <> 'o-poison'")
        .await;
    println!("{dead} valid rows dead without the switch");
    assert!(dead > 0, "the outage used up the attempts of valid rows");
    db.finish().await;
}
