//! The outbox relay's NATS JetStream side: each message published with `Nats-Msg-Id` set to
//! the outbox id, so that the stream's own duplicate window absorbs a re-send inside it and
//! [`NatsSource`](crate::NatsSource)'s default key source finds the id downstream; the
//! stream's acknowledgement is the confirmation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use tracing::warn;

use inboxed_core::outbox::{Confirmation, OutboxRow, Publisher};

use crate::source::NatsError;

/// The headers that carry the type and the correlation id, which NATS has no fields for.
pub use inboxed_core::outbox::{CORRELATION_HEADER, TYPE_HEADER};

/// Settings of a [`NatsPublisher`]: plain fields, each with its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NatsPublisherConfig {
    /// Server URL, e.g. `nats://127.0.0.1:4222`, or a cluster's servers separated by commas
    /// (the client reconnects to another when its server goes away). No default.
    pub url: String,
    /// Subjects by outbox destination. A destination with none is published on the subject
    /// of its own name. Defaults to none.
    pub subjects: BTreeMap<String, String>,
    /// How long the stream's confirmation of a message (its publish ack) may take; past it the row is
    /// retried under the same id. Keep it well below the relay's lease. Defaults to 10 s.
    pub confirm_timeout: Duration,
    /// For a `tls://` URL: a PEM file of certificate authorities to trust beside the
    /// system's roots. Defaults to `None`.
    pub tls_ca_file: Option<PathBuf>,
}

impl NatsPublisherConfig {
    /// Settings for publishing to `url`, every other field at its default.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            subjects: BTreeMap::new(),
            confirm_timeout: Duration::from_secs(10),
            tls_ca_file: None,
        }
    }

    /// Publishes `destination`'s messages on `subject`.
    #[must_use]
    pub fn subject(mut self, destination: impl Into<String>, subject: impl Into<String>) -> Self {
        self.subjects.insert(destination.into(), subject.into());
        self
    }

    /// Sets [`NatsPublisherConfig::subjects`].
    #[must_use]
    pub fn subjects(mut self, subjects: BTreeMap<String, String>) -> Self {
        self.subjects = subjects;
        self
    }

    /// Sets [`NatsPublisherConfig::confirm_timeout`].
    #[must_use]
    pub fn confirm_timeout(mut self, confirm_timeout: Duration) -> Self {
        self.confirm_timeout = confirm_timeout;
        self
    }

    /// Sets [`NatsPublisherConfig::tls_ca_file`].
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }
}

/// Publishes outbox rows to JetStream. The client reconnects by itself; while it is
/// disconnected, a batch is handed back unsent.
#[derive(Debug)]
pub struct NatsPublisher {
    config: NatsPublisherConfig,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

impl NatsPublisher {
    /// Connects, so that a wrong URL fails here rather than in the relay's retries.
    ///
    /// # Errors
    /// [`NatsError::Setup`] (step `connect`).
    pub async fn connect(config: NatsPublisherConfig) -> Result<Self, NatsError> {
        let mut options = async_nats::ConnectOptions::new();
        if let Some(path) = &config.tls_ca_file {
            options = options.add_root_certificates(path.clone());
        }
        let client = options
            .connect(crate::servers(&config.url))
            .await
            .map_err(|e| NatsError::Setup {
                step: "connect",
                stream: String::new(),
                consumer: String::new(),
                source: e.into(),
            })?;
        let mut js = async_nats::jetstream::new(client.clone());
        js.set_timeout(config.confirm_timeout);
        Ok(Self { config, client, js })
    }

    fn subject<'a>(&'a self, row: &'a OutboxRow) -> &'a str {
        self.config
            .subjects
            .get(&row.destination)
            .map_or(&row.destination, String::as_str)
    }

    /// The message's headers, or why NATS cannot carry them (the field named): a header
    /// name outside visible ASCII or with a `:`, a value with CR or LF, would be another
    /// header on the wire (async-nats panics on such a name).
    fn headers(row: &OutboxRow) -> Result<HeaderMap, String> {
        let mut headers = HeaderMap::new();
        let mut put = |name: &str, value: &str, field: &str| -> Result<(), String> {
            let n: HeaderName = name.parse().map_err(|_| {
                format!("{field}: header name {name:?} is not visible ASCII without ':'")
            })?;
            let v: HeaderValue = value
                .parse()
                .map_err(|_| format!("{field}: the value of header {name:?} holds CR or LF"))?;
            headers.insert(n, v);
            Ok(())
        };
        for (name, value) in &row.headers {
            put(name, value, "headers")?;
        }
        if let Some(kind) = &row.message_type {
            put(TYPE_HEADER, kind, "message_type")?;
        }
        if let Some(id) = &row.correlation_id {
            put(CORRELATION_HEADER, id, "correlation_id")?;
        }
        put("Nats-Msg-Id", &row.message_id, "message_id")?;
        Ok(headers)
    }
}

impl Publisher for NatsPublisher {
    fn system(&self) -> Option<&'static str> {
        Some("nats")
    }

    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            // Published now, they would wait in the client for its reconnection and time
            // out with their attempt counted.
            return rows
                .iter()
                .map(|_| Confirmation::NotSent {
                    reason: "not connected to the NATS server".to_owned(),
                })
                .collect();
        }
        // Every publish goes out before any acknowledgement is awaited.
        let mut pending: Vec<Result<PublishAckFuture, Confirmation>> =
            Vec::with_capacity(rows.len());
        for row in rows {
            let headers = match Self::headers(row) {
                Ok(h) => h,
                Err(reason) => {
                    pending.push(Err(Confirmation::Refused {
                        reason,
                        permanent: true,
                    }));
                    continue;
                }
            };
            let subject = self.subject(row).to_owned();
            // What async-nats checks of a published subject (its check is not public).
            if subject.is_empty() || subject.contains([' ', '\t', '\r', '\n']) {
                pending.push(Err(Confirmation::Refused {
                    reason: format!(
                        "destination: subject {subject:?} is empty or holds whitespace"
                    ),
                    permanent: true,
                }));
                continue;
            }
            let sent = self
                .js
                .publish_with_headers(subject, headers, row.payload.clone().into())
                .await;
            pending.push(sent.map_err(|e| match e.kind() {
                // Checked by the client against the server's `max_payload`: retrying cannot
                // help.
                PublishErrorKind::MaxPayloadExceeded => Confirmation::Refused {
                    reason: format!("payload: {e}"),
                    permanent: true,
                },
                _ => Confirmation::NotSent {
                    reason: e.to_string(),
                },
            }));
        }
        let mut outcomes = Vec::with_capacity(rows.len());
        for p in pending {
            outcomes.push(match p {
                Err(outcome) => outcome,
                Ok(ack) => match ack.await {
                    // A duplicate within the stream's window is the stream's own dedup of a
                    // re-send: confirmed all the same.
                    Ok(_) => Confirmation::Confirmed,
                    Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                        Confirmation::Refused {
                            reason: format!("no stream takes the subject: {e}"),
                            permanent: false,
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, "JetStream acknowledgement failed");
                        Confirmation::Unconfirmed {
                            reason: e.to_string(),
                        }
                    }
                },
            });
        }
        outcomes
    }
}
