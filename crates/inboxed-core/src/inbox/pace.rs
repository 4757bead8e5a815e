//! How many of a worker's claim loops run a batch at once. More loops than the database can
//! serve do not add throughput: each batch transaction then waits longer on the server's cores
//! and on the row locks of the others, holds its own locks longer, and the whole drain slows
//! down (16 workers of 4 loops each drained a third slower than one worker on two cores). No
//! worker sees the others, so each paces itself on what they all feel: the time its full
//! batches take per row. It starts with one loop, adds one while that time stays near the best
//! it has seen, and gives one up when the time doubles; many workers sharing a server thus
//! settle on as many loops as it serves well, and one worker with a slow handler (an HTTP call
//! per row, say) keeps them all, since more loops do not slow its rows down. A loop given up
//! that did not bring the time down (the slowdown was elsewhere: a downstream service got
//! slower) is taken back at once, with that time as the new best.
//!
//! A batch that runs far longer than batches do stops counting against the limit, so one hung
//! handler never holds the others back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// Time per row, over the best seen, below which one more loop is tried.
const GROW_BELOW: f64 = 1.5;
/// Time per row, over the best seen, above which a loop is given up.
const SHRINK_ABOVE: f64 = 2.0;
/// Weight of the latest batch in the recent time per batch.
const RECENT_WEIGHT: f64 = 0.3;
/// Full batches judged at the least before the limit moves.
const JUDGED_AFTER: u32 = 3;
/// A loop given up must bring the time per row below this share of what it was, or it is
/// taken back.
const SHRINK_HELPS_BELOW: f64 = 0.8;

#[derive(Debug)]
pub(super) struct Pace {
    /// `concurrency`, as configured.
    configured: u32,
    adaptive: bool,
    state: Mutex<State>,
    freed: Notify,
}

#[derive(Debug)]
struct State {
    /// Loops allowed to run a batch at once.
    limit: u32,
    /// The most loops: `concurrency`, or fewer when the store runs fewer.
    most: u32,
    /// Batches running, by ticket, with their start.
    running: Vec<(u64, Instant)>,
    next: u64,
    /// Seconds per row: the best seen (until a loop given up shows that the time moved for
    /// other reasons), and the sum and count of the full batches run under the current limit.
    best: Option<f64>,
    under: (f64, u32),
    /// Recent seconds per batch, for how long a batch may run before it stops counting.
    batch: f64,
    /// The recent time per row when a loop was last given up, until that is judged.
    shrunk_from: Option<f64>,
    /// The workers registered on the database (0 while not known), when paced: the most
    /// loops is then this worker's share of the server's.
    peers: Option<Arc<AtomicU32>>,
}

/// A batch's slot, handed back with [`Pace::leave`].
#[derive(Debug)]
pub(super) struct Ticket(u64);

impl Pace {
    /// Up to `most` loops at once; starting at one when `adaptive`, else always `most`.
    pub(super) fn new(most: u32, adaptive: bool) -> Self {
        let most = most.max(1);
        Self {
            configured: most,
            adaptive,
            state: Mutex::new(State {
                limit: if adaptive { 1 } else { most },
                most,
                running: Vec::new(),
                next: 0,
                best: None,
                under: (0.0, 0),
                batch: 0.0,
                shrunk_from: None,
                peers: None,
            }),
            freed: Notify::new(),
        }
    }

    /// Loops allowed to run a batch at once now.
    pub(super) fn limit(&self) -> u32 {
        let s = self.lock();
        s.limit.min(Self::cap(&s))
    }

    /// The most loops now: among `n` registered workers, a share of `most` (rounded up, one
    /// at least). Workers share one server: 16 of them growing to 4 loops each ran 64 batches
    /// on two cores and drained slower than one worker alone; at one loop each they drain as
    /// fast as one worker at its best.
    fn cap(s: &State) -> u32 {
        let n = s.peers.as_ref().map_or(0, |p| p.load(Ordering::Relaxed));
        if n > 1 {
            s.most.div_ceil(n).max(1)
        } else {
            s.most
        }
    }

    /// Whether more workers are registered on the database than this one's `concurrency`:
    /// each then has a share of less than one loop, which a store's batch gate enforces
    /// (`InboxStore::batch_gate`). Never while the count is not known.
    pub(super) fn crowded(&self) -> bool {
        let s = self.lock();
        s.peers
            .as_ref()
            .is_some_and(|p| p.load(Ordering::Relaxed) > self.configured)
    }

