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
