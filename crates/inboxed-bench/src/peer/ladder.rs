//! The rungs between inboxed's lease worker and pgmq's loop in `inboxed-bench peer`: the
//! library's own claim and completion statements (its `.sql` files, rendered for the benchmark's
//! namespace), driven by hand on one connection, each rung giving up one guarantee. What a rung
//! gains over the one above it is that guarantee's price, measured in the same round:
//!
//! - [`Rung::Apart`]: the lease worker's statements (the claim committed on its own, then the
//!   batch's transaction: updates, `complete_batch`); against the library's lease worker, the
//!   price of the library around the statements (pool, liveness, metrics, tracing);
//! - [`Rung::Inside`]: the claim inside the batch's transaction. It gives up what the claim's
//!   own commit buys: an attempt counted, and a lease the reaper can see, before any handler
//!   runs, so that a message whose handler kills its worker ends dead instead of killing every
//!   worker that takes it (pgmq's `read_ct` of a job read inside a transaction rolls back with
//!   the worker);
//! - [`Rung::Deleted`]: the claim inside, and the rows deleted instead of marked done. It gives
//!   up the inbox's record of processed ids: a redelivery after the delete runs again.
//!
//! What remains between the last rung and pgmq is the table (its indexes for ordering, leases,
//! retention and dead letters; the payload's hash) and the claim statement's own work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::{Connection, PgConnection, Row};

use inboxed_postgres::PgStore;

use crate::defaults::Credit;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Rung {
    Apart,
    Inside,
    Deleted,
}

/// The statements a rung runs, rendered once for the store's namespace.
#[derive(Clone)]
pub(super) struct Statements {
    claim: Arc<str>,
    complete: Arc<str>,
    delete: Arc<str>,
}

impl Statements {
    pub(super) fn new(store: &PgStore) -> Self {
        let ns = store.namespace();
        Self {
            claim: ns
                .render(include_str!(
                    "../../../inboxed-postgres/sql/claim_batch.sql"
                ))
                .into(),
            complete: ns
                .render(include_str!(
                    "../../../inboxed-postgres/sql/complete_batch.sql"
                ))
                .into(),
            delete: ns
                .render("DELETE FROM {{schema}}.\"{{prefix}}inbox_messages\" WHERE id = ANY($1)")
                .into(),
        }
    }
}

/// One worker of `rung` on a connection of its own, until `total` jobs are done.
pub(super) async fn worker(
    mut conn: PgConnection,
    sql: &Statements,
    rung: Rung,
    batch: u32,
    done: &AtomicU64,
    total: u64,
) -> anyhow::Result<()> {
    let worker = uuid::Uuid::now_v7().to_string();
    loop {
        let token = uuid::Uuid::new_v4();
        let finished = if rung == Rung::Apart {
            let rows = claim(&mut conn, sql, &worker, &token, batch).await?;
            let mut tx = conn.begin().await?;
            let n = finish(&mut tx, sql, rung, &rows, &token).await?;
            tx.commit().await?;
            n
        } else {
            let mut tx = conn.begin().await?;
            let rows = claim(&mut tx, sql, &worker, &token, batch).await?;
            let n = finish(&mut tx, sql, rung, &rows, &token).await?;
            tx.commit().await?;
            n
        };
        if finished > 0 {
            done.fetch_add(finished, Ordering::Relaxed);
        } else if done.load(Ordering::Relaxed) >= total {
            break;
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    conn.close().await?;
    Ok(())
}

/// The batch's handler (its accounts credited in order, one statement a row) and its end:
/// `complete_batch.sql`, or a delete. How many rows it finished.
async fn finish(
    tx: &mut PgConnection,
    sql: &Statements,
    rung: Rung,
    rows: &[(i64, Vec<u8>)],
    token: &uuid::Uuid,
) -> anyhow::Result<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut accounts = Vec::with_capacity(rows.len());
    for (_, payload) in rows {
        accounts.push(serde_json::from_slice::<Credit>(payload)?.account);
    }
    accounts.sort_unstable();
    for account in accounts {
        sqlx::query("UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1")
            .bind(account)
            .execute(&mut *tx)
            .await?;
    }
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    let end = if rung == Rung::Deleted {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&sql.delete))).bind(&ids)
    } else {
        sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&sql.complete)))
            .bind(&ids)
            .bind(token.as_bytes().as_slice())
    };
    let finished = end.execute(&mut *tx).await?.rows_affected();
    anyhow::ensure!(
        finished == ids.len() as u64,
        "{finished} of {} rows finished",
        ids.len()
    );
    Ok(finished)
}

