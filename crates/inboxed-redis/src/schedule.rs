//! Requeues that wait: Redis cannot hand an entry back to its group, so a requeued entry stays
//! pending and its due time goes into a sorted set beside the stream (`<stream>:<group>:delays`,
//! entry id scored by due time in Unix milliseconds). A member takes a due entry over with
//! `XCLAIM` whatever its idle time, and one taken over by `XAUTOCLAIM` (idle past
//! `claim_idle`) before its time is left pending rather than delivered. The schedule lives in
//! Redis: a member that restarts, or dies, loses no delay, and any member of the group takes
//! the entry when it is due.
//!
//! Each take-over is one script, so no other member's command falls between its steps: a due
//! entry goes to the member whose script removes it from the set, and one taken over by
//! `XAUTOCLAIM` (ownership only, `JUSTID`) is delivered only if no other member took it since
//! and it is not scheduled for later. An id whose entry was acked meanwhile is removed by the
//! next member that finds it due (`XCLAIM` then returns nothing); one whose entry was trimmed
//! from the stream meanwhile (a publisher's `MAXLEN`) is gone with it. Due times are read
//! against each member's own clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Takes over a due entry: `KEYS` stream, schedule; `ARGV` group, consumer, id. Removing the
/// id from the schedule is the claim to it; the `XCLAIM` reply (no entry when another member
/// removed the id first, or when the entry is no longer pending).
pub(crate) fn take_due() -> redis::Script {
    redis::Script::new(
        r"
if redis.call('ZREM', KEYS[2], ARGV[3]) == 0 then return {} end
return redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3])
",
    )
}

/// Delivers an entry this member took over with `XAUTOCLAIM … JUSTID`: `KEYS` stream,
/// schedule; `ARGV` group, consumer, id, now in Unix ms. Nothing when another member owns it
/// by now, or when it is scheduled for later (it stays pending, this member's, until its
/// time); else its `XCLAIM` reply, the id taken off the schedule if it was on it.
pub(crate) fn take_over() -> redis::Script {
    redis::Script::new(
        r"
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #pending == 0 or pending[1][2] ~= ARGV[2] then return {} end
local due = redis.call('ZSCORE', KEYS[2], ARGV[3])
if due then
  if tonumber(due) > tonumber(ARGV[4]) then return {} end
  redis.call('ZREM', KEYS[2], ARGV[3])
end
return redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3])
",
    )
}

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
