//! The entries of one consumer group member: new ones with `XREADGROUP`, abandoned ones taken
//! over with `XAUTOCLAIM`, requeued ones with `XCLAIM` when they are due (`schedule.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tracing::warn;

use inboxed_core::{BoxError, DeliverySource};

use crate::config::RedisConfig;
use crate::delivery::{RedisDelivery, Shared};
use crate::entry::{self, Entry};
use crate::schedule;

/// How often a member asks the schedule for requeued entries that are due.
const DUE_EVERY: Duration = Duration::from_millis(250);

/// How much longer than a blocking read (`RedisConfig::block`) a command may take to answer.
const RESPONSE_SLACK: Duration = Duration::from_secs(5);

/// Why a Redis Streams source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// Connecting or creating the group failed.
    #[error("Redis Streams: could not {step} (stream {stream:?}, group {group:?})")]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The stream's key.
        stream: String,
        /// The group.
        group: String,
        /// redis-rs's error.
        #[source]
        source: redis::RedisError,
    },
    /// The TLS CA file could not be used.
    #[error("Redis Streams: {0}")]
    CaFile(#[from] inboxed_core::tls::CaFileError),
}

/// A client for `url`, trusting the CAs of `tls_ca_file` (in place of the system's roots) when
/// one is given. The CLI's publisher opens its client here too, so that both trust alike.
///
/// # Errors
/// [`RedisError::CaFile`], or [`RedisError::Setup`] (step `parse the URL`).
pub fn client(
    url: &str,
    tls_ca_file: Option<&std::path::Path>,
) -> Result<redis::Client, RedisError> {
    let parse = |source| RedisError::Setup {
        step: "parse the URL",
        stream: String::new(),
        group: String::new(),
        source,
    };
    match tls_ca_file {
        None => redis::Client::open(url).map_err(parse),
        Some(path) => {
            let root_cert = Some(inboxed_core::tls::read_ca_file(path)?.into_bytes());
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert,
            };
            redis::Client::build_with_tls(url, certs).map_err(parse)
        }
    }
}

/// Entries of one stream for one member of a consumer group. The connection reconnects by
/// itself; a failed command is retried with backoff (logged at WARN).
pub struct RedisSource {
    config: RedisConfig,
    conn: ConnectionManager,
    shared: Arc<Shared>,
    ready: VecDeque<RedisDelivery>,
    claim_cursor: String,
    last_claim: Option<Instant>,
    last_due: Option<Instant>,
    failures: u32,
    /// The scripts that take an entry over (`schedule.rs`).
    take_due: redis::Script,
    take_over: redis::Script,
}

