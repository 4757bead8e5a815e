//! Partitioned mode's maintenance: partitions created ahead, expired ones detached without
//! blocking claims and dropped, one process at a time.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};
use tracing::{info, warn};

use inboxed_core::inbox::store::millis;
use inboxed_core::retention::{PartitionConfig, PartitionReport};
use inboxed_core::{ConsumerName, StoreError};

use crate::PgStore;
use crate::partition_list::ExpiryPlan;

/// Creates the partitions missing up to `config.ahead` periods past the current one (at
/// least one).
pub(crate) async fn create(
    store: &PgStore,
    conn: &mut PgConnection,
    config: PartitionConfig,
) -> Result<u64, StoreError> {
    let step = i64::try_from(config.interval.as_secs().max(1)).unwrap_or(i64::MAX);
    let created: i32 = store
        .query(&store.queries.create_partitions)
        .bind(step)
        .bind(i32::try_from(config.ahead.max(1)).unwrap_or(i32::MAX))
        .fetch_one(&mut *conn)
        .await
        .and_then(|r| r.try_get(0))
        .map_err(StoreError::from_sqlx)?;
    Ok(u64::try_from(created).unwrap_or(0))
}

/// A connection of its own for maintenance: closing it releases the session lock even when
/// the pass is cut short.
pub(crate) async fn connect(store: &PgStore) -> Result<PgConnection, StoreError> {
    PgConnection::connect_with(&store.pool.connect_options())
        .await
        .map_err(StoreError::from_sqlx)
}

/// One maintenance pass, unless another process is running one: creates partitions ahead,
/// then drops each expired partition whose consumers are all in `windows` and past their own
/// window (the rest are kept and counted), and finishes what an interrupted pass left.
pub(crate) async fn maintain(
    store: &PgStore,
    config: PartitionConfig,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<PartitionReport, StoreError> {
    let mut conn = connect(store).await?;
    let mine: bool = store
        .query(&store.queries.lock_maintenance)
        .fetch_one(&mut conn)
        .await
        .and_then(|r| r.try_get(0))
        .map_err(StoreError::from_sqlx)?;
    if !mine {
        info!("another process is maintaining the partitions; skipping this pass");
        return Ok(PartitionReport::skipped());
    }
    let result = pass(store, &mut conn, config, now, windows).await;
    let _ = conn.close().await;
    result
}

async fn pass(
    store: &PgStore,
    conn: &mut PgConnection,
    config: PartitionConfig,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<PartitionReport, StoreError> {
    let mut report = PartitionReport::new(create(store, conn, config).await?, 0);
    for candidate in plan(store, conn, now, windows).await? {
        if candidate.keep.is_some() {
            report.kept += 1;
            continue;
        }
        let (name, state) = (&candidate.name, candidate.state.as_str());
        let started = Instant::now();
        // The name comes from the catalog, quoted there (format %I); nothing else is spliced.
        if state != "detached" {
            let finalize = if state == "pending" {
                "FINALIZE"
            } else {
                "CONCURRENTLY"
            };
            let detach = store
                .queries
                .detach_partition
                .replace("{{partition}}", name)
                .replace("{{finalize}}", finalize);
            sqlx::raw_sql(AssertSqlSafe(detach))
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from_sqlx)?;
        }
        let drop = store.queries.drop_partition.replace("{{partition}}", name);
        sqlx::raw_sql(AssertSqlSafe(drop))
            .execute(&mut *conn)
            .await
            .map_err(StoreError::from_sqlx)?;
        let took = started.elapsed();
        metrics::histogram!(inboxed_core::metrics::PARTITION_DROP_SECONDS)
            .record(took.as_secs_f64());
        info!(partition = %name, elapsed = ?took, "dropped an expired partition of processed keys");
        report.dropped += 1;
        report.longest_drop = report.longest_drop.max(took);
    }
    Ok(report)
}

/// The partitions past the shortest of `windows`, and the leftovers of an interrupted pass,
/// each with what a pass would do: drop it, or keep it and why.
pub(crate) async fn plan(
    store: &PgStore,
    conn: &mut PgConnection,
    now: SystemTime,
    windows: &[(ConsumerName, Duration)],
) -> Result<Vec<ExpiryPlan>, StoreError> {
    let windows: HashMap<&str, Duration> = windows.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    // No consumer declared: nothing may be dropped (but leftovers of a pass are finished).
    let shortest = windows.values().min().copied();
    let cutoff = shortest.map_or(i64::MIN, |w| {
        millis(now.checked_sub(w).unwrap_or(UNIX_EPOCH))
    });
    let candidates = store
        .query(&store.queries.expired_partitions)
        .bind(cutoff as f64)
        .fetch_all(&mut *conn)
        .await
        .map_err(StoreError::from_sqlx)?;
    let mut plan = Vec::with_capacity(candidates.len());
    for row in candidates {
        let name: String = row.try_get("partition").map_err(StoreError::from_sqlx)?;
        let upper: Option<f64> = row.try_get("upper_ms").map_err(StoreError::from_sqlx)?;
        let state: String = row.try_get("state").map_err(StoreError::from_sqlx)?;
        let to = upper.map(|ms| UNIX_EPOCH + Duration::from_secs_f64(ms.max(0.0) / 1e3));
        // A detach already begun is always finished.
        let keep = if state == "attached" {
            let upper = to.unwrap_or(UNIX_EPOCH);
            kept_because(store, conn, &name, upper, now, &windows).await?
        } else {
            None
        };
        plan.push(ExpiryPlan {
            name,
            to,
            state,
            keep,
        });
    }
    Ok(plan)
}

/// Why `partition` must be kept, or `None` when every consumer with keys in it is one of
/// `windows` and its window has passed over the partition's upper bound.
async fn kept_because(
    store: &PgStore,
    conn: &mut PgConnection,
    partition: &str,
    upper: SystemTime,
    now: SystemTime,
    windows: &HashMap<&str, Duration>,
) -> Result<Option<String>, StoreError> {
    let sql = store
        .queries
        .partition_consumers
        .replace("{{partition}}", partition);
    let consumers: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await
        .map_err(StoreError::from_sqlx)?;
    for c in &consumers {
        let Some(window) = windows.get(c.as_str()) else {
            warn!(partition, consumer = %c, "partition kept: it holds keys of a consumer this purger has no window for");
            return Ok(Some(format!(
                "it holds keys of consumer `{c}`, which has no window here"
            )));
        };
        if upper > now.checked_sub(*window).unwrap_or(UNIX_EPOCH) {
            return Ok(Some(format!(
                "consumer `{c}`'s window has not passed over it"
            )));
        }
    }
    Ok(None)
}
