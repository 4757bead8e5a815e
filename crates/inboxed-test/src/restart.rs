//! Restart tests through real brokers: a consumer loop on a broker's source runs while a
//! server under it is crashed and restarted, and a ledger audit then checks that every message
//! was applied exactly once.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, DeliverySource, Processor};
use inboxed_postgres::PgStore;

use crate::backend::LEDGER;
use crate::handler::Ledger;
use crate::pg::Pg;
use crate::throwaway::ThrowawayPg;

/// Messages of a restart test.
pub const MESSAGES: i64 = 4_000;

/// The amount credited by message `i`; the audit checks the sum.
#[must_use]
pub fn amount(i: i64) -> i64 {
    i % 5 + 1
}

/// A store on `pg` with the test schema and the inbox tables.
pub async fn store_on(pg: &ThrowawayPg) -> PgStore {
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&pg.url())
        .await
        .expect("connect to the throwaway server");
    sqlx::raw_sql(LEDGER).execute(&pool).await.expect("schema");
    let store = PgStore::new(pool);
    store.migrate().await.expect("migrate");
    store
}

/// Rows in the ledger, or `None` while the server is down.
async fn ledger_rows(url: &str) -> Option<i64> {
    ledger_counts(url).await.map(|(rows, _)| rows)
}

/// Rows and distinct message ids in the ledger at `url`, or `None` while the server is down
/// (or in recovery from a crash).
pub async fn ledger_counts(url: &str) -> Option<(i64, i64)> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(1))
        .connect(url)
        .await
        .ok()?;
    let counts = sqlx::query_as("SELECT count(*), count(DISTINCT message_id) FROM ledger")
        .fetch_one(&pool)
        .await
        .ok();
    pool.close().await;
    counts
}

/// Ledger rows of the messages keyed `<first>-…` and of those keyed `<second>-…`: two streams
/// credited into one ledger, counted apart.
///
/// # Panics
/// When the ledger cannot be read.
pub async fn ledger_by_prefix(store: &PgStore, first: &str, second: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE message_id LIKE $1 || '-%'), \
                count(*) FILTER (WHERE message_id LIKE $2 || '-%') FROM ledger",
    )
    .bind(first)
    .bind(second)
    .fetch_one(store.pool())
    .await
    .expect("the ledger")
}

/// What the inbox tables hold, for a stalled audit's message: tells a message the broker lost
/// (no trace here) from one the library dead-lettered or keeps failing.
async fn inbox_state(url: &str) -> String {
    let Ok(pool) = PgPoolOptions::new().max_connections(1).connect(url).await else {
        return "database unreachable".into();
    };
    let state: Result<(i64, i64, i64, Option<i32>), _> = sqlx::query_as(
        "SELECT (SELECT count(*) FROM inboxed_processed_messages), \
                (SELECT count(*) FROM inboxed_dead_letters), \
                (SELECT count(*) FROM inboxed_attempts), \
                (SELECT max(attempts) FROM inboxed_attempts)",
    )
    .fetch_one(&pool)
    .await;
    let letters: Vec<(String, String)> = sqlx::query_as(
        "SELECT coalesce(message_id, ''), reason || ': ' || left(error, 200) FROM inboxed_dead_letters LIMIT 3",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    pool.close().await;
    match state {
        Ok((processed, dead, pending, most)) => format!(
            "{processed} processed rows, {dead} dead letters {letters:?}, \
             {pending} keys with failed attempts (most {most:?})"
        ),
        Err(e) => format!("inbox tables unreadable: {e}"),
    }
}

/// Runs the consumer loop on `source` (holding [`MESSAGES`] messages keyed `<prefix>-<i>`,
/// crediting [`amount`]`(i)`) into `store` on `pg`; a quarter of the way, crashes PostgreSQL
/// (`pg_ctl stop -m immediate`) and starts it again a second later; then audits the ledger.
/// Returns the rows committed before the crash.
///
/// # Panics
/// When the audit fails or the stream stalls for 150 s.
pub async fn audit_through_pg_crash<S: DeliverySource + 'static>(
    pg: &ThrowawayPg,
    store: PgStore,
    source: S,
) -> i64 {
    let (before, ()) = audit_through(&pg.url(), store, source, || async {
        pg.crash();
        tokio::time::sleep(Duration::from_secs(1)).await;
        pg.restart();
    })
    .await;
    before
}

/// Runs the consumer loop on `source` (holding [`MESSAGES`] messages crediting
/// [`amount`]`(i)`) into `store`, whose ledger `ledger_url` reaches; a quarter of the way runs
/// `fault` (crash and restart a server); then waits for every message and audits the ledger:
/// every message exactly once, the exact sum. Returns the rows committed before the fault
/// began, and what `fault` returned (a restarted server to keep alive, say).
///
/// # Panics
/// When the audit fails or the stream stalls for 150 s.
pub async fn audit_through<S, F, Fut, T>(
    ledger_url: &str,
    store: PgStore,
    source: S,
    fault: F,
) -> (i64, T)
where
    S: DeliverySource + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let processor = Processor::new(
        store,
        ConsumerName::new("ledger").expect("name"),
        Ledger::<Pg>::default(),
    );
    audit_processing(ledger_url, processor, source, fault).await
}

/// [`audit_through`] with a processor of the caller's (consumer `ledger`, a handler that
/// writes the ledger as [`Ledger`] does, wrapped to observe it).
///
/// # Panics
/// When the audit fails or the stream stalls for 150 s.
pub async fn audit_processing<S, H, F, Fut, T>(
    ledger_url: &str,
    processor: Processor<PgStore, H>,
    source: S,
    fault: F,
) -> (i64, T)
where
    S: DeliverySource + 'static,
    H: inboxed_core::Handler<sqlx::Postgres> + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consuming = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default().concurrency(16))
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    let mut before = 0;
    while before < MESSAGES / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress before the fault"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        before = ledger_rows(ledger_url).await.unwrap_or(0);
    }
    let kept = fault().await;
    while ledger_rows(ledger_url).await.unwrap_or(0) < MESSAGES {
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "stuck at {:?} of {MESSAGES} after the fault ({before} before it); {}",
                ledger_rows(ledger_url).await,
                inbox_state(ledger_url).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Redeliveries of messages whose acks were lost settle as duplicates meanwhile.
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.send(()).expect("consumer still running");
    // A settle stuck on a connection that died under it would hold shutdown for ever.
    tokio::time::timeout(Duration::from_secs(60), consuming)
        .await
        .expect("the consumer loop stopped within 60 s of its shutdown")
        .expect("consumer task")
        .expect("consumer loop");
    let pool = PgPoolOptions::new()
        .connect(ledger_url)
        .await
        .expect("connect");
    let (rows, distinct, sum): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT message_id), coalesce(sum(amount), 0)::bigint FROM ledger",
    )
    .fetch_one(&pool)
    .await
    .expect("audit");
    let expected: i64 = (0..MESSAGES).map(amount).sum();
    assert!(before < MESSAGES, "the fault came mid-stream ({before})");
    assert_eq!(
        (rows, distinct, sum),
        (MESSAGES, MESSAGES, expected),
        "ledger audit"
    );
    (before, kept)
}
