//! A simulated at-least-once broker. It redelivers whatever is not acked, hands some messages
//! to two workers at once, and decides per delivery whether the consumer "crashes" at a
//! random point or loses its ack after the commit. Time is compressed: a redelivery that a
//! real broker would make after a visibility timeout happens at once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use inboxed_core::{BoxError, Delivery, Envelope, EnvelopeError, MessageId};

/// A published message: `id` is `None` for a delivery that carries no usable key.
#[derive(Debug, Clone)]
pub(super) struct Published {
    pub(super) id: Option<String>,
    pub(super) payload: Vec<u8>,
}

/// What goes wrong with one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    None,
    /// The consumer dies at a random point of processing (before or after its commit).
    Crash,
    /// The consumer commits and dies before its ack reaches the broker.
    LoseAck,
}

/// Probabilities of each fault, per delivery.
#[derive(Debug, Clone, Copy)]
pub(super) struct FaultRates {
    pub(super) crash: f64,
    pub(super) lose_ack: f64,
    pub(super) concurrent: f64,
}

#[derive(Debug, Default)]
struct State {
    messages: Vec<Published>,
    acked: Vec<bool>,
    unacked: usize,
    deliveries: Vec<u32>,
    queue: VecDeque<usize>,
    rng: Option<fastrand::Rng>,
    stats: Stats,
}

/// Counters for the report.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Stats {
    pub(super) deliveries: u64,
    pub(super) crashes: u64,
    pub(super) lost_acks: u64,
    pub(super) concurrent: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Broker {
    state: Arc<Mutex<State>>,
    wake: Arc<Notify>,
    rates: FaultRates,
}

impl Broker {
    pub(super) fn new(messages: Vec<Published>, rates: FaultRates, seed: u64) -> Self {
        let n = messages.len();
        let state = State {
            messages,
            acked: vec![false; n],
            unacked: n,
            deliveries: vec![0; n],
            queue: (0..n).collect(),
            rng: Some(fastrand::Rng::with_seed(seed)),
            stats: Stats::default(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            wake: Arc::new(Notify::new()),
            rates,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next delivery and its fault, or `None` once everything is acked.
    pub(super) async fn next(&self) -> Option<(DemoDelivery, Fault)> {
        loop {
            let wait = self.wake.notified();
            {
                let mut s = self.lock();
                if s.unacked == 0 {
                    self.wake.notify_waiters();
                    return None;
                }
                if let Some(index) = s.queue.pop_front() {
                    if s.acked[index] {
                        continue;
                    }
                    let mut rng = s.rng.take().unwrap_or_default();
                    if rng.f64() < self.rates.concurrent {
                        s.queue.push_front(index);
                        s.stats.concurrent += 1;
                    }
                    let roll = rng.f64();
                    s.rng = Some(rng);
                    let fault = if roll < self.rates.crash {
                        Fault::Crash
                    } else if roll < self.rates.crash + self.rates.lose_ack {
                        Fault::LoseAck
                    } else {
                        Fault::None
                    };
                    s.deliveries[index] += 1;
                    s.stats.deliveries += 1;
                    let delivery = DemoDelivery {
                        broker: self.clone(),
                        index,
                        message: s.messages[index].clone(),
                        count: s.deliveries[index],
                        lose_ack: fault == Fault::LoseAck,
                    };
                    return Some((delivery, fault));
                }
            }
            wait.await;
        }
    }

    fn settle(&self, index: usize, acked: bool) {
        let mut s = self.lock();
        if acked && !s.acked[index] {
            s.acked[index] = true;
            s.unacked -= 1;
        } else if !acked && !s.acked[index] {
            s.queue.push_back(index);
        }
        drop(s);
        self.wake.notify_waiters();
    }

    /// The consumer handling `index` died: the broker will deliver it again.
    pub(super) fn crashed(&self, index: usize) {
        self.lock().stats.crashes += 1;
        self.settle(index, false);
    }

    pub(super) fn stats(&self) -> Stats {
        self.lock().stats
    }

    pub(super) fn unacked_count(&self) -> usize {
        self.lock().unacked
    }

    pub(super) fn acked(&self) -> usize {
        let s = self.lock();
        s.messages.len() - s.unacked
    }
}

/// One delivery of a published message.
#[derive(Debug)]
pub(super) struct DemoDelivery {
    broker: Broker,
    pub(super) index: usize,
    message: Published,
    count: u32,
    lose_ack: bool,
}

impl Delivery for DemoDelivery {
    fn envelope(&self) -> Result<Envelope, EnvelopeError> {
        let id = self.message.id.as_deref().ok_or(EnvelopeError::MissingId)?;
        Ok(Envelope::new(MessageId::new(id)?, self.message.payload.clone()).with_type("Transfer"))
    }

    fn payload(&self) -> &[u8] {
        &self.message.payload
    }

    fn delivery_count(&self) -> Option<u32> {
        Some(self.count)
    }

    async fn ack(self) -> Result<(), BoxError> {
        if self.lose_ack {
            self.broker.lock().stats.lost_acks += 1;
            self.broker.settle(self.index, false);
        } else {
            self.broker.settle(self.index, true);
        }
        Ok(())
    }

    async fn requeue(self, _delay: Option<Duration>) -> Result<(), BoxError> {
        self.broker.settle(self.index, false);
        Ok(())
    }

    async fn reject(self) -> Result<(), BoxError> {
        self.broker.settle(self.index, true);
        Ok(())
    }
}
