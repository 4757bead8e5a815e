//! The outbox relay's tests through each broker: rows written in one committed transaction, a
//! relay run until the outbox reaches a state, and quick retries.

use std::time::Duration;

use inboxed_core::outbox::{Outbox, OutboxRelay, OutboxRelayConfig, OutgoingMessage, Publisher};
use inboxed_core::store::BeginParams;
use inboxed_core::{Backoff, Store};
use inboxed_postgres::PgStore;

/// Rows the relay has marked sent.
pub const SENT: &str = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'sent'";

/// The relay's defaults with quick polls, reaps and retries, so that a refused row reaches its
/// last attempt within a test.
#[must_use]
pub fn relay_config() -> OutboxRelayConfig {
    OutboxRelayConfig::default()
        .poll_interval(Duration::from_millis(20))
        .backoff(Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_millis(20),
        })
        .reap_interval(Duration::from_millis(100))
}

/// Writes `messages` in one committed transaction; their outbox ids.
///
/// # Panics
/// When a write or the commit fails.
pub async fn write(store: &PgStore, messages: &[OutgoingMessage]) -> Vec<String> {
    let outbox = Outbox::new(store.clone());
    let mut tx = store.begin(&BeginParams::default()).await.expect("begin");
    let mut ids = Vec::new();
    for m in messages {
        let id = outbox.write(&mut tx, m).await.expect("write to the outbox");
        ids.push(id.as_str().to_owned());
    }
    tx.commit().await.expect("commit");
    ids
}

/// A count.
///
/// # Panics
/// When the query fails.
pub async fn count(store: &PgStore, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(store.pool())
        .await
        .expect("count")
}

/// Runs `relay` until `sql` counts `want`, then stops it.
///
/// # Panics
/// When that takes more than 30 s.
pub async fn relay_until<P: Publisher>(
    relay: &OutboxRelay<PgStore, P>,
    store: &PgStore,
    sql: &str,
    want: i64,
) {
    let store = store.clone();
    let sql = sql.to_owned();
    let done = async move {
        for _ in 0..1_500 {
            if count(&store, &sql).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{sql} did not reach {want} in 30 s");
    };
    relay.run(done).await.expect("the relay runs");
}

/// Puts the first `n` sent rows back to pending, as a relay killed between the broker's
/// confirmation and its mark leaves them (after the lease): the next relay publishes them
/// again, under the same ids.
///
/// # Panics
/// When the update fails.
pub async fn unmark_first(store: &PgStore, n: i64) {
    sqlx::query(
        "UPDATE inboxed_outbox_messages SET status = 'pending', sent_at = NULL WHERE id IN \
         (SELECT id FROM inboxed_outbox_messages WHERE status = 'sent' ORDER BY id LIMIT $1)",
    )
    .bind(n)
    .execute(store.pool())
    .await
    .expect("unmark");
}

/// Rows the relay has settled for good: sent or dead.
pub const SETTLED: &str =
    "SELECT count(*) FROM inboxed_outbox_messages WHERE status IN ('sent', 'dead')";

/// Runs `relay` until all `rows` are sent or dead, checks that `sent` of them were sent, and
/// returns the dead ones' attempts and last errors, in insert order: what the tests of refused
/// rows look at.
///
/// # Panics
/// When that takes more than 30 s, or another number was sent.
pub async fn dead_after_relaying<P: Publisher>(
    relay: &OutboxRelay<PgStore, P>,
    store: &PgStore,
    rows: i64,
    sent: i64,
) -> Vec<(i32, String)> {
    relay_until(relay, store, SETTLED, rows).await;
    assert_eq!(count(store, SENT).await, sent, "rows sent");
    sqlx::query_as(
        "SELECT attempts, last_error FROM inboxed_outbox_messages WHERE status = 'dead' ORDER BY id",
    )
    .fetch_all(store.pool())
    .await
    .expect("dead rows")
}
