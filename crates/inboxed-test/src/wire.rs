//! What the wire-level tests assert once their consumer has settled everything: the dead
//! letters' errors name each field, and a large body is kept byte for byte.

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, DeliverySource, Processor};

use crate::backend::TestDb;
use crate::handler::Ledger;
use crate::pg::Pg;

/// The processor every wire test consumes with: consumer `ledger`, the scripted ledger handler.
///
/// # Panics
/// Never: the consumer name is valid.
#[must_use]
pub fn ledger_processor(db: &TestDb<Pg>) -> Processor<inboxed_postgres::PgStore, Ledger<Pg>> {
    Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").expect("a valid name"),
        Ledger::<Pg>::default(),
    )
}

/// The reason and error of every dead letter.
///
/// # Panics
/// When the table cannot be read.
pub async fn dead_letters(db: &TestDb<Pg>) -> Vec<(String, String)> {
    sqlx::query_as("SELECT reason, error FROM inboxed_dead_letters")
        .fetch_all(db.store.pool())
        .await
        .expect("read the dead letters")
}

/// Drains `source` as the adapters' docs configure a consumer (concurrency 32) until the ledger
/// has `ledger.0` rows and `dead` dead letters are written, then asserts the ledger's count and
/// sum are `ledger`: every valid message applied once, no bad one applied.
///
/// # Panics
/// When the consumer fails or the ledger differs.
pub async fn drain_and_check_ledger<S: DeliverySource + 'static>(
    db: &TestDb<Pg>,
    source: S,
    ledger: (i64, i64),
    dead: i64,
) {
    Consumer::new(
        ledger_processor(db),
        ConsumerConfig::default().concurrency(32),
    )
    .run(
        source,
        crate::broker_child::until_settled(db, ledger.0, dead),
    )
    .await
    .expect("the consumer runs to its shutdown");
    assert_eq!(
        crate::conformance::ledger_state(db).await,
        ledger,
        "every valid message applied once, no bad one applied"
    );
}

/// Asserts that there are `count` dead letters and that each of `expect` is part of one's
/// error.
///
/// # Panics
/// When one is missing, or the count differs.
pub async fn assert_dead_letters(db: &TestDb<Pg>, count: usize, expect: &[&str]) {
    let errors = dead_letters(db).await;
    assert_eq!(errors.len(), count, "{errors:#?}");
    for expect in expect {
        assert!(
            errors.iter().any(|(_, error)| error.contains(expect)),
            "no dead letter says {expect:?}: {errors:#?}"
        );
    }
}

/// The length of the payload kept in the dead letter of `message_id`.
///
/// # Panics
/// When there is no such dead letter.
pub async fn dead_letter_payload_len(db: &TestDb<Pg>, message_id: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT CAST(length(payload) AS BIGINT) FROM inboxed_dead_letters WHERE message_id = $1",
    )
    .bind(message_id)
    .fetch_one(db.store.pool())
    .await
    .expect("the dead letter of the message")
}
