//! Settings of a JetStream source: plain fields, each with its default.

use std::path::PathBuf;
use std::time::Duration;

use inboxed_core::{Backoff, KeySource};

/// Where and how to consume.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NatsConfig {
    /// Server URL, e.g. `nats://127.0.0.1:4222`, or a cluster's servers separated by commas
    /// (`nats://n1:4222,nats://n2:4222,nats://n3:4222`): each connection goes to the first that
    /// answers, so the source carries on when its server goes away. No default.
    pub url: String,
    /// The JetStream stream. No default.
    pub stream: String,
    /// The durable consumer's name: the server keeps its position and unacked messages across
    /// restarts of this process. Created with explicit acks if missing; an existing one keeps its
    /// settings (ack wait, limits), and is refused unless its acks are explicit. No default.
    pub consumer: String,
    /// Messages pulled per request, the bound on messages in flight in this process and with it
    /// the back-pressure when the database is slow; a new consumer gets twice this as its
    /// `max_ack_pending`. Defaults to 32; keep it at or above the consumer loop's concurrency.
    pub prefetch: usize,
    /// How long the server waits for an ack before redelivering (the consumer's `ack_wait`).
    /// Handlers that may take longer need `ConsumerConfig::extend_every` (NATS `Progress`).
    /// Defaults to 30 s.
    pub ack_wait: Duration,
    /// Where the message id comes from. Defaults to the `Nats-Msg-Id` header, which is also
    /// what the server's own (windowed) publish dedup uses.
    pub key: KeySource,
    /// Create the stream (file storage) on these subjects if it does not exist, or `None` to
    /// require that it does. Defaults to `None`.
    pub declare: Option<Vec<String>>,
    /// Delay between attempts to resume pulling after the server went away (the client itself
    /// reconnects the connection). Defaults to 100 ms doubling to 10 s, with jitter.
    pub reconnect: Backoff,
    /// For a server with TLS (`tls://`, or one whose `INFO` requires it): a PEM file of
    /// certificate authorities to trust beside the system's roots, for a server whose
    /// certificate a private CA signs. The server's host name is always checked against its
    /// certificate. Read once, at connect. Defaults to `None`: the system's roots only.
    pub tls_ca_file: Option<PathBuf>,
}

impl NatsConfig {
    /// Settings for consuming `stream` through the durable consumer `consumer` at `url`.
    #[must_use]
    pub fn new(
        url: impl Into<String>,
        stream: impl Into<String>,
        consumer: impl Into<String>,
    ) -> Self {
        Self {
            url: url.into(),
            stream: stream.into(),
            consumer: consumer.into(),
            prefetch: 32,
            ack_wait: Duration::from_secs(30),
            key: KeySource::default(),
            declare: None,
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
            tls_ca_file: None,
        }
    }

    /// Sets [`NatsConfig::prefetch`] (at least 1).
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }

    /// Sets [`NatsConfig::ack_wait`].
    #[must_use]
    pub fn ack_wait(mut self, wait: Duration) -> Self {
        self.ack_wait = wait;
        self
    }

    /// Sets [`NatsConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Sets [`NatsConfig::key`].
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`NatsConfig::declare`].
    #[must_use]
    pub fn declare(mut self, subjects: Vec<String>) -> Self {
        self.declare = Some(subjects);
        self
    }

    /// Sets [`NatsConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }
}
