//! Settings of a Redis Streams source: plain fields, each with its default.

use std::path::PathBuf;
use std::time::Duration;

use inboxed_core::{Backoff, KeySource};

/// Where and how to consume.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisConfig {
    /// Server URL, e.g. `redis://127.0.0.1:6379`. No default.
    pub url: String,
    /// The stream's key. No default.
    pub stream: String,
    /// The consumer group. No default.
    pub group: String,
    /// This process's name in the group. Defaults to `inboxed-<pid>`.
    pub consumer: String,
    /// Entries read per `XREADGROUP` (and claimed per `XAUTOCLAIM`): the bound on entries
    /// fetched ahead. Defaults to 32.
    pub prefetch: usize,
    /// How long one `XREADGROUP` blocks waiting for new entries; the client waits 5 s more
    /// than this for any answer before it gives up on the command. At least 1 ms (Redis reads
    /// `BLOCK 0` as for ever). Defaults to 2 s.
    pub block: Duration,
    /// An entry delivered this long ago and still not acked (its consumer crashed) is taken
    /// over by `XAUTOCLAIM` and delivered again; a requeued one comes back when its delay has
    /// passed, sooner or later than this. It must exceed the longest
    /// handler run, or a slow handler's entry is delivered twice at once (the inbox still
    /// applies it once). Defaults to 30 s.
    pub claim_idle: Duration,
    /// The entry field holding the payload. Defaults to `payload`.
    pub payload_field: String,
    /// Where the message id comes from: [`KeySource::MessageIdProperty`] (the default) reads
    /// the entry's `message_id` field; a header is any other field.
    pub key: KeySource,
    /// Create the group (and the stream) at its first entry if it does not exist. Defaults to
    /// `true`.
    pub create_group: bool,
    /// Delay between attempts after a failed command (the connection itself reconnects).
    /// Defaults to 100 ms doubling to 10 s, with jitter.
    pub reconnect: Backoff,
    /// For a `rediss://` URL: a PEM file of the certificate authorities to trust, in place of
    /// the system's roots (redis-rs trusts one or the other), for a server whose certificate a
    /// private CA signs. The server's host name is always checked against its certificate.
    /// Read once, at connect. Defaults to `None`: the system's roots.
    pub tls_ca_file: Option<PathBuf>,
}

impl RedisConfig {
    /// Settings for consuming `stream` in `group` at `url`.
    #[must_use]
    pub fn new(
        url: impl Into<String>,
        stream: impl Into<String>,
        group: impl Into<String>,
    ) -> Self {
        Self {
            url: url.into(),
            stream: stream.into(),
            group: group.into(),
            consumer: format!("inboxed-{}", std::process::id()),
            prefetch: 32,
            block: Duration::from_secs(2),
            claim_idle: Duration::from_secs(30),
            payload_field: "payload".to_owned(),
            key: KeySource::default(),
            create_group: true,
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
            tls_ca_file: None,
        }
    }

    /// Sets [`RedisConfig::prefetch`] (at least 1).
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }

    /// Sets [`RedisConfig::claim_idle`].
    #[must_use]
    pub fn claim_idle(mut self, idle: Duration) -> Self {
        self.claim_idle = idle;
        self
    }

    /// Sets [`RedisConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Sets [`RedisConfig::key`].
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`RedisConfig::consumer`].
    #[must_use]
    pub fn consumer(mut self, consumer: impl Into<String>) -> Self {
        self.consumer = consumer.into();
        self
    }

    /// Sets [`RedisConfig::block`].
    #[must_use]
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }

    /// Sets [`RedisConfig::payload_field`].
    #[must_use]
    pub fn payload_field(mut self, payload_field: impl Into<String>) -> Self {
        self.payload_field = payload_field.into();
        self
    }

    /// Sets [`RedisConfig::create_group`].
    #[must_use]
    pub fn create_group(mut self, create_group: bool) -> Self {
        self.create_group = create_group;
        self
    }

    /// Sets [`RedisConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }
}
