//! The stream of deliveries from one queue, reconnecting when the broker goes away.

use std::sync::Arc;

use futures_util::StreamExt;
use lapin::Connection;
use lapin::options::{BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable};
use tracing::{info, warn};

use inboxed_core::{BoxError, DeliverySource, KeySource};

use crate::config::{QueueKind, RabbitConfig};
use crate::delay::DelayQueues;
use crate::delivery::RabbitDelivery;
use crate::runtime;
use crate::screen::Wounds;

/// Why a RabbitMQ source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RabbitError {
    /// Connecting, opening a channel, setting the prefetch, declaring or consuming failed.
    /// `queue` is empty for a publisher's connection.
    #[error("RabbitMQ: could not {step}{}", of_queue(queue))]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The queue.
        queue: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The TLS CA file could not be used.
    #[error("RabbitMQ: {0}")]
    CaFile(#[from] inboxed_core::tls::CaFileError),
    /// Connecting and starting to consume took longer than `connect_timeout`.
    #[error("RabbitMQ: no answer within {after:?}{}", of_queue(queue))]
    TimedOut {
        /// The queue.
        queue: String,
        /// The timeout.
        after: std::time::Duration,
    },
}

/// ` (queue "NAME")` for an error of a source's queue; nothing for a connection of its own
/// (a publisher's), which has none.
fn of_queue(queue: &str) -> String {
    if queue.is_empty() {
        String::new()
    } else {
        format!(" (queue {queue:?})")
    }
}

/// Deliveries of one queue, with manual acks and a bounded prefetch. When the connection or
/// channel is lost, `next` reconnects with backoff on its own; deliveries taken before the loss
/// cannot be acked any more (their acks fail and the broker redelivers them, which the inbox
/// settles as duplicates if they were committed).
#[derive(Debug)]
pub struct RabbitSource {
    config: RabbitConfig,
    key: Arc<KeySource>,
    live: Option<Live>,
    failures: u32,
    tls: OwnedTLSConfig,
    /// Where a requeue waits ten seconds or more; kept across reconnects.
    delays: Option<Arc<DelayQueues>>,
}

impl RabbitSource {
    /// Connects and starts consuming, so that a wrong URI, credentials or queue name fails
    /// here with an error naming the step, rather than in a reconnect loop.
    ///
    /// # Errors
    /// [`RabbitError::Setup`] naming the step that failed (an untrusted certificate or a host
    /// name it does not cover fails the `connect` step), [`RabbitError::TimedOut`], or
    /// [`RabbitError::CaFile`].
    pub async fn connect(config: RabbitConfig) -> Result<Self, RabbitError> {
        let tls = tls_config(config.tls_ca_file.as_deref())?;
        let live = open(&config, &tls).await?;
        Ok(Self {
            key: Arc::new(config.key.clone()),
            delays: DelayQueues::new(&config).map(Arc::new),
            config,
            live: Some(live),
            failures: 0,
            tls,
        })
    }

    fn wrap(&self, inner: lapin::message::Delivery, live: &Live) -> RabbitDelivery {
        let unreadable = live.wounds.take(live.channel, inner.delivery_tag);
        live.unacked.delivered(inner.delivery_tag);
        RabbitDelivery {
            inner,
            unreadable,
            key: Arc::clone(&self.key),
            max_requeue_hold: self.config.max_requeue_hold,
            delays: self.delays.clone(),
            ack_timeout: self.config.ack_timeout,
            unacked: Arc::clone(&live.unacked),
        }
    }
}

/// The TLS settings of `tls_ca_file`: its CAs beside the system's roots.
fn tls_config(tls_ca_file: Option<&std::path::Path>) -> Result<OwnedTLSConfig, RabbitError> {
    Ok(OwnedTLSConfig {
        identity: None,
        cert_chain: match tls_ca_file {
            Some(path) => Some(inboxed_core::tls::read_ca_file(path)?),
            None => None,
        },
    })
}

/// A connection to `uri` (through the screen, trusting `tls_ca_file`'s CAs as
/// [`RabbitConfig::tls_ca_file`] does), for publishing: the CLI's redrive opens its connection
/// here, so that it trusts what its consumers trust.
///
/// # Errors
/// [`RabbitError::CaFile`], or [`RabbitError::Setup`] (step `connect`).
pub async fn connection(
    uri: &str,
    tls_ca_file: Option<&std::path::Path>,
) -> Result<Connection, RabbitError> {
    let tls = tls_config(tls_ca_file)?;
    let (conn, _) = runtime::connect(uri, tls)
        .await
        .map_err(|source| RabbitError::Setup {
            step: "connect",
            queue: String::new(),
            source,
        })?;
    Ok(conn)
}

