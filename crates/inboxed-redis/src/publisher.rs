//! The outbox relay's Redis Streams side: one `XADD` per row, a batch's commands pipelined in
//! one round trip, each entry carrying the outbox id in the field `message_id` (where
//! [`RedisSource`](crate::RedisSource)'s default key source reads it) and the payload in the
//! field the consumer reads it from. The entry id Redis answers with is the confirmation;
//! with [`RedisPublisherConfig::replicas`] set, so is a `WAIT` for that many replicas.
//!
//! Redis keeps no message ids: a row re-sent after a relay crash is a second entry with the
//! same `message_id`, and the next service's inbox settles it as a duplicate.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError as ClientError, ServerErrorKind, Value};
use tracing::warn;

use inboxed_core::outbox::{CORRELATION_HEADER, Confirmation, OutboxRow, Publisher, TYPE_HEADER};

use crate::source::{RedisError, client};

/// The field holding the outbox id: the one the consumer side reads by default.
const ID_FIELD: &str = "message_id";

/// Settings of a [`RedisPublisher`]: plain fields, each with its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisPublisherConfig {
    /// Server URL, e.g. `redis://127.0.0.1:6379`. No default.
    pub url: String,
    /// Stream keys by outbox destination. A destination with none is published to the stream
    /// of its own name. Defaults to none.
    pub streams: BTreeMap<String, String>,
    /// The entry field holding the payload; it must be the consumers'
    /// [`RedisConfig::payload_field`](crate::RedisConfig::payload_field). Defaults to
    /// `payload`.
    pub payload_field: String,
    /// Trims each stream to about this many entries at every `XADD` (`MAXLEN ~`), so that a
    /// stream whose consumers have read its entries does not grow for ever. An entry trimmed
    /// before a consumer group read it is lost to that group: set it well above the longest
    /// backlog. Defaults to `None`: no trimming.
    pub max_len: Option<u64>,
    /// The largest payload: a larger one is refused before sending, for good (Redis itself
    /// takes up to 512 MiB a value, held in memory). Defaults to 16 MiB.
    pub max_message_bytes: usize,
    /// Replicas that must hold a batch's entries before they count as confirmed (`WAIT`).
    /// Without it an entry acknowledged by a primary that fails before replicating it is
    /// lost. Defaults to 0: the primary's answer confirms.
    pub replicas: u32,
    /// How long a batch waits for the answer (and half of it for
    /// [`RedisPublisherConfig::replicas`]); past it the rows are retried under the same ids. Keep it well below the relay's
    /// lease. Defaults to 10 s.
    pub response_timeout: Duration,
    /// For a `rediss://` URL: a PEM file of the certificate authorities to trust, in place of
    /// the system's roots. Defaults to `None`.
    pub tls_ca_file: Option<PathBuf>,
}

impl RedisPublisherConfig {
    /// Settings for publishing to `url`, every other field at its default.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            streams: BTreeMap::new(),
            payload_field: "payload".to_owned(),
            max_len: None,
            max_message_bytes: 16 * 1024 * 1024,
            replicas: 0,
            response_timeout: Duration::from_secs(10),
            tls_ca_file: None,
        }
    }

    /// Publishes `destination`'s messages to the stream `stream`.
    #[must_use]
    pub fn stream(mut self, destination: impl Into<String>, stream: impl Into<String>) -> Self {
        self.streams.insert(destination.into(), stream.into());
        self
    }

    /// Sets [`RedisPublisherConfig::max_len`].
    #[must_use]
    pub fn max_len(mut self, entries: u64) -> Self {
        self.max_len = Some(entries);
        self
    }

    /// Sets [`RedisPublisherConfig::max_message_bytes`].
    #[must_use]
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`RedisPublisherConfig::replicas`].
    #[must_use]
    pub fn replicas(mut self, replicas: u32) -> Self {
        self.replicas = replicas;
        self
    }

    /// Sets [`RedisPublisherConfig::streams`].
    #[must_use]
    pub fn streams(mut self, streams: BTreeMap<String, String>) -> Self {
        self.streams = streams;
        self
    }

    /// Sets [`RedisPublisherConfig::payload_field`].
    #[must_use]
    pub fn payload_field(mut self, payload_field: impl Into<String>) -> Self {
        self.payload_field = payload_field.into();
        self
    }

    /// Sets [`RedisPublisherConfig::response_timeout`].
    #[must_use]
    pub fn response_timeout(mut self, response_timeout: Duration) -> Self {
        self.response_timeout = response_timeout;
        self
    }

    /// Sets [`RedisPublisherConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }
}

/// Publishes outbox rows to Redis Streams. The connection reconnects by itself; a batch sent
/// while the server refuses connections is handed back unsent.
pub struct RedisPublisher {
    config: RedisPublisherConfig,
    conn: ConnectionManager,
}