    /// At the start of a run of `loops` loops: the limit never exceeds them, and batches of
    /// an earlier run cut short at its end no longer count. `peers`, when known, is how many
    /// workers are registered on the database.
    pub(super) fn start(&self, loops: u32, peers: Option<Arc<AtomicU32>>) {
        let mut s = self.lock();
        s.peers = peers.filter(|_| self.adaptive);
        s.running.clear();
        s.under = (0.0, 0);
        s.most = self.configured.min(loops.max(1));
        s.limit = if self.adaptive {
            s.limit.min(s.most)
        } else {
            s.most
        };
        drop(s);
        self.freed.notify_waiters();
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
                if counted < s.limit.min(Self::cap(&s)) as usize {
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
            #[allow(clippy::cast_precision_loss, reason = "rows per batch")]
            let per_row = took.as_secs_f64() / rows.max(1) as f64;
            if self.adaptive && full && rows > 0 && per_row > 0.0 {
                Self::adjust(&mut s, per_row);
            }
        }
        self.freed.notify_waiters();
    }

    /// One full batch's time per row. The limit moves by one at most, judged on the mean time
    /// per row of the full batches that ran under it (at least as many as loops, and three),
    /// against the best seen.
    fn adjust(s: &mut State, per_row: f64) {
        s.under = (s.under.0 + per_row, s.under.1.saturating_add(1));
        if s.under.1 < s.limit.max(JUDGED_AFTER) {
            return;
        }
        let mean = s.under.0 / f64::from(s.under.1);
        s.under = (0.0, 0);
        // The best mean, not the best batch: against the quickest single batch, a mean of
        // batches whose times vary (fsync, a checkpoint) looked twice as slow at one loop, and
        // one worker never grew past one or two loops where four drained 1.6 times as fast.
        let best = s.best.map_or(mean, |b| b.min(mean));
        s.best = Some(best);
        let cap = Self::cap(s);
        s.limit = s.limit.min(cap);
        if let Some(before) = s.shrunk_from.take()
            && mean > SHRINK_HELPS_BELOW * before
        {
            // Fewer loops did not help: the time per row is not theirs to mend.
            s.limit = (s.limit + 1).min(cap);
            s.best = Some(mean);
            return;
        }
        if mean > SHRINK_ABOVE * best && s.limit > 1 {
            s.limit -= 1;
            s.shrunk_from = Some(mean);
        } else if mean < GROW_BELOW * best && s.limit < cap {
            s.limit += 1;
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
    async fn settles_where_more_loops_stop_helping() {
        // A server whose rows take 1 ms up to two loops at once and 1 ms more per loop
        // beyond: with four the time per row is three times the best.
        let pace = Pace::new(4, true);
        assert_eq!(pace.limit(), 1, "starts with one loop");
        let (_stop, mut stopped) = watch::channel(false);
        let mut seen = Vec::new();
        for _ in 0..300 {
            let per_row_ms = 1 + u64::from(pace.limit().saturating_sub(2));
            let ticket = pace.enter(&mut stopped).await.unwrap();
            pace.leave(ticket, 50, true, Duration::from_millis(per_row_ms * 50));
            seen.push(pace.limit());
        }
        assert!(seen.contains(&3), "it tried a third loop: {seen:?}");
        let settled = &seen[100..];
        assert!(
            settled.iter().all(|l| (2..=3).contains(l)),
            "settled at two or three loops, never four: {seen:?}"
        );
    }

    #[tokio::test]
    async fn batches_whose_times_vary_do_not_hold_a_worker_at_one_loop() {
        // Rows take 1 ms or 4 ms by turns, however many loops run: more loops cost nothing.
        let pace = Pace::new(4, true);
        pace.start(4, None);
        for i in 0..60 {
            full(&pace, if i % 2 == 0 { 1 } else { 4 }, 1).await;
        }
        assert_eq!(
            pace.limit(),
            4,
            "judged on means, not on the quickest batch"
        );
    }

    #[tokio::test]
    async fn a_worker_among_many_takes_its_share_of_the_loops() {
        let peers = Arc::new(AtomicU32::new(4));
        let pace = Pace::new(4, true);
        pace.start(4, Some(Arc::clone(&peers)));
        full(&pace, 1, 40).await;
        assert_eq!(pace.limit(), 1, "four workers: one loop each");
        peers.store(2, Ordering::Relaxed);
        full(&pace, 1, 40).await;
        assert_eq!(pace.limit(), 2, "two workers: two each");
        peers.store(0, Ordering::Relaxed);
        full(&pace, 1, 40).await;
        assert_eq!(pace.limit(), 4, "not known: all of its own");
        let fixed = Pace::new(4, false);
        fixed.start(4, Some(Arc::new(AtomicU32::new(8))));
        assert_eq!(fixed.limit(), 4, "loops set by hand are not shared");
    }

    #[tokio::test]
    async fn a_slowdown_fewer_loops_do_not_mend_gives_the_loops_back() {
        let pace = Pace::new(4, true);
        full(&pace, 1, 20).await;
        assert_eq!(pace.limit(), 4, "grown to the most while rows keep 1 ms");
        // A downstream service gets three times slower, whatever the loops.
        full(&pace, 3, 60).await;
        assert_eq!(
            pace.limit(),
            4,
            "the loop given up did not help and was taken back"
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
