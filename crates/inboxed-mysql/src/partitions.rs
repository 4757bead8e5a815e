//! Partitioned mode's maintenance (migration 6 says how the table is partitioned): partitions
//! carved ahead out of `pMAX`, expired ones dropped, one process at a time, on a session of its
//! own whose metadata-lock waits are bounded.
//!
//! A partition holds the keys whose id's time falls in it, received whenever. It is dropped
//! only when every consumer with keys in it has a window here, its upper bound is past, and its
//! newest receipt is older than the longest of those windows: every key in it was then
//! received longer ago than its consumer's window, the row purge's rule, so dedup is never
//! weaker than with the plain table. A message that arrives late with an old id keeps its
//! partition until its receipt has aged out.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::{Connection as _, Executor as _, MySqlConnection};
use tracing::{info, warn};

use inboxed_core::engine::{Args as _, Columns as _, Engine as _};
use inboxed_core::inbox::store::millis;
use inboxed_core::retention::{PartitionConfig, PartitionReport};
use inboxed_core::{ConsumerName, StoreError};

use crate::MySqlStore;

/// How long a maintenance DDL waits for the table's metadata lock before it gives up (the pass
/// then fails and the next one tries again): claims that arrive meanwhile queue behind it.
const DDL_LOCK_WAIT_SECS: u32 = 2;

/// A partition of the table: its upper bound (ms of the id's time), `None` for `pMAX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// `p` and its upper bound (`p1`: ids without a time), or `pMAX`.
    pub name: String,
    /// Ids below this (ms since the Unix epoch) and at or above the previous bound.
    pub upper_ms: Option<i64>,
    /// InnoDB's estimate of its rows.
    pub rows: i64,
}

/// The table's partitions, in order.
pub(crate) async fn list(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
) -> Result<Vec<Partition>, StoreError> {
    let rows = MySqlStore::fetch_all(store.query(&store.queries.list_partitions), conn).await?;
    rows.iter()
        .map(|r| {
            Ok(Partition {
                name: r.text(0)?,
                upper_ms: r.opt_int(1)?,
                rows: r.int(2)?,
            })
        })
        .collect()
}

/// Carves the partitions missing up to `config.ahead` periods past the current one (at least
/// one) out of `pMAX`; how many.
pub(crate) async fn create(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
    config: PartitionConfig,
    now: SystemTime,
) -> Result<u64, StoreError> {
    let step = i64::try_from(config.interval.as_millis().max(1)).unwrap_or(i64::MAX);
    let now = millis(now);
    let current_end = now.div_euclid(step) * step + step;
    let until = current_end + step * i64::from(config.ahead.max(1));
    let last = list(store, conn)
        .await?
        .iter()
        .filter_map(|p| p.upper_ms)
        .filter(|&u| u > 1)
        .max();
    // The first partition takes every id from p1's bound to the end of the current period.
    let mut bound = last.map_or(current_end, |l| l + step);
    let mut created = 0;
    while bound <= until {
        let q = store.query(&store.queries.create_partitions).int(bound);
        MySqlStore::execute(q, conn).await?;
        created += 1;
        bound += step;
    }
    Ok(created)
}

/// A session of its own for maintenance, in UTC as the pool's sessions are (receipt times are
/// read as epoch milliseconds), its metadata-lock waits bounded: closing it releases the
/// maintenance lock even when the pass is cut short.
pub(crate) async fn connect(store: &MySqlStore) -> Result<MySqlConnection, StoreError> {
    let mut conn = store.session().await?;
    conn.execute(sqlx::AssertSqlSafe(format!(
        "SET time_zone = '+00:00', SESSION lock_wait_timeout = {DDL_LOCK_WAIT_SECS}"
    )))
    .await
    .map_err(StoreError::from_sqlx)?;
    Ok(conn)
}

