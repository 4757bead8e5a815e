//! The load every throughput scenario drives: a unit of work called in a loop on concurrent
//! tasks for a fixed time.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Calls `work` in a loop on `workers` tasks for `dur`; each call returns how many messages it
/// completed. Returns the total and the seconds until the last task finished its last call.
///
/// # Errors
/// The first call that failed (the run stops there).
pub(crate) async fn for_duration<W, Fut>(
    workers: usize,
    dur: Duration,
    work: W,
) -> anyhow::Result<(u64, f64)>
where
    W: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<u64>> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (stop, done, work) = (stop.clone(), done.clone(), work.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                done.fetch_add(work().await?, Ordering::Relaxed);
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    tokio::time::sleep(dur).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    Ok((
        done.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
    ))
}

/// Interleaved rounds: in each round, at each worker count, every variant once, starting one
/// further along each round so that no variant always runs first (into a cold cache, or a
/// checkpoint another left). `measure` gives a variant's rate at a worker count; `report`
/// prints a round's row (round from 1, workers, rates in `variants`' order). Returns every
/// row with its worker count, for [`crate::median_at`].
pub(crate) async fn rounds<V: Copy, const N: usize>(
    rounds: usize,
    workers: &[usize],
    variants: [V; N],
    mut measure: impl AsyncFnMut(V, usize) -> anyhow::Result<f64>,
    report: impl Fn(usize, usize, &[f64; N]),
) -> anyhow::Result<Vec<(usize, [f64; N])>> {
    let mut rates = Vec::new();
    for round in 0..rounds {
        for &w in workers {
            let mut row = [0.0; N];
            for k in 0..N {
                let i = (k + round) % N;
                row[i] = measure(variants[i], w).await?;
            }
            report(round + 1, w, &row);
            rates.push((w, row));
        }
    }
    Ok(rates)
}
