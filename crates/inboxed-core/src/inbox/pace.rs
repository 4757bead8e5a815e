//! How many of a worker's claim loops run a batch at once. More loops than the database can
//! serve do not add throughput: each batch transaction then waits longer on the server's cores
//! and on the row locks of the others, holds its own locks longer, and the whole drain slows
//! down (16 workers of 4 loops each drained a third slower than one worker on two cores). No
//! worker sees the others, so each paces itself on what they all feel: the time its full
//! batches take per row. It starts with one loop, adds one while that time stays near the best
//! it has seen, and gives one up when the time doubles; many workers sharing a server thus
//! settle on as many loops as it serves well, and one worker with a slow handler (an HTTP call
//! per row, say) keeps them all, since more loops do not slow its rows down.
//!
//! A batch that runs far longer than batches do stops counting against the limit, so one hung
//! handler never holds the others back.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// Time per row, over the best seen, below which one more loop is tried.
const GROW_BELOW: f64 = 1.5;
/// Time per row, over the best seen, above which a loop is given up.
const SHRINK_ABOVE: f64 = 2.0;
/// How fast the best time seen forgets, per batch: a best measured under other conditions
/// (a smaller payload, an idle server) cannot pin the limit down for ever.
const BEST_DECAY: f64 = 1.002;
/// Weight of the latest batch in the recent time per row.
const RECENT_WEIGHT: f64 = 0.3;

#[derive(Debug)]
pub(super) struct Pace {
    most: u32,
    adaptive: bool,
    state: Mutex<State>,
    freed: Notify,
}

#[derive(Debug)]
struct State {
    limit: u32,
    /// Batches running, by ticket, with their start.
    running: Vec<(u64, Instant)>,
    next: u64,
    /// Seconds per row: the best seen (slowly forgotten) and the recent average.
    best: Option<f64>,
    recent: Option<f64>,
    /// Recent seconds per batch, for how long a batch may run before it stops counting.
    batch: f64,
    /// Full batches since the limit last changed.
    since_change: u32,
}

/// A batch's slot, handed back with [`Pace::leave`].
#[derive(Debug)]
pub(super) struct Ticket(u64);

impl Pace {
    /// Up to `most` loops at once; starting at one when `adaptive`, else always `most`.
    pub(super) fn new(most: u32, adaptive: bool) -> Self {
        let most = most.max(1);
        Self {
            most,
            adaptive,
            state: Mutex::new(State {
                limit: if adaptive { 1 } else { most },
                running: Vec::new(),
                next: 0,
                best: None,
                recent: None,
                batch: 0.0,
                since_change: 0,
            }),
            freed: Notify::new(),
        }
    }

    /// Loops allowed to run a batch at once now.
    pub(super) fn limit(&self) -> u32 {
        self.lock().limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for a slot; `None` when `stop` turns true first.
    pub(super) async fn enter(&self, stop: &mut watch::Receiver<bool>) -> Option<Ticket> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait = {
                let mut s = self.lock();
                let overstay = Duration::from_secs(2).max(Duration::from_secs_f64(s.batch * 4.0));
                let counted = s
                    .running
                    .iter()
                    .filter(|(_, t)| t.elapsed() < overstay)
                    .count();
                if counted < s.limit as usize {
                    let ticket = s.next;
                    s.next += 1;
                    s.running.push((ticket, Instant::now()));
                    return Some(Ticket(ticket));
                }
                // Also the time after which the oldest batch stops counting.
                overstay / 4
            };
            if *stop.borrow() {
                return None;
            }
            tokio::select! {
                () = &mut freed => {}
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return None,
            }
        }
    }

    /// Hands the slot back. `rows` claimed in a batch of `full` size took `took`.
    pub(super) fn leave(&self, ticket: Ticket, rows: u64, full: bool, took: Duration) {
        {
            let mut s = self.lock();
            s.running.retain(|(t, _)| *t != ticket.0);
            if rows > 0 {
                let secs = took.as_secs_f64();
                s.batch = if s.batch == 0.0 {
                    secs
                } else {
                    RECENT_WEIGHT * secs + (1.0 - RECENT_WEIGHT) * s.batch
                };
            }
            if self.adaptive && full && rows > 0 {
                #[allow(clippy::cast_precision_loss, reason = "rows per batch")]
                let per_row = took.as_secs_f64() / rows as f64;
                self.adjust(&mut s, per_row);
            }
        }
        self.freed.notify_waiters();
    }

    /// One full batch's time per row: the limit moves by one at most, and only after as many
    /// full batches as loops ran since the last move, so that each move is judged on batches
    /// that ran under it.
    fn adjust(&self, s: &mut State, per_row: f64) {
        let best = s.best.map_or(per_row, |b| (b * BEST_DECAY).min(per_row));
        let recent = s.recent.map_or(per_row, |r| {
            RECENT_WEIGHT * per_row + (1.0 - RECENT_WEIGHT) * r
        });
        (s.best, s.recent) = (Some(best), Some(recent));
        s.since_change += 1;
        if s.since_change < s.limit {
            return;
        }
        if recent > SHRINK_ABOVE * best && s.limit > 1 {
            s.limit -= 1;
            s.since_change = 0;
        } else if recent < GROW_BELOW * best && s.limit < self.most {
            s.limit += 1;
            s.since_change = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` full batches of 50 rows at `per_row_ms` each, one after another.
    async fn full(pace: &Pace, per_row_ms: u64, n: u32) {
        let (_stop, mut stopped) = watch::channel(false);
        for _ in 0..n {
            let ticket = pace.enter(&mut stopped).await.unwrap();
            pace.leave(ticket, 50, true, Duration::from_millis(per_row_ms * 50));
        }
    }

    #[tokio::test]
    async fn grows_while_rows_keep_their_time_and_shrinks_when_it_doubles() {
        let pace = Pace::new(4, true);
        assert_eq!(pace.limit(), 1, "starts with one loop");
        full(&pace, 1, 20).await;
        assert_eq!(pace.limit(), 4, "grown to the most while rows keep 1 ms");
        full(&pace, 3, 40).await;
        assert_eq!(
            pace.limit(),
            1,
            "given back while rows take three times as long"
        );
    }

    #[tokio::test]
    async fn partial_batches_do_not_move_it_and_a_fixed_pace_never_moves() {
        let pace = Pace::new(4, true);
        let (_stop, mut stopped) = watch::channel(false);
        for _ in 0..20 {
            let ticket = pace.enter(&mut stopped).await.unwrap();
            pace.leave(ticket, 3, false, Duration::from_millis(3));
        }
        assert_eq!(
            pace.limit(),
            1,
            "a loop that empties the queue needs no company"
        );
        let fixed = Pace::new(4, false);
        full(&fixed, 1, 5).await;
        full(&fixed, 9, 40).await;
        assert_eq!(fixed.limit(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_batch_stops_counting_and_stop_ends_the_wait() {
        let pace = Pace::new(4, true);
        let (stop, mut stopped) = watch::channel(false);
        let _hung = pace.enter(&mut stopped).await.unwrap();
        let started = tokio::time::Instant::now();
        assert!(pace.enter(&mut stopped).await.is_some());
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "waited until the hung batch overstayed"
        );
        let waiting = tokio::spawn(async move {
            let pace = Pace::new(1, true);
            let _held = pace.enter(&mut stopped).await;
            pace.enter(&mut stopped).await.is_none()
        });
        tokio::task::yield_now().await;
        stop.send(true).unwrap();
        assert!(waiting.await.unwrap(), "stop ends the wait for a slot");
    }
}
