//! A batch receipt's two tries (`enqueue_many_new.sql`, then `enqueue_many.sql`), seen through
//! the ids they draw: an identity value drawn by a statement that fails is not given back, so
//! a batch that needed its second try leaves a gap in the ids, and one stored by its first try
//! leaves none.

use inboxed_core::inbox::{Enqueued, Inbox};
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_test::{Backend, Pg};

fn message(id: &str) -> Envelope {
    Envelope::new(MessageId::new(id).unwrap(), id.as_bytes().to_vec())
}

/// The ids of the stored rows, in order; every other outcome as `None`.
fn stored(outcomes: &[Enqueued]) -> Vec<Option<i64>> {
    outcomes
        .iter()
        .map(|o| match o {
            Enqueued::Stored { id } => Some(*id),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn new_keys_take_one_statement_and_a_stored_key_a_second() {
    let db = Pg::create().await;
    let inbox = Inbox::new(db.store.clone(), ConsumerName::new("ledger").unwrap());
    let first = stored(
        &inbox
            .store_many(&[message("a"), message("b"), message("c")])
            .await
            .unwrap(),
    );
    let c = first[2].unwrap();
    assert_eq!(first, [Some(c - 2), Some(c - 1), Some(c)]);

    // New keys: stored by the first try, drawing one id each.
    let second = stored(
        &inbox
            .store_many(&[message("d"), message("e")])
            .await
            .unwrap(),
    );
    assert_eq!(
        second,
        [Some(c + 1), Some(c + 2)],
        "a batch of new keys stored by one statement"
    );

    // A stored key: the first try draws ids for both rows and fails on "a"; the second
    // skips "a" (drawing its id too) and stores "f".
    let third = inbox
        .store_many(&[message("f"), message("a")])
        .await
        .unwrap();
    assert_eq!(third[1], Enqueued::Duplicate);
    let f = stored(&third)[0].unwrap();
    assert_eq!(
        f,
        c + 5,
        "stored by the second try, after the first one failed"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_inbox_messages")
            .await,
        6
    );
    db.finish().await;
}