impl std::fmt::Debug for RedisPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPublisher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RedisPublisher {
    /// Connects, so that a wrong URL fails here rather than in the relay's retries.
    ///
    /// # Errors
    /// [`RedisError::Setup`] naming the step, [`RedisError::CaFile`].
    pub async fn connect(config: RedisPublisherConfig) -> Result<Self, RedisError> {
        let setup = |step: &'static str| {
            move |source| RedisError::Setup {
                step,
                stream: String::new(),
                group: String::new(),
                source,
            }
        };
        let client = client(&config.url, config.tls_ca_file.as_deref())?;
        let manager = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.response_timeout));
        let conn = client
            .get_connection_manager_with_config(manager)
            .await
            .map_err(setup("connect"))?;
        Ok(Self { config, conn })
    }

    fn stream<'a>(&'a self, row: &'a OutboxRow) -> &'a str {
        self.config
            .streams
            .get(&row.destination)
            .map_or(&row.destination, String::as_str)
    }

    /// The row's `XADD`, or why it cannot be sent, naming the field: a header named as one of
    /// the publisher's own fields would make the entry hold a field twice, which the consumer
    /// side refuses as unreadable.
    fn xadd(&self, row: &OutboxRow) -> Result<redis::Cmd, String> {
        if row.payload.len() > self.config.max_message_bytes {
            return Err(format!(
                "payload: {} bytes, more than max_message_bytes ({})",
                row.payload.len(),
                self.config.max_message_bytes
            ));
        }
        let own = [
            ID_FIELD,
            self.config.payload_field.as_str(),
            TYPE_HEADER,
            CORRELATION_HEADER,
        ];
        if let Some(name) = row.headers.keys().find(|n| own.contains(&n.as_str())) {
            return Err(format!(
                "headers: header {name:?} is a field the publisher sets itself"
            ));
        }
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.stream(row));
        if let Some(n) = self.config.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*")
            .arg(ID_FIELD)
            .arg(&row.message_id)
            .arg(&self.config.payload_field)
            .arg(row.payload.as_slice());
        if let Some(kind) = &row.message_type {
            cmd.arg(TYPE_HEADER).arg(kind);
        }
        if let Some(id) = &row.correlation_id {
            cmd.arg(CORRELATION_HEADER).arg(id);
        }
        for (name, value) in &row.headers {
            cmd.arg(name).arg(value);
        }
        Ok(cmd)
    }
}

/// What a server error on one `XADD` means for its row, by the error's code.
fn refused(e: &ClientError) -> Confirmation {
    // Out of memory (maxmemory reached) refuses every write alike: an outage, not this row.
    if e.code() == Some("OOM") {
        return Confirmation::NotSent {
            reason: e.to_string(),
        };
    }
    match e.kind() {
        // The server cannot take writes now (a replica, loading, failing over): nothing was
        // stored, and the relay should pause rather than use up the rows' attempts.
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain,
        ) => Confirmation::NotSent {
            reason: e.to_string(),
        },
        // WRONGTYPE (the key is not a stream), NOPERM and the rest: the operator can mend
        // them, so the row is retried and dead past its attempts.
        _ => Confirmation::Refused {
            reason: format!("destination: {e}"),
            permanent: false,
        },
    }
}

impl Publisher for RedisPublisher {
    fn system(&self) -> Option<&'static str> {
        Some("redis")
    }

    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let mut outcomes: Vec<Option<Confirmation>> = Vec::with_capacity(rows.len());
        for row in rows {
            match self.xadd(row) {
                Ok(cmd) => {
                    pipe.add_command(cmd);
                    outcomes.push(None);
                }
                Err(reason) => outcomes.push(Some(Confirmation::Refused {
                    reason,
                    permanent: true,
                })),
            }
        }
        let sent = outcomes.iter().filter(|o| o.is_none()).count();
        if sent == 0 {
            return outcomes.into_iter().flatten().collect();
        }
        let waits = self.config.replicas > 0;
        if waits {
            // Half the client's own timeout, so that replicas that lag answer as such rather
            // than as a timeout of the whole pipeline.
            let ms =
                u64::try_from(self.config.response_timeout.as_millis() / 2).unwrap_or(u64::MAX);
            pipe.cmd("WAIT").arg(self.config.replicas).arg(ms);
        }
        let mut conn = self.conn.clone();
        let answers: Vec<redis::RedisResult<Value>> = match pipe.query_async(&mut conn).await {
            Ok(answers) => answers,
            Err(e) => {
                let failed = if e.is_connection_refusal() {
                    Confirmation::NotSent {
                        reason: format!("Redis refused the connection: {e}"),
                    }
                } else {
                    warn!(error = %e, "Redis pipeline failed after it was sent");
                    Confirmation::Unconfirmed {
                        reason: e.to_string(),
                    }
                };
                return outcomes
                    .into_iter()
                    .map(|o| o.unwrap_or_else(|| failed.clone()))
                    .collect();
            }
        };
        let mut answers = answers.into_iter();
        let added: Vec<redis::RedisResult<Value>> = answers.by_ref().take(sent).collect();
        // Fewer replicas than asked for: the entries may be lost with the primary.
        let short = if waits {
            match answers.next() {
                Some(Ok(Value::Int(n))) if n >= i64::from(self.config.replicas) => None,
                other => Some(format!("WAIT {}: answered {other:?}", self.config.replicas)),
            }
        } else {
            None
        };
        let mut added = added.into_iter();
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| match added.next() {
                    Some(Ok(_)) => match &short {
                        None => Confirmation::Confirmed,
                        Some(reason) => Confirmation::Unconfirmed {
                            reason: reason.clone(),
                        },
                    },
                    Some(Err(e)) => refused(&e),
                    None => Confirmation::Unconfirmed {
                        reason: "Redis gave no answer for the entry".to_owned(),
                    },
                })
            })
            .collect()
    }
}
