//! Settings of an SQS source: plain fields, each with its default.

use std::time::Duration;

use inboxed_core::{Backoff, KeySource};

/// Where and how to consume.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsConfig {
    /// The queue's URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`). No default.
    pub queue_url: String,
    /// An endpoint other than AWS's (an emulator, a VPC endpoint). Defaults to `None`: the
    /// region's own.
    pub endpoint_url: Option<String>,
    /// The region. Defaults to `None`: the environment's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// Messages asked for per `ReceiveMessage` (SQS allows 1 to 10): the bound on messages
    /// fetched ahead. Defaults to 10.
    pub prefetch: usize,
    /// Long-poll wait of one `ReceiveMessage` (at most 20 s). Defaults to 20 s.
    pub wait: Duration,
    /// Visibility timeout asked for each receive: how long a message stays hidden while it is
    /// processed before SQS delivers it again. It must exceed the longest handler run, or the
    /// consumer loop must extend it (`ConsumerConfig::extend_every`). Defaults to `None`: the
    /// queue's own setting.
    pub visibility_timeout: Option<Duration>,
    /// Where the message id comes from. [`KeySource::MessageIdProperty`] (the default) reads
    /// the message attribute `message_id`: SQS's own `MessageId` is assigned per send, so a
    /// producer's retry would get a new one; a [`KeySource::Header`] is any message attribute.
    pub key: KeySource,
    /// Delay between attempts after a failed receive. Defaults to 100 ms doubling to 10 s, with
    /// jitter.
    pub reconnect: Backoff,
}

impl SqsConfig {
    /// Settings for consuming the queue at `queue_url`.
    #[must_use]
    pub fn new(queue_url: impl Into<String>) -> Self {
        Self {
            queue_url: queue_url.into(),
            endpoint_url: None,
            region: None,
            prefetch: 10,
            wait: Duration::from_secs(20),
            visibility_timeout: None,
            key: KeySource::default(),
            reconnect: Backoff {
                base: Duration::from_millis(100),
                max: Duration::from_secs(10),
            },
        }
    }

    /// Sets [`SqsConfig::endpoint_url`].
    #[must_use]
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint_url = Some(url.into());
        self
    }

    /// Sets [`SqsConfig::region`].
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Sets [`SqsConfig::prefetch`] (clamped to 1..=10).
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.clamp(1, 10);
        self
    }

    /// Sets [`SqsConfig::wait`] (at most 20 s).
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait.min(Duration::from_secs(20));
        self
    }

    /// Sets [`SqsConfig::visibility_timeout`].
    #[must_use]
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = Some(timeout);
        self
    }

    /// Sets [`SqsConfig::key`].
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`SqsConfig::reconnect`].
    #[must_use]
    pub fn reconnect(mut self, reconnect: Backoff) -> Self {
        self.reconnect = reconnect;
        self
    }
}

/// Whole seconds for an SQS timeout field, rounded up, at most 12 h (SQS's limit).
pub(crate) fn seconds(d: Duration) -> i32 {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(s.min(43_200)).unwrap_or(43_200)
}
