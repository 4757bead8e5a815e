//! Requeues that wait: Redis cannot hand an entry back to its group, so a requeued entry stays
//! pending and its due time goes into a sorted set beside the stream (`<stream>:<group>:delays`,
//! entry id scored by due time in Unix milliseconds). A member takes a due entry over with
//! `XCLAIM` whatever its idle time, and one taken over by `XAUTOCLAIM` (idle past
//! `claim_idle`) before its time is left pending rather than delivered. The schedule lives in
//! Redis: a member that restarts, or dies, loses no delay, and any member of the group takes
//! the entry when it is due.
//!
//! Removing the id from the set is the lock: of two members that see an entry due, the one
//! whose `ZREM` removed it delivers it. An id whose entry was acked meanwhile is removed by the
//! next member that finds it due (`XCLAIM` then returns nothing). Due times are read against
//! each member's own clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The key of the schedule of `group` on `stream`.
pub(crate) fn key(stream: &str, group: &str) -> String {
    format!("{stream}:{group}:delays")
}

/// Milliseconds since the Unix epoch, `after` from now.
pub(crate) fn unix_ms(after: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from((now + after).as_millis()).unwrap_or(u64::MAX)
}