/// One maintenance pass, unless another process is running one: creates partitions ahead,
/// then drops each expired partition (the rest past the shortest window are kept and counted).
pub(crate) async fn maintain(
    store: &MySqlStore,
    config: PartitionConfig,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<PartitionReport, StoreError> {
    let mut conn = connect(store).await?;
    let lock =
        MySqlStore::fetch_all(store.query(&store.queries.lock_maintenance), &mut conn).await?;
    if lock.first().map(|r| r.opt_int(0)).transpose()?.flatten() != Some(1) {
        info!("another process is maintaining the partitions; skipping this pass");
        let _ = conn.close().await;
        return Ok(PartitionReport::skipped());
    }
    let result = pass(store, &mut conn, config, now, windows).await;
    let _ = conn.close().await;
    result
}

async fn pass(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
    config: PartitionConfig,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<PartitionReport, StoreError> {
    let mut report = PartitionReport::new(create(store, conn, config, now).await?, 0);
    let by_consumer: HashMap<&str, Duration> =
        windows.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    for (partition, keep) in plan(store, conn, now, windows).await? {
        let Some(upper) = partition.upper_ms else {
            continue;
        };
        if let Some(why) = keep {
            warn!(partition = %partition.name, why, "partition past a window kept");
            report.kept += 1;
            continue;
        }
        let started = Instant::now();
        // The table held (lock_processed_log.sql says why), the partition checked again.
        let lock = store.ns.render(crate::queries::LOCK_PROCESSED_LOG);
        MySqlStore::execute_script(&lock, conn).await?;
        let dropped = match kept_because(store, conn, upper, now, &by_consumer).await {
            Ok(None) => {
                let q = store.query(&store.queries.drop_partition).int(upper);
                MySqlStore::execute(q, conn).await.map(|_| true)
            }
            Ok(Some(why)) => {
                warn!(partition = %partition.name, why, "partition kept: a key arrived during the pass");
                Ok(false)
            }
            Err(e) => Err(e),
        };
        MySqlStore::execute_script("UNLOCK TABLES", conn).await?;
        if !dropped? {
            report.kept += 1;
            continue;
        }
        let took = started.elapsed();
        metrics::histogram!(inboxed_core::metrics::PARTITION_DROP_SECONDS)
            .record(took.as_secs_f64());
        info!(partition = %partition.name, elapsed = ?took, "dropped an expired partition of processed keys");
        report.dropped += 1;
        report.longest_drop = report.longest_drop.max(took);
    }
    Ok(report)
}

/// The time partitions whose upper bound the shortest of `windows` has passed, each with why
/// it must be kept (`None`: a pass drops it). With no window declared, none.
pub(crate) async fn plan(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<Vec<(Partition, Option<String>)>, StoreError> {
    let windows: HashMap<&str, Duration> = windows.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    let Some(shortest) = windows.values().min().copied() else {
        return Ok(Vec::new());
    };
    let cutoff = millis(now.checked_sub(shortest).unwrap_or(UNIX_EPOCH));
    let mut plan = Vec::new();
    for p in list(store, conn).await? {
        match p.upper_ms {
            Some(upper) if upper > 1 && upper <= cutoff => {
                let keep = kept_because(store, conn, upper, now, &windows).await?;
                plan.push((p, keep));
            }
            _ => {}
        }
    }
    Ok(plan)
}

/// Why the partition of `upper` must be kept, or `None` when it is empty, or every consumer
/// with keys in it has a window here and the partition's newest receipt is older than each.
async fn kept_because(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
    upper: i64,
    now: SystemTime,
    windows: &HashMap<&str, Duration>,
) -> Result<Option<String>, StoreError> {
    let q = store.query(&store.queries.partition_consumers).int(upper);
    let rows = MySqlStore::fetch_all(q, conn).await?;
    for row in &rows {
        let consumer = row.text(0)?;
        let newest = row.opt_int(1)?.unwrap_or(i64::MAX);
        let Some(window) = windows.get(consumer.as_str()) else {
            return Ok(Some(format!(
                "it holds keys of consumer `{consumer}`, which has no window here"
            )));
        };
        if newest >= millis(now.checked_sub(*window).unwrap_or(UNIX_EPOCH)) {
            return Ok(Some(format!(
                "it holds a key received within consumer `{consumer}`'s window"
            )));
        }
    }
    Ok(None)
}
