//! An operator's retry through the broker: a delivery marked as a redrive lifts its key's dead
//! letter inside its own transaction, while an unmarked redelivery never reaches the handler.

use inboxed_core::{Outcome, ProcessorConfig};

use super::{ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Script, credit};

const LETTERS_R: &str = "SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-r'";
const LETTERS_B: &str = "SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-b'";

/// A redrive is processed once and takes the dead letter with it; a second copy is a
/// duplicate; a redrive that fails again leaves the dead letter exactly as it was; one meant
/// for another consumer changes nothing here; a redrive of a key that never died is an
/// ordinary message.
pub async fn redrive_lifts_the_dead_letter_once<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default().max_attempts(1));

    // Fails once (the bug an operator then fixes) and is dead-lettered at once.
    let flaky = Script {
        amount: 5,
        fail_first: 1,
        ..Script::default()
    }
    .message("m-r");
    assert!(matches!(
        p.process(&flaky, Some(1)).await.unwrap(),
        Outcome::DeadLettered { .. }
    ));
    // An ordinary redelivery is settled without the handler.
    assert_eq!(
        p.process(&flaky, Some(2)).await.unwrap(),
        Outcome::AlreadyDeadLettered
    );
    assert_eq!(handler.calls(), 1);

    let redrive = flaky.clone().with_redrive_for("ledger");
    assert_eq!(p.process(&redrive, None).await.unwrap(), Outcome::Processed);
    assert_eq!(ledger_state(&db).await, (1, 5));
    assert_eq!(db.scalar(LETTERS_R).await, 0);
    // The operator published it twice.
    assert_eq!(p.process(&redrive, None).await.unwrap(), Outcome::Duplicate);
    assert_eq!(ledger_state(&db).await, (1, 5));
    assert_eq!(handler.calls(), 2);

    let broken = Script {
        fail: Some("permanent".into()),
        ..Script::default()
    }
    .message("m-b");
    assert!(matches!(
        p.process(&broken, Some(1)).await.unwrap(),
        Outcome::DeadLettered { .. }
    ));
    assert_eq!(
        p.process(&broken.clone().with_redrive_for("ledger"), None)
            .await
            .unwrap(),
        Outcome::AlreadyDeadLettered
    );
    assert_eq!(handler.calls(), 4, "the redrive reached the handler");
    // A redrive for another consumer (a stream fans it out to every group) is an ordinary
    // delivery here: the dead letter stays, and the handler is not called.
    assert_eq!(
        p.process(&broken.with_redrive_for("audit"), None)
            .await
            .unwrap(),
        Outcome::AlreadyDeadLettered
    );
    assert_eq!(handler.calls(), 4);
    assert_eq!(db.scalar(LETTERS_B).await, 1);
    assert_eq!(ledger_state(&db).await, (1, 5));

    let fresh = credit("m-n", 2).with_redrive_for("ledger");
    assert_eq!(p.process(&fresh, None).await.unwrap(), Outcome::Processed);
    assert_eq!(ledger_state(&db).await, (2, 7));
    db.finish().await;
}