impl std::fmt::Debug for RedisSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSource")
            .field("config", &self.config)
            .field("ready", &self.ready.len())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl RedisSource {
    /// Connects and (with [`RedisConfig::create_group`]) creates the group, so that a wrong
    /// URL fails here with an error naming the step.
    ///
    /// # Errors
    /// [`RedisError::Setup`] naming the step that failed.
    pub async fn connect(config: RedisConfig) -> Result<Self, RedisError> {
        let setup = |step: &'static str| {
            let (stream, group) = (config.stream.clone(), config.group.clone());
            move |source| RedisError::Setup {
                step,
                stream,
                group,
                source,
            }
        };
        let client = match client(&config.url, config.tls_ca_file.as_deref()) {
            Err(RedisError::Setup { source, .. }) => return Err(setup("parse the URL")(source)),
            other => other?,
        };
        // The client's default response timeout (500 ms) is shorter than a blocking read: an
        // idle stream then failed every read, and an entry arriving after the client had given
        // up was still delivered by the server, into the pending list, where only XAUTOCLAIM
        // found it again, `claim_idle` later.
        let manager = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.block.saturating_add(RESPONSE_SLACK)));
        let mut conn = client
            .get_connection_manager_with_config(manager)
            .await
            .map_err(setup("connect"))?;
        if config.create_group {
            let created: redis::RedisResult<()> = conn
                .xgroup_create_mkstream(&config.stream, &config.group, "0")
                .await;
            match created {
                Err(e) if e.code() == Some("BUSYGROUP") => {}
                other => other.map_err(setup("create the group"))?,
            }
        }
        Ok(Self {
            shared: Arc::new(Shared {
                stream: config.stream.clone(),
                group: config.group.clone(),
                schedule: crate::schedule::key(&config.stream, &config.group),
                key: config.key.clone(),
                payload_field: config.payload_field.clone(),
            }),
            config,
            conn,
            ready: VecDeque::new(),
            claim_cursor: "0-0".to_owned(),
            last_claim: None,
            last_due: None,
            failures: 0,
            take_due: schedule::take_due(),
            take_over: schedule::take_over(),
        })
    }

    /// Entries idle past `claim_idle`, taken over, with their delivery counts; one that a
    /// requeue scheduled for later stays pending (now this member's) until its time. Runs at
    /// most four times per `claim_idle`, since nothing can become claimable faster.
    async fn claim(&mut self) -> redis::RedisResult<()> {
        let every = (self.config.claim_idle / 4).max(Duration::from_millis(50));
        if self.last_claim.is_some_and(|at| at.elapsed() < every) {
            return Ok(());
        }
        self.last_claim = Some(Instant::now());
        let c = &self.config;
        let idle = u64::try_from(c.claim_idle.as_millis()).unwrap_or(u64::MAX);
        // Ownership only (no count, no fields): whether each is delivered is decided below.
        let reply: redis::Value = redis::cmd("XAUTOCLAIM")
            .arg(&c.stream)
            .arg(&c.group)
            .arg(&c.consumer)
            .arg(idle)
            .arg(&self.claim_cursor)
            .arg("COUNT")
            .arg(c.prefetch)
            .arg("JUSTID")
            .query_async(&mut self.conn)
            .await?;
        let (cursor, ids) = entry::claimed_ids(reply)?;
        self.claim_cursor = cursor;
        let now = schedule::unix_ms(Duration::ZERO);
        for id in ids {
            let reply: redis::Value = self
                .take_over
                .key(&self.config.stream)
                .key(&self.shared.schedule)
                .arg(&self.config.group)
                .arg(&self.config.consumer)
                .arg(&id)
                .arg(now)
                .invoke_async(&mut self.conn)
                .await?;
            self.push_claimed(reply).await?;
        }
        Ok(())
    }

    /// Requeued entries whose time has come, taken over whoever holds them. Asked at most every
    /// [`DUE_EVERY`]: a read that empties its entries fast would otherwise add a round trip per
    /// read, and a ladder's shortest step is a second.
    async fn due(&mut self) -> redis::RedisResult<()> {
        if self.last_due.is_some_and(|at| at.elapsed() < DUE_EVERY) {
            return Ok(());
        }
        self.last_due = Some(Instant::now());
        let now = schedule::unix_ms(Duration::ZERO);
        let ids: Vec<String> = self
            .conn
            .zrangebyscore_limit(
                &self.shared.schedule,
                "-inf",
                now,
                0,
                isize::try_from(self.config.prefetch).unwrap_or(isize::MAX),
            )
            .await?;
        for id in ids {
            let reply: redis::Value = self
                .take_due
                .key(&self.config.stream)
                .key(&self.shared.schedule)
                .arg(&self.config.group)
                .arg(&self.config.consumer)
                .arg(&id)
                .invoke_async(&mut self.conn)
                .await?;
            self.push_claimed(reply).await?;
        }
        Ok(())
    }

    /// Hands out the entries of an `XCLAIM` reply (none when the entry was not taken).
    async fn push_claimed(&mut self, reply: redis::Value) -> redis::RedisResult<()> {
        for entry in entry::entries(reply)? {
            self.push_counted(entry).await?;
        }
        Ok(())
    }

    /// Hands out an entry taken over, with the group's count of its deliveries.
    async fn push_counted(&mut self, entry: Entry) -> redis::RedisResult<()> {
        let pending: redis::streams::StreamPendingCountReply = self
            .conn
            .xpending_count(
                &self.config.stream,
                &self.config.group,
                &entry.id,
                &entry.id,
                1,
            )
            .await?;
        let count = pending.ids.first().map_or(1, |p| p.times_delivered);
        self.push(entry, u32::try_from(count).unwrap_or(u32::MAX));
        Ok(())
    }

    /// New entries, blocking up to `block` for some to arrive.
    async fn read(&mut self) -> redis::RedisResult<()> {
        let c = &self.config;
        // At least 1 ms: `BLOCK 0` waits for ever, past any response timeout.
        let block = usize::try_from(c.block.as_millis())
            .unwrap_or(usize::MAX)
            .max(1);
        let reply: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&c.group)
            .arg(&c.consumer)
            .arg("COUNT")
            .arg(c.prefetch)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(&c.stream)
            .arg(">")
            .query_async(&mut self.conn)
            .await?;
        for entry in entry::read_reply(reply)? {
            self.push(entry, 1);
        }
        Ok(())
    }

    fn push(&mut self, entry: Entry, count: u32) {
        let payload = entry
            .get(self.config.payload_field.as_bytes())
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        self.ready.push_back(RedisDelivery {
            entry,
            payload,
            count,
            conn: self.conn.clone(),
            shared: Arc::clone(&self.shared),
        });
    }
}

impl DeliverySource for RedisSource {
    type Delivery = RedisDelivery;

    /// Never ends on its own: a failed command is retried with backoff, and the consumer loop's
    /// shutdown is what stops it.
    async fn next(&mut self) -> Option<Result<RedisDelivery, BoxError>> {
        loop {
            if let Some(delivery) = self.ready.pop_front() {
                return Some(Ok(delivery));
            }
            let mut fetched = self.due().await;
            if fetched.is_ok() && self.ready.is_empty() {
                fetched = self.claim().await;
            }
            if fetched.is_ok() && self.ready.is_empty() {
                fetched = self.read().await;
            }
            match fetched {
                Ok(()) => self.failures = 0,
                Err(e) => {
                    self.failures = self.failures.saturating_add(1);
                    warn!(error = %e, stream = %self.config.stream, failures = self.failures, "Redis Streams read failed; retrying");
                    tokio::time::sleep(self.config.reconnect.delay(self.failures)).await;
                }
            }
        }
    }
}
