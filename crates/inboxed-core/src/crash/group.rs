//! Suspects in groups: who may join the group running now, and who opens the next.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::OwnedRwLockWriteGuard;

use super::{Scope, Waiting};

/// The suspects running together, none but them in their scope.
#[derive(Debug)]
pub(super) struct Group {
    /// The scope's lock, held for the group.
    _alone: OwnedRwLockWriteGuard<()>,
    running: usize,
    /// The most the group may hold: the smallest limit of those who joined it.
    room: usize,
    /// Whether it still takes members: until the first leaves, so that a stream of suspects
    /// cannot keep it open while the rest of the scope, a cornered poison among it, waits.
    admitting: bool,
}

impl Scope {
    /// Joins the group running now when it has room for one more within `limit`, or opens a
    /// group once nothing else of the scope runs: `true` when others may run in it. A suspect
    /// that finds no other suspect waiting runs alone, as a lone redelivery does (one after a
    /// crash of a consumer that ran one delivery at a time): its crash is its own.
    pub(super) async fn group_turn(&self, limit: usize, waiting: &Waiting) -> bool {
        // Asked once, so that a suspect keeps its place in the lock's queue while it looks at
        // the groups that open.
        let alone = Arc::clone(&self.lock).write_owned();
        tokio::pin!(alone);
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.join(limit) {
                return true;
            }
            tokio::select! {
                alone = &mut alone => {
                    // Others that may join: the joinable waiters but this one.
                    let own = usize::from(waiting.limit > 1);
                    let others = self.joinable.load(Ordering::Relaxed) > own;
                    let room = if others { limit } else { 1 };
                    let mut group = self.group_lock();
                    *group = Some(Group { _alone: alone, running: 1, room, admitting: true });
                    drop(group);
                    self.opened.notify_waiters();
                    return room > 1;
                }
                () = &mut opened => {}
            }
        }
    }

    fn join(&self, limit: usize) -> bool {
        let mut group = self.group_lock();
        match group.as_mut() {
            Some(open) if open.admitting && open.running < open.room.min(limit) => {
                open.running += 1;
                open.room = open.room.min(limit);
                true
            }
            _ => false,
        }
    }

    /// One member left; the last one closes the group, and the scope runs as before.
    pub(super) fn leave(&self) {
        let mut group = self.group_lock();
        if let Some(open) = group.as_mut() {
            open.running -= 1;
            open.admitting = false;
            if open.running == 0 {
                *group = None;
            }
        }
    }

    fn group_lock(&self) -> std::sync::MutexGuard<'_, Option<Group>> {
        self.group
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
