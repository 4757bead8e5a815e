//! Real process crashes: a child consumer killed with SIGKILL at a chosen point, or aborting
//! itself on a poison message, and a restarted consumer that receives the redelivery.

use super::ledger_state;
use crate::backend::Backend;
use crate::child::{Broker, Fault, child_locator, child_main};
use crate::handler::{Script, credit};

/// Kill the consumer after its commit and before its ack; the restarted consumer gets the
/// redelivery and settles it as a duplicate: the effect is applied once.
pub async fn crash_between_commit_and_ack_does_not_reapply<B: Backend>(test: &str) {
    if let Some(locator) = child_locator() {
        return child_main::<B>(&locator).await;
    }
    let db = B::create().await;
    let mut broker = Broker::new(true);
    for (id, amount) in [("m-k1", 25), ("m-k2", 5), ("m-k3", 1)] {
        broker.publish(id, &credit(id, amount));
    }
    assert!(
        broker
            .run_child(test, &db.locator, Fault::BetweenCommitAndAck)
            .await,
        "child was killed"
    );
    assert_eq!(broker.unacked(), 3, "killed before its first ack");
    assert_eq!(
        ledger_state(&db).await,
        (1, 25),
        "the first commit landed before the kill"
    );

    assert!(!broker.run_child(test, &db.locator, Fault::None).await);
    assert_eq!(broker.unacked(), 0);
    assert_eq!(broker.acked, vec!["m-k1", "m-k2", "m-k3"]);
    assert_eq!(
        ledger_state(&db).await,
        (3, 31),
        "m-k1 was not applied twice"
    );
    db.finish().await;
}

/// Kill the consumer inside the handler, after it wrote but before the commit: nothing is
/// recorded, and the redelivery does the work.
pub async fn crash_before_commit_redoes_the_work<B: Backend>(test: &str) {
    if let Some(locator) = child_locator() {
        return child_main::<B>(&locator).await;
    }
    let db = B::create().await;
    let mut broker = Broker::new(true);
    broker.publish(
        "m-b",
        &Script {
            amount: 9,
            hang: true,
            ..Script::default()
        }
        .message("m-b"),
    );
    assert!(
        broker
            .run_child(test, &db.locator, Fault::BeforeCommit)
            .await,
        "child was killed"
    );
    assert_eq!(broker.unacked(), 1);
    assert_eq!(
        ledger_state(&db).await,
        (0, 0),
        "the uncommitted write died with the process"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );

    assert!(!broker.run_child(test, &db.locator, Fault::None).await);
    assert_eq!(broker.unacked(), 0);
    assert_eq!(ledger_state(&db).await, (1, 9));
    db.finish().await;
}

/// A message whose handler aborts the process is counted durably before each attempt, so
/// after `max_attempts` (5) crashed consumers the next one dead-letters it without running it,
/// and the messages behind it flow.
pub async fn poison_that_kills_the_process_is_dead_lettered<B: Backend>(test: &str) {
    poison_crashes_five_consumers::<B>(test, false).await;
}

/// The same poison inside a batch (`process_batch`): the batch's attempts are counted before
/// its transaction, so the crashes count, the redelivered batch goes one message at a time,
/// and after five crashes the poison is dead-lettered while its batch-mates are applied once.
pub async fn poison_that_kills_a_batch_is_dead_lettered<B: Backend>(test: &str) {
    poison_crashes_five_consumers::<B>(test, true).await;
}

/// Three good messages and one that aborts the process, through child consumers that settle
/// one delivery at a time or, with `batch`, all of them with one `process_batch`.
async fn poison_crashes_five_consumers<B: Backend>(test: &str, batch: bool) {
    if let Some(locator) = child_locator() {
        return child_main::<B>(&locator).await;
    }
    let db = B::create().await;
    let mut broker = Broker::new(false); // no broker count: the store counts attempts
    broker.batch = batch;
    broker.publish("m-1", &credit("m-1", 1));
    broker.publish(
        "m-poison",
        &Script {
            abort: true,
            ..Script::default()
        }
        .message("m-poison"),
    );
    broker.publish("m-2", &credit("m-2", 10));
    broker.publish("m-3", &credit("m-3", 100));
    let mut runs = 0;
    while broker.unacked() > 0 && runs < 10 {
        broker.run_child(test, &db.locator, Fault::None).await;
        runs += 1;
    }
    assert_eq!(
        runs, 6,
        "five crashed consumers, then the one that dead-letters the poison"
    );
    assert_eq!(broker.unacked(), 0);
    assert_eq!(ledger_state(&db).await, (3, 111));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-poison' AND reason = 'attempts_exhausted' AND attempts = 5").await,
        1
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        3
    );
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_attempts").await, 0);
    db.finish().await;
}