/// A connection and its consumer, with what the screen took out of its deliveries.
#[derive(Debug)]
struct Live {
    conn: Connection,
    consumer: lapin::Consumer,
    channel: u16,
    wounds: Arc<Wounds>,
    /// Resolves once the connection is lost. Kept across deliveries: one made per delivery
    /// armed and dropped a timer each time, a good part of the relay's CPU at 15,000
    /// deliveries a second.
    lost: Lost,
    /// The channel's unanswered deliveries.
    unacked: Arc<crate::unacked::Unacked>,
}

/// The watch on a connection ([`lost`]), kept with it.
struct Lost(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>);

impl std::fmt::Debug for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lost")
    }
}

async fn open(config: &RabbitConfig, tls: &OwnedTLSConfig) -> Result<Live, RabbitError> {
    tokio::time::timeout(config.connect_timeout, open_now(config, tls))
        .await
        .unwrap_or_else(|_| {
            Err(RabbitError::TimedOut {
                queue: config.queue.clone(),
                after: config.connect_timeout,
            })
        })
}

async fn open_now(config: &RabbitConfig, tls: &OwnedTLSConfig) -> Result<Live, RabbitError> {
    let setup = |step: &'static str| {
        let queue = config.queue.clone();
        move |source| RabbitError::Setup {
            step,
            queue,
            source,
        }
    };
    let (conn, wounds) = runtime::connect(&config.uri, tls.clone())
        .await
        .map_err(setup("connect"))?;
    let channel = conn
        .create_channel()
        .await
        .map_err(setup("open a channel"))?;
    channel
        .basic_qos(
            u16::try_from(config.prefetch.max(1)).unwrap_or(u16::MAX),
            BasicQosOptions::default(),
        )
        .await
        .map_err(setup("set the prefetch"))?;
    if let Some(kind) = config.declare {
        let mut args = FieldTable::default();
        if kind == QueueKind::Quorum {
            args.insert(
                "x-queue-type".into(),
                AMQPValue::LongString("quorum".into()),
            );
        }
        channel
            .queue_declare(
                config.queue.as_str().into(),
                QueueDeclareOptions::durable(),
                args,
            )
            .await
            .map_err(setup("declare the queue"))?;
    }
    let consumer = channel
        .basic_consume(
            config.queue.as_str().into(),
            config.consumer_tag.as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(setup("consume"))?;
    let lost = Lost(Box::pin(lost(conn.status().clone())));
    Ok(Live {
        conn,
        consumer,
        channel: channel.id(),
        wounds,
        lost,
        unacked: Arc::default(),
    })
}

/// Resolves once the connection is no longer connected (checked every 500 ms).
async fn lost(status: lapin::ConnectionStatus) {
    let mut every = tokio::time::interval(std::time::Duration::from_millis(500));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while status.connected() {
        every.tick().await;
    }
}

impl DeliverySource for RabbitSource {
    type Delivery = RabbitDelivery;

    /// Never ends on its own: a lost connection is reopened with backoff (logged at WARN), and
    /// the consumer loop's shutdown is what stops it.
    async fn next(&mut self) -> Option<Result<RabbitDelivery, BoxError>> {
        loop {
            let Some(live) = self.live.as_mut() else {
                tokio::time::sleep(self.config.reconnect.delay(self.failures)).await;
                match open(&self.config, &self.tls).await {
                    Ok(live) => {
                        info!(queue = %self.config.queue, after = self.failures, "reconnected to RabbitMQ");
                        self.live = Some(live);
                        self.failures = 0;
                    }
                    Err(e) => {
                        self.failures = self.failures.saturating_add(1);
                        warn!(error = %e, failures = self.failures, "RabbitMQ reconnect failed; retrying");
                    }
                }
                continue;
            };
            // A consumer whose connection died does not always end its stream: watch the
            // connection too, so that a killed broker leads to a reconnect, not a wait for ever.
            let next = tokio::select! {
                biased;
                next = live.consumer.next() => next,
                () = &mut live.lost.0 => None,
            };
            match next {
                Some(Ok(delivery)) => {
                    let live = self.live.as_ref()?;
                    return Some(Ok(self.wrap(delivery, live)));
                }
                Some(Err(e)) => {
                    warn!(error = %e, queue = %self.config.queue, "RabbitMQ consumer lost; reconnecting")
                }
                None => {
                    warn!(queue = %self.config.queue, "RabbitMQ consumer cancelled; reconnecting")
                }
            }
            self.live = None;
            self.failures = 1;
        }
    }

    /// `Connection.Close`, then its `Close-Ok`: the broker answers it after every frame sent
    /// before, the acks of what was settled among them. Without it, the process exited with
    /// acks the broker never took (a SIGTERM test stored 20,000 messages of which 127 were
    /// still in the queue).
    async fn close(mut self) {
        let Some(live) = self.live.take() else {
            return;
        };
        let closing = live.conn.close(200, "the consumer stopped".into());
        match tokio::time::timeout(self.config.ack_timeout, closing).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "closing the RabbitMQ connection failed"),
            Err(_) => warn!(
                within = ?self.config.ack_timeout,
                "RabbitMQ did not answer the connection's close"
            ),
        }
    }
}
