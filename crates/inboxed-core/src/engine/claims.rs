//! Receipt and claims, for every engine: an inbox row stored (or found a duplicate), a batch
//! of pending rows claimed under a lease or locked in the caller's transaction, and a
//! processor's key claimed in the handler's transaction.

use super::{Args, Columns, Conn, Engine};
use crate::driver::Transaction as _;
use crate::envelope::{ConsumerName, Envelope};
use crate::error::StoreError;
use crate::hash::PayloadHash;
use crate::inbox::store::{
    ClaimBatchParams, EnqueueManyParams, EnqueueParams, Enqueued, InboxRow, LockBatchParams,
    millis, millis_of,
};
use crate::store::Claim;

/// Stores one message committed on its own; a duplicate says whether its payload matches.
///
/// # Errors
/// A statement failed.
pub async fn enqueue<E: Engine>(e: &E, p: &EnqueueParams<'_>) -> Result<Enqueued, StoreError> {
    let inserted = e.fetch_alone(insert(e, p.consumer, p.envelope)).await?;
    if let Some(row) = inserted.first() {
        return Ok(Enqueued::Stored { id: row.int(0)? });
    }
    let stored = e.fetch_alone(lookup(e, p.consumer, p.envelope)).await?;
    not_stored(stored.first(), p.envelope)
}

/// Stores messages one statement each in one transaction, where an engine has no set-based
/// receipt (SQLite, in process, pays no round trip a statement). A duplicate within the batch
/// finds the earlier one, written by this transaction.
///
/// # Errors
/// A statement or the commit failed; nothing is stored then.
pub async fn enqueue_each<E: Engine>(
    e: &E,
    p: &EnqueueManyParams<'_>,
) -> Result<Vec<Enqueued>, StoreError> {
    let mut tx = e.begin_write().await?;
    let outcomes = enqueue_in(e, &mut tx, p.consumer, p.envelopes).await?;
    tx.commit().await?;
    Ok(outcomes)
}

/// [`enqueue_each`]'s statements in the caller's transaction: one `enqueue.sql` a message,
/// and the stored hash of each one not inserted. A duplicate within `envelopes`, or of a row
/// this transaction wrote before, finds that row.
///
/// # Errors
/// A statement failed.
pub async fn enqueue_in<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    envelopes: &[Envelope],
) -> Result<Vec<Enqueued>, StoreError> {
    let mut outcomes = Vec::with_capacity(envelopes.len());
    for env in envelopes {
        let inserted = E::fetch_all(insert(e, consumer, env), conn).await?;
        outcomes.push(match inserted.first() {
            Some(row) => Enqueued::Stored { id: row.int(0)? },
            None => {
                let stored = E::fetch_all(lookup(e, consumer, env), conn).await?;
                not_stored(stored.first(), env)?
            }
        });
    }
    Ok(outcomes)
}

/// `enqueue.sql` for one message.
fn insert<E: Engine>(e: &E, consumer: &ConsumerName, env: &Envelope) -> E::Query {
    e.query(&e.queries().enqueue)
        .text(consumer.as_str())
        .text(env.id().as_str())
        .opt_text(env.aggregate_id())
        .opt_text(env.message_type())
        .opt_text(env.correlation_id())
        .bytes(env.payload())
        .bytes(env.hash().as_bytes())
        .opt_text(env.headers().to_stored().as_deref())
}

/// `enqueue_lookup.sql`: the stored payload hash of a message not inserted.
fn lookup<E: Engine>(e: &E, consumer: &ConsumerName, env: &Envelope) -> E::Query {
    e.query(&e.queries().enqueue_lookup)
        .text(consumer.as_str())
        .text(env.id().as_str())
}

/// A message the insert skipped: a conflict when the stored payload differs, else a
/// duplicate (also when the row is gone already: purged between the two statements).
fn not_stored<R: Columns>(stored: Option<&R>, env: &Envelope) -> Result<Enqueued, StoreError> {
    let stored = stored.map(|r| r.opt_bytes(0)).transpose()?.flatten();
    Ok(match stored.as_deref().and_then(PayloadHash::from_slice) {
        Some(stored) if stored != env.hash() => Enqueued::Conflict {
            stored,
            received: env.hash(),
        },
        _ => Enqueued::Duplicate,
    })
}

/// Claims up to `p.limit` pending rows under a lease, committed on its own.
///
/// # Errors
/// The statement failed.
pub async fn claim_batch<E: Engine>(
    e: &E,
    p: &ClaimBatchParams<'_>,
) -> Result<Vec<InboxRow>, StoreError> {
    let q = e
        .fresh(&e.queries().claim_batch)
        .text(p.consumer.as_str())
        .text(p.worker)
        .bytes(p.token.as_bytes())
        .int(i64::from(p.limit))
        .int(millis_of(p.lease))
        .opt_int(p.now.map(millis))
        .flag(p.ordered)
        .flag(p.park);
    let stamp = &e.queries().claim_stamp;
    if stamp.is_empty() {
        return e.fetch_alone(q).await?.iter().map(inbox_row).collect();
    }
    select_then_stamp(
        e,
        q,
        inbox_row,
        |r| r.id,
        |ids| {
            e.query(stamp)
                .ids(ids)
                .text(p.worker)
                .bytes(p.token.as_bytes())
                .int(millis_of(p.lease))
                .opt_int(p.now.map(millis))
        },
    )
    .await
}

