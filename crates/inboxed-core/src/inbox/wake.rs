//! In-process wake-ups: a receipt wakes the idle workers of its own process directly.
//!
//! A database notification costs a transaction, a trip through the server and a listener hop,
//! and at a thousand messages a second those transactions are a quarter of the machine's work.
//! When the receipt and the workers share one store (clones of the same store value share one
//! [`LocalWakers`]), the receipt wakes them itself, at once; the database notification is then
//! only for workers in other processes, and the listener of this store drops the ones it sent.
//! SQLite, which has no notifications, gets wake-ups this way too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use crate::envelope::ConsumerName;

/// The idle-worker wake-ups registered by this process's workers, shared by every clone of a
/// store.
#[derive(Debug, Clone)]
pub struct LocalWakers {
    inner: Arc<Registry>,
}

#[derive(Debug)]
struct Registry {
    /// Tells this store family's own database notifications from other processes'.
    sender: String,
    workers: Mutex<HashMap<String, Vec<Weak<Notify>>>>,
}

impl Default for LocalWakers {
    fn default() -> Self {
        Self {
            inner: Arc::new(Registry {
                sender: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
                workers: Mutex::default(),
            }),
        }
    }
}

impl LocalWakers {
    /// Registers `notify` as a running worker of `consumer`, until it is dropped.
    pub fn register(&self, consumer: &ConsumerName, notify: &Arc<Notify>) {
        let mut map = self.lock();
        let list = map.entry(consumer.as_str().to_owned()).or_default();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(notify));
    }

    /// Wakes one idle claim loop of each running worker of `consumer` in this process.
    /// Returns whether there was any.
    pub fn wake(&self, consumer: &ConsumerName) -> bool {
        let map = self.lock();
        let Some(list) = map.get(consumer.as_str()) else {
            return false;
        };
        let mut any = false;
        for notify in list.iter().filter_map(Weak::upgrade) {
            notify.notify_one();
            any = true;
        }
        any
    }

    /// The payload of a database notification for `consumer`: the sender, `:`, the consumer.
    #[must_use]
    pub fn payload(&self, consumer: &ConsumerName) -> String {
        format!("{}:{}", self.inner.sender, consumer.as_str())
    }

    /// Whether a database notification's `payload` concerns `consumer` and came from another
    /// store family (this one's were delivered in process already).
    #[must_use]
    pub fn is_foreign_wake(&self, payload: &str, consumer: &ConsumerName) -> bool {
        match payload.split_once(':') {
            Some((sender, c)) => sender != self.inner.sender && c == consumer.as_str(),
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Weak<Notify>>>> {
        self.inner
            .workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_notifications_are_told_from_foreign_ones() {
        let (a, b) = (LocalWakers::default(), LocalWakers::default());
        let c = ConsumerName::new("billing").unwrap();
        let other = ConsumerName::new("billing:eu").unwrap();
        assert!(!a.is_foreign_wake(&a.payload(&c), &c));
        assert!(a.is_foreign_wake(&b.payload(&c), &c));
        assert!(!a.is_foreign_wake(&b.payload(&other), &c));
        assert!(!a.is_foreign_wake("billing", &c));
    }

    #[tokio::test]
    async fn a_wake_reaches_a_registered_worker_until_it_is_dropped() {
        let wakers = LocalWakers::default();
        let c = ConsumerName::new("billing").unwrap();
        assert!(!wakers.wake(&c));
        let notify = Arc::new(Notify::new());
        wakers.register(&c, &notify);
        assert!(wakers.wake(&c));
        notify.notified().await; // the stored permit: returns at once
        drop(notify);
        assert!(!wakers.wake(&c));
    }
}
