//! Settings of a RabbitMQ source: plain fields, each with its default.

use std::path::PathBuf;
use std::time::Duration;

use inboxed_core::{Backoff, KeySource};

/// Which kind of queue [`RabbitConfig::declare`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueKind {
    /// A durable classic queue. Redeliveries are only flagged (`redelivered`), so the store
    /// counts attempts itself.
    Classic,
    /// A quorum queue: replicated, and it counts deliveries (`x-delivery-count`), which the
    /// processor then uses as the attempt count.
    Quorum,
}

/// Where and how to consume.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RabbitConfig {
    /// AMQP URI, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`. A cluster's nodes go where the
    /// host is, separated by commas (`amqp://app:secret@r1:5672,r2:5672,r3:5672/%2f`): the
    /// source connects, and reconnects when its node goes away, to the first that answers.
    /// No default.
    pub uri: String,
    /// The queue to consume. No default.
    pub queue: String,
    /// How many unacked deliveries the broker sends ahead (`basic.qos`): the bound on messages
    /// in flight in this process, and with it the back-pressure on the broker when the database
    /// is slow. Defaults to 32; keep it at or above the consumer loop's concurrency. AMQP
    /// carries at most 65,535: a larger value is sent as that.
    pub prefetch: usize,
    /// Where the message id comes from. Defaults to the AMQP `message_id` property.
    pub key: KeySource,
    /// Declare the queue (durable) before consuming, or `None` to require that it exists.
    /// Defaults to `None`: queues, their dead-letter exchanges and policies belong to the
    /// broker's configuration.
    pub declare: Option<QueueKind>,
    /// Delay between reconnection attempts after the broker went away. Defaults to 100 ms
    /// doubling to 10 s, with jitter.
    pub reconnect: Backoff,
    /// RabbitMQ cannot delay a requeue. A delivery asked to come back after one of these
    /// steps or more is parked in that step's delay queue (the longest step it reaches; named
    /// `<queue>.delay.10s` and so on: quorum queues whose TTL dead-letters back to `queue`,
    /// each declared when first used), and acked once the broker confirmed the copy: the delay
    /// lives in the broker and survives a restart of the consumer. Shorter delays are held in
    /// process ([`RabbitConfig::max_requeue_hold`]). Defaults to 10 s, 1 min, 5 min and 15 min,
    /// the steps of the default [`Ladder`](inboxed_core::Ladder) from 10 s; empty: every delay
    /// is held in process, at most `max_requeue_hold`.
    pub delays: Vec<Duration>,
    /// A delivery asked to come back sooner than the shortest of [`RabbitConfig::delays`]
    /// (or when parking it failed) is held this long at most before it is rejected back to
    /// the queue (holding it keeps it out of other consumers' hands, and counts against the
    /// prefetch). Defaults to 1 s.
    pub max_requeue_hold: Duration,
    /// Consumer tag sent to the broker, shown in its management views. Defaults to `inboxed`.
    pub consumer_tag: String,
    /// How long opening the connection and starting to consume may take. A broker that is
    /// still booting can accept the TCP connection and then not answer the handshake; without
    /// a bound, a reconnect would wait on it for ever. Also bounds opening the connection
    /// copies are parked on and declaring a delay queue at its first use. Defaults to 15 s.
    pub connect_timeout: Duration,
    /// How long an ack or reject may wait for its frame to go out. An answer issued on a
    /// connection that died under it (a killed broker) can otherwise wait for ever, holding
    /// one of the consumer loop's slots and, at shutdown, the loop itself; past this bound it
    /// is reported as failed, and the broker redelivers the message to the reconnected
    /// consumer. Defaults to 10 s.
    pub ack_timeout: Duration,
    /// For an `amqps://` URI: a PEM file of certificate authorities to trust beside the
    /// system's roots, for a broker whose certificate a private CA signs. The broker's host
    /// name is always checked against its certificate. Read once, at connect. Defaults to
    /// `None`: the system's roots only.
    pub tls_ca_file: Option<PathBuf>,
}

impl RabbitConfig {
    /// Settings for consuming `queue` at `uri`, with every other field at its default.
    #[must_use]
    pub fn new(uri: impl Into<String>, queue: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            queue: queue.into(),
            prefetch: 32,
            key: KeySource::default(),
            declare: None,
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
            delays: [10, 60, 300, 900].map(Duration::from_secs).to_vec(),
            max_requeue_hold: Duration::from_secs(1),
            consumer_tag: "inboxed".to_owned(),
            connect_timeout: Duration::from_secs(15),
            ack_timeout: Duration::from_secs(10),
            tls_ca_file: None,
        }
    }

    /// Sets [`RabbitConfig::prefetch`] (at least 1).
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }

    /// Sets [`RabbitConfig::key`].
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`RabbitConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Sets [`RabbitConfig::delays`].
    #[must_use]
    pub fn delays(mut self, steps: impl IntoIterator<Item = Duration>) -> Self {
        self.delays = steps.into_iter().collect();
        self
    }

    /// Sets [`RabbitConfig::declare`].
    #[must_use]
    pub fn declare(mut self, kind: QueueKind) -> Self {
        self.declare = Some(kind);
        self
    }

    /// Sets [`RabbitConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Sets [`RabbitConfig::max_requeue_hold`].
    #[must_use]
    pub fn max_requeue_hold(mut self, max_requeue_hold: Duration) -> Self {
        self.max_requeue_hold = max_requeue_hold;
        self
    }

    /// Sets [`RabbitConfig::consumer_tag`].
    #[must_use]
    pub fn consumer_tag(mut self, consumer_tag: impl Into<String>) -> Self {
        self.consumer_tag = consumer_tag.into();
        self
    }

    /// Sets [`RabbitConfig::connect_timeout`].
    #[must_use]
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`RabbitConfig::ack_timeout`].
    #[must_use]
    pub fn ack_timeout(mut self, ack_timeout: Duration) -> Self {
        self.ack_timeout = ack_timeout;
        self
    }
}