/// `claim_batch.sql` as the library runs it (planned anew each time), unordered, no parking:
/// the claimed rows' ids and payloads.
async fn claim(
    conn: &mut PgConnection,
    sql: &Statements,
    worker: &str,
    token: &uuid::Uuid,
    batch: u32,
) -> anyhow::Result<Vec<(i64, Vec<u8>)>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&sql.claim)))
        .persistent(false)
        .bind("bench")
        .bind(worker)
        .bind(token.as_bytes().as_slice())
        .bind(i64::from(batch))
        .bind(30_000_i64)
        .bind(None::<f64>)
        .bind(false)
        .bind(false)
        .fetch_all(conn)
        .await?;
    // RETURNING id, message_id, aggregate_id, message_type, correlation_id, payload, …
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(5)?)))
        .collect()
}

/// The receipt's rungs below `Inbox::store_many`, 1,000 jobs a transaction each.
pub(super) const RECEIPT_RUNGS: [&str; 3] = [
    "`enqueue_many.sql` by hand (keys stored before skipped: ON CONFLICT)",
    "`enqueue_many_new.sql` by hand (every key new: a stored one fails the batch)",
    "the same into the table without its unique constraint (no dedup)",
];

/// The table of the last receipt rung: the inbox table without its unique constraint.
const NO_DEDUP: &str = "bench_inbox_no_dedup";

/// Makes the table of the last receipt rung afresh.
pub(super) async fn receipt_setup(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {NO_DEDUP}; \
         CREATE TABLE {NO_DEDUP} (LIKE inboxed_inbox_messages INCLUDING ALL); \
         DO $$ DECLARE c text; BEGIN \
           SELECT conname INTO c FROM pg_constraint \
           WHERE conrelid = '{NO_DEDUP}'::regclass AND contype = 'u'; \
           EXECUTE format('ALTER TABLE {NO_DEDUP} DROP CONSTRAINT %I', c); \
         END $$"
    )))
    .execute(pool)
    .await?;
    Ok(())
}

/// Empties the inbox table, and with `rungs` the table without dedup that a rung stores into.
pub(super) async fn empty(pool: &sqlx::PgPool, rungs: bool) -> anyhow::Result<()> {
    let tables = if rungs {
        format!("inboxed_inbox_messages, {NO_DEDUP}")
    } else {
        "inboxed_inbox_messages".to_owned()
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("TRUNCATE {tables}")))
        .execute(pool)
        .await?;
    Ok(())
}

/// `envelopes` stored through receipt rung `rung` of [`RECEIPT_RUNGS`], into emptied tables.
pub(super) async fn receipt(
    pool: &sqlx::PgPool,
    store: &PgStore,
    envelopes: &[inboxed_core::Envelope],
    rung: usize,
) -> anyhow::Result<()> {
    let render = |sql: &str| store.namespace().render(sql);
    let new_keys = render(include_str!(
        "../../../inboxed-postgres/sql/enqueue_many_new.sql"
    ));
    let no_dedup = new_keys.replace("\"inboxed_inbox_messages\"", NO_DEDUP);
    anyhow::ensure!(
        no_dedup != new_keys,
        "enqueue_many_new.sql names no inbox table to replace"
    );
    let sql: Arc<str> = match rung {
        0 => render(include_str!(
            "../../../inboxed-postgres/sql/enqueue_many.sql"
        ))
        .into(),
        1 => new_keys.into(),
        _ => no_dedup.into(),
    };
    let mut conn = pool.acquire().await?;
    for chunk in envelopes.chunks(1_000) {
        let mut tx = conn.begin().await?;
        let stored = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&sql)))
            .bind("bench")
            .bind(chunk.iter().map(|e| e.id().as_str()).collect::<Vec<_>>())
            .bind(vec![None::<&str>; chunk.len()])
            .bind(vec![None::<&str>; chunk.len()])
            .bind(vec![None::<&str>; chunk.len()])
            .bind(chunk.iter().map(|e| e.payload()).collect::<Vec<_>>())
            .bind(
                chunk
                    .iter()
                    .map(|e| e.hash().as_bytes().to_vec())
                    .collect::<Vec<_>>(),
            )
            .bind(vec![None::<&str>; chunk.len()])
            .fetch_all(&mut *tx)
            .await?;
        anyhow::ensure!(stored.len() == chunk.len(), "a row was not stored");
        tx.commit().await?;
    }
    Ok(())
}
