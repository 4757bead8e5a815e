//! pgmq's side of `inboxed-bench peer`: its client, filling its queue, and its worker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Job;

pub(super) const QUEUE: &str = "bench_jobs";
/// pgmq's visibility timeout, seconds: a worker that dies lets its jobs be read again then.
const VISIBILITY: i32 = 30;
/// `jobs` into an emptied pgmq queue with `send_batch`, 1,000 a call.
pub(super) async fn into_pgmq(url: &str, jobs: &[Job]) -> anyhow::Result<()> {
    let queue = pgmq_client(url, 1).await?;
    queue.purge_queue(QUEUE).await?;
    for chunk in jobs.chunks(1_000) {
        queue.send_batch(QUEUE, chunk).await?;
    }
    queue.connection.close().await;
    Ok(())
}

/// pgmq's client on a pool of its own of `connections`.
pub(super) async fn pgmq_client(
    url: impl AsRef<str>,
    connections: u32,
) -> anyhow::Result<pgmq::PGMQueueExt> {
    let pool = sqlx08::postgres::PgPoolOptions::new()
        .max_connections(connections)
        .connect(url.as_ref())
        .await?;
    Ok(pgmq::PGMQueueExt::new_with_pool(pool).await)
}

/// pgmq's worker: in one transaction, read a batch, credit its accounts (in account order
/// when `sorted`, else in arrival order), delete it.
pub(super) async fn pgmq_worker(
    queue: pgmq::PGMQueueExt,
    (batch, sorted): (u32, bool),
    done: &AtomicU64,
    total: i64,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    let qty = i32::try_from(batch)?;
    loop {
        let mut tx = queue.connection.begin().await?;
        let jobs: Vec<pgmq::Message<Job>> = queue
            .read_batch_with_cxn(QUEUE, VISIBILITY, qty, &mut *tx)
            .await?;
        if jobs.is_empty() {
            tx.commit().await?;
            if done.load(Ordering::Relaxed) >= u64::try_from(total)? {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(1)) => continue,
                () = &mut shutdown => break,
            }
        }
        let mut accounts: Vec<(i64, i64)> =
            jobs.iter().map(|j| (j.message.account, j.msg_id)).collect();
        if sorted {
            accounts.sort_unstable();
        } else {
            // Arrival order, as the defaults run a batch's rows (its RETURNING has none).
            accounts.sort_unstable_by_key(|&(_, id)| id);
        }
        let mut credited = Ok(());
        for (account, _) in accounts {
            credited =
                sqlx08::query("UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1")
                    .bind(account)
                    .execute(&mut *tx)
                    .await
                    .map(drop);
            if credited.is_err() {
                break;
            }
        }
        match credited {
            // Batches crediting in arrival order can deadlock: as its user would, roll back
            // (the read with it: the jobs are visible again) and read again.
            Err(sqlx08::Error::Database(e)) if e.code().as_deref() == Some("40P01") => {
                tx.rollback().await?;
                continue;
            }
            credited => credited?,
        }
        let ids: Vec<i64> = jobs.iter().map(|j| j.msg_id).collect();
        queue.delete_batch_with_cxn(QUEUE, &ids, &mut *tx).await?;
        tx.commit().await?;
        done.fetch_add(ids.len() as u64, Ordering::Relaxed);
    }
    queue.connection.close().await;
    Ok(())
}
