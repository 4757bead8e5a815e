//! Which deliveries of a channel are not answered yet, so that a batch of acks can go as one
//! `basic.ack` with `multiple` set, which the broker applies to every unanswered delivery up to
//! its tag. That is only right when none of those is still to be rejected or still being
//! stored: batches of one channel commit in any order, so a batch is covered by one frame
//! only as far as no delivery of another batch lies below its tags; above that its deliveries
//! are acked one by one.
//!
//! Three rules keep a `multiple` ack from answering anything it must not:
//! - a delivery leaves the set only after its own frame (ack or reject) has gone out, so a
//!   `multiple` ack computed while it is pending stops below it;
//! - `multiple` acks of a channel go out one at a time, each computed after the last was
//!   sent, so none names a tag an earlier one already answered (the broker closes the channel
//!   on an unknown tag);
//! - a delivery dropped without being answered stays in the set: later batches are then acked
//!   one by one above it rather than answering it unseen.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

/// The delivery tags of one channel not answered yet (by an ack or a reject).
#[derive(Debug, Default)]
pub(crate) struct Unacked {
    unanswered: Mutex<BTreeSet<u64>>,
    /// Held while a `multiple` ack is computed and sent.
    multiple: tokio::sync::Mutex<()>,
}

impl Unacked {
    /// A delivery handed out on the channel.
    pub(crate) fn delivered(&self, tag: u64) {
        self.lock().insert(tag);
    }

    /// A delivery's own frame has gone out.
    pub(crate) fn answered(&self, tag: u64) {
        self.lock().remove(&tag);
    }

    /// The highest of `tags` (sorted) below which every unanswered delivery is one of them:
    /// the tag one `multiple` ack may name. `None` when the lowest unanswered delivery is not
    /// one of them.
    pub(crate) fn covered(&self, tags: &[u64]) -> Option<u64> {
        let unanswered = self.lock();
        let mut ours = tags.iter().peekable();
        let mut last = None;
        for &tag in unanswered.iter() {
            // Tags of ours already answered elsewhere are skipped.
            while ours.peek().is_some_and(|&&t| t < tag) {
                ours.next();
            }
            if ours.peek() == Some(&&tag) {
                last = Some(tag);
                ours.next();
            } else {
                break;
            }
        }
        last
    }

    /// Every tag up to `tag` has been answered by one `multiple` ack.
    pub(crate) fn answered_up_to(&self, tag: u64) {
        let mut unanswered = self.lock();
        let above = unanswered.split_off(&(tag + 1));
        *unanswered = above;
    }

    /// The turn to send a `multiple` ack on this channel.
    pub(crate) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.multiple.lock().await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.unanswered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(tags: &[u64]) -> Unacked {
        let s = Unacked::default();
        for &t in tags {
            s.delivered(t);
        }
        s
    }

    #[test]
    fn a_batch_is_covered_only_up_to_the_first_delivery_of_another() {
        let s = with(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(s.covered(&[1, 2, 3]), Some(3), "the lowest, contiguous");
        assert_eq!(s.covered(&[4, 5, 6]), None, "1 to 3 are still being stored");
        assert_eq!(
            s.covered(&[1, 2, 5]),
            Some(2),
            "3 lies between: 5 goes alone"
        );
        s.answered_up_to(3);
        assert_eq!(s.covered(&[4, 5, 6]), Some(6));
    }

    #[test]
    fn a_pending_reject_and_a_dropped_delivery_stop_the_cover() {
        let s = with(&[1, 2, 3]);
        // 1 is being rejected (its frame not yet out): still in the set.
        assert_eq!(s.covered(&[2, 3]), None);
        s.answered(1);
        assert_eq!(s.covered(&[2, 3]), Some(3));
        // A delivery dropped unanswered (4) keeps everything above it one by one.
        let s = with(&[4, 5]);
        assert_eq!(s.covered(&[5]), None);
    }

    #[test]
    fn tags_of_the_batch_answered_already_are_skipped() {
        let s = with(&[2, 3, 7]);
        assert_eq!(s.covered(&[1, 2, 3, 7]), Some(7));
        s.answered_up_to(7);
        assert_eq!(s.covered(&[8]), None, "nothing unanswered: nothing to name");
    }
}