/// A claim on an engine without `UPDATE … RETURNING` whose updates lock every row their
/// subqueries read (MySQL: the ordered mode's check of earlier rows then waited on other claims'
/// rows, and two claims deadlocked): `select` only selects and locks the rows (SKIP LOCKED, its
/// subqueries reading without locks), and the query `stamp` builds for their ids marks them
/// claimed, in one transaction of the store's own.
///
/// # Errors
/// A statement or the commit failed, or a row does not read.
pub async fn select_then_stamp<E: Engine, T>(
    e: &E,
    select: E::Query,
    row: impl Fn(&E::Row) -> Result<T, StoreError>,
    id: impl Fn(&T) -> i64,
    stamp: impl FnOnce(&[i64]) -> E::Query,
) -> Result<Vec<T>, StoreError> {
    let mut tx = e.begin_write().await?;
    let rows: Vec<T> = E::fetch_all(select, &mut tx)
        .await?
        .iter()
        .map(row)
        .collect::<Result<_, _>>()?;
    if !rows.is_empty() {
        let ids: Vec<i64> = rows.iter().map(id).collect();
        E::execute(stamp(&ids), &mut tx).await?;
    }
    tx.commit().await?;
    Ok(rows)
}

/// Locks up to `p.limit` pending rows in the caller's transaction (lock-held mode).
///
/// # Errors
/// The statement failed.
pub async fn lock_batch<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &LockBatchParams<'_>,
) -> Result<Vec<InboxRow>, StoreError> {
    let q = e
        .fresh(&e.queries().lock_batch)
        .text(p.consumer.as_str())
        .int(i64::from(p.limit))
        .opt_int(p.now.map(millis))
        .flag(p.ordered)
        .flag(p.park);
    E::fetch_all(q, conn).await?.iter().map(inbox_row).collect()
}

/// A claimed row: the columns every claim statement returns, in their order.
fn inbox_row<R: Columns>(r: &R) -> Result<InboxRow, StoreError> {
    InboxRow::from_columns(
        r.int(0)?,
        r.text(1)?,
        r.opt_text(2)?,
        r.opt_text(3)?,
        r.opt_text(4)?,
        r.bytes(5)?,
        r.int(6)?,
        r.opt_int(7)?,
        r.opt_text(8)?,
    )
}

/// Claims a processor's key in the handler's transaction with `claim` (`claim.sql`, or the
/// partitioned table's form): new, or why not.
///
/// # Errors
/// A statement failed, or the row that blocked the insert was gone before it could be read
/// (reported as a timeout, which the caller retries).
pub async fn claim_key<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    claim: &std::sync::Arc<str>,
    consumer: &ConsumerName,
    env: &Envelope,
) -> Result<Claim, StoreError> {
    if E::execute(claim_query(e, claim, consumer, env), conn).await? == 1 {
        return Ok(Claim::New);
    }
    not_claimed(e, conn, consumer, env.id().as_str()).await
}

/// The claim statement `claim` (`claim.sql` or the partitioned one) for `env`'s key: it
/// inserts one row when the key is new, none otherwise.
pub fn claim_query<E: Engine>(
    e: &E,
    claim: &std::sync::Arc<str>,
    consumer: &ConsumerName,
    env: &Envelope,
) -> E::Query {
    let q = e
        .query(claim)
        .text(consumer.as_str())
        .text(env.id().as_str());
    E::claimed(q, env)
}

/// Why a claim inserted nothing (`lookup.sql`): processed, with the payload hash it keeps,
/// or dead-lettered.
///
/// # Errors
/// The statement failed, or nothing blocked the insert any more.
pub async fn not_claimed<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    id: &str,
) -> Result<Claim, StoreError> {
    let Some(row) = lookup_key(e, conn, consumer, id).await? else {
        // The row that blocked the insert is not there for this read: gone already (purged or
        // discarded between the two statements), or, as seen once on MariaDB under eight
        // workers racing on copies (`concurrent_stress_ledger_is_exact`), not yet visible to
        // it. Nothing was written: contention, which the processor retries at once in a new
        // transaction (a timeout, reported before, went back to the broker instead).
        return Err(StoreError::Serialization(sqlx::Error::RowNotFound));
    };
    if row.text(0)? == "dead_lettered" {
        return Ok(Claim::DeadLettered);
    }
    Ok(Claim::Duplicate {
        stored: E::stored_hash(&row, 1)?,
    })
}

/// `lookup.sql`: the state a key holds (`processed` or `dead_lettered`), and what a processed
/// key keeps of its payload; `None` when it holds neither.
pub(super) async fn lookup_key<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    id: &str,
) -> Result<Option<E::Row>, StoreError> {
    let q = e
        .query(&e.queries().lookup)
        .text(consumer.as_str())
        .text(id);
    Ok(E::fetch_all(E::key(q, Some(id)), conn)
        .await?
        .into_iter()
        .next())
}

/// Claims keys one statement each, where an engine has no set-based claim (SQLite, which
/// holds its one write lock already, so the order cannot deadlock).
///
/// # Errors
/// A statement failed.
pub async fn claim_each<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    consumer: &ConsumerName,
    envelopes: &[&Envelope],
) -> Result<Vec<Claim>, StoreError> {
    let mut claims = Vec::with_capacity(envelopes.len());
    for env in envelopes {
        claims.push(claim_key(e, conn, &e.queries().claim, consumer, env).await?);
    }
    Ok(claims)
}
