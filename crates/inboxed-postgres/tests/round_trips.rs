//! A statement the store plans anew each time (a worker's claim, the reaper's release) takes
//! one round trip, counted on the wire by a tap in front of the server. sqlx sends an
//! unprepared statement as a parse that it waits on before it binds and executes: two round
//! trips, and one more empty transaction a claim. The store sends these statements as text
//! with its values written in; their rows then come back as text, so the claimed rows are
//! checked byte for byte against what was stored.

use std::time::Duration;

use inboxed_core::inbox::Inbox;
use inboxed_core::inbox::store::{ClaimBatchParams, InboxStore, ReleaseStaleParams};
use inboxed_core::outbox::store::ClaimToken;
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_postgres::PgStore;
use inboxed_test::tap::{Counted, Tap};
use inboxed_test::{Backend, Pg};

fn consumer() -> ConsumerName {
    ConsumerName::new("ledger").unwrap()
}

/// A worker id with a quote, a backslash and characters beyond ASCII in it, which the text
/// must escape (the reaper's release finds the claimed rows by it, read back from the table).
const WORKER: &str = "w-'1'\\é😀";

/// Payloads with every byte value, and the other columns a claim returns, both set and not.
fn messages() -> Vec<Envelope> {
    let all: Vec<u8> = (0..=255).collect();
    vec![
        Envelope::new(MessageId::new("m-1").unwrap(), all.clone())
            .with_aggregate("acct-'7'")
            .with_type("credit\\ed")
            .with_correlation_id("c-1"),
        Envelope::new(
            MessageId::new("m-2").unwrap(),
            all.into_iter().rev().collect::<Vec<u8>>(),
        ),
        Envelope::new(MessageId::new("m-3").unwrap(), Vec::new()),
    ]
}

/// What `work` sent through `tap` on `pool` (of one connection). sqlx checks a connection
/// as the pool takes it back (a `Sync` alone: a round trip without a statement), after the
/// caller has its answer; so the count starts with the connection taken out and given back
/// (one check), and ends when it is back after `work` (one more).
async fn counted<T>(tap: &Tap, pool: &sqlx::PgPool, work: impl Future<Output = T>) -> (T, Counted) {
    let held = pool.acquire().await.unwrap();
    let before = tap.counted();
    drop(held);
    let out = work.await;
    let back = pool.acquire().await.unwrap();
    let counted = tap.counted() - before;
    drop(back);
    (out, counted)
}

/// Claims `store`'s rows through `tap`; checks them against [`messages`]; what the claim
/// sent.
async fn claim_counted<S: InboxStore + Clone>(
    store: &S,
    tap: &Tap,
    pool: &sqlx::PgPool,
) -> Counted {
    let consumer = consumer();
    let token = ClaimToken::random();
    let params = ClaimBatchParams {
        consumer: &consumer,
        worker: WORKER,
        token: &token,
        limit: 10,
        lease: Duration::from_secs(30),
        now: None,
        ordered: false,
        park: true,
    };
    // The pool's connection is opened (and its first exchanges made) before the count.
    assert!(store.claim_batch(&params).await.unwrap().is_empty());
    let sent = messages();
    store_messages(store, &sent).await;
    let (rows, counted) = counted(tap, pool, store.claim_batch(&params)).await;
    let mut rows = rows.unwrap();
    rows.sort_by_key(|r| r.id);
    assert_eq!(rows.len(), sent.len());
    for (row, sent) in rows.iter().zip(&sent) {
        assert_eq!(row.envelope.id(), sent.id());
        assert_eq!(row.envelope.payload(), sent.payload(), "{}", sent.id());
        assert_eq!(row.envelope.aggregate_id(), sent.aggregate_id());
        assert_eq!(row.envelope.message_type(), sent.message_type());
        assert_eq!(row.envelope.correlation_id(), sent.correlation_id());
        assert_eq!(row.attempts, 1);
    }
    counted
}

/// One statement in one round trip, between the pool's two checks ([`counted`]). Sent
/// unprepared, as before, a claim took two: a parse waited on, then its execution.
const ONE_TRIP: Counted = Counted {
    statements: 1,
    round_trips: 3,
};

/// Stores `messages` for [`consumer`] (not through the tap's count: before it is read).
async fn store_messages<S: InboxStore + Clone>(store: &S, messages: &[Envelope]) {
    let inbox = Inbox::new(store.clone(), consumer()).notify(false);
    inbox.store_many(messages).await.unwrap();
}

#[tokio::test]
async fn a_workers_claim_is_one_round_trip() {
    let db = Pg::create().await;
    let tap = Tap::start(&db.locator).await.unwrap();
    let store = PgStore::connect(&tap.url(&db.locator).unwrap(), 1)
        .await
        .unwrap();
    assert_eq!(claim_counted(&store, &tap, store.pool()).await, ONE_TRIP);

    let dead = [WORKER.to_owned()];
    let params = ReleaseStaleParams {
        max_attempts: 5,
        limit: 10,
        now: None,
        dead_workers: &dead,
    };
    let (released, sent) = counted(&tap, store.pool(), store.release_stale(&params)).await;
    assert_eq!(sent, ONE_TRIP, "the reaper's release");
    assert_eq!(released.unwrap(), 3, "the claimed rows, their worker dead");
    db.finish().await;
}

/// A server that writes bytea as text in its `escape` form, not `hex` (a setting of the
/// database here): the claimed payloads still read byte for byte (sqlx reads only `hex`).
#[tokio::test]
async fn claimed_payloads_read_the_same_with_bytea_output_escape() {
    let db = Pg::create().await;
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(db.store.pool())
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{name}\" SET bytea_output = 'escape'"
    )))
    .execute(db.store.pool())
    .await
    .unwrap();
    let tap = Tap::start(&db.locator).await.unwrap();
    let store = PgStore::connect(&tap.url(&db.locator).unwrap(), 1)
        .await
        .unwrap();
    let output: String = sqlx::query_scalar("SHOW bytea_output")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(output, "escape");
    assert_eq!(claim_counted(&store, &tap, store.pool()).await, ONE_TRIP);
    db.finish().await;
}

#[cfg(feature = "sea-orm")]
#[tokio::test]
async fn a_seaorm_workers_claim_is_one_round_trip() {
    let db = Pg::create().await;
    let tap = Tap::start(&db.locator).await.unwrap();
    let store =
        inboxed_postgres::sea_orm_pg::SeaOrmPgStore::connect(&tap.url(&db.locator).unwrap(), 1)
            .await
            .unwrap();
    let pool = store.connection().get_postgres_connection_pool().clone();
    assert_eq!(claim_counted(&store, &tap, &pool).await, ONE_TRIP);
    db.finish().await;
}
