//! The stream of messages from one durable pull consumer, resuming when the server goes away.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::stream::{Config as StreamConfig, StorageType};
use futures_util::StreamExt;
use tracing::{info, warn};

use inboxed_core::{BoxError, DeliverySource, KeySource};

use crate::config::NatsConfig;
use crate::delivery::NatsDelivery;
use crate::screen::Screen;
use crate::upstream::Upstream;

/// Why a JetStream source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// Connecting, finding or creating the stream or consumer, or pulling failed.
    #[error("NATS JetStream: could not {step} (stream {stream:?}, consumer {consumer:?})")]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The stream.
        stream: String,
        /// The durable consumer.
        consumer: String,
        /// The client's error.
        #[source]
        source: BoxError,
    },
    /// The TLS CA file could not be used.
    #[error("NATS JetStream: {0}")]
    CaFile(#[from] inboxed_core::tls::CaFileError),
}

/// Messages of one durable pull consumer with explicit acks. The client reconnects its
/// connection by itself; when the pull stream fails (a restarted server, missed heartbeats),
/// `next` starts a new one with backoff. Messages taken before are redelivered by the server
/// after `ack_wait` if their acks did not get through.
pub struct NatsSource {
    config: NatsConfig,
    key: Arc<KeySource>,
    consumer: PullConsumer,
    messages: Option<pull::Stream>,
    failures: u32,
    /// The proxy async-nats reads the server through; `None` for servers reached directly.
    screen: Option<Screen>,
}

impl std::fmt::Debug for NatsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSource")
            .field("config", &self.config)
            .field("pulling", &self.messages.is_some())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl NatsSource {
    /// Connects, finds (or creates, see [`NatsConfig::declare`]) the stream and the
    /// durable consumer, and starts pulling, so that a wrong URL or name fails here with an
    /// error naming the step.
    ///
    /// # Errors
    /// [`NatsError::Setup`] naming the step that failed.
    pub async fn connect(config: NatsConfig) -> Result<Self, NatsError> {
        let setup = |step: &'static str| {
            let (stream, consumer) = (config.stream.clone(), config.consumer.clone());
            move |source: BoxError| NatsError::Setup {
                step,
                stream,
                consumer,
                source,
            }
        };
        let ca_pem = match &config.tls_ca_file {
            Some(path) => Some(inboxed_core::tls::read_ca_file(path)?),
            None => None,
        };
        let (url, screen, options) = match screened(&config.url) {
            Some((upstream, tls_required, via)) => {
                let upstream = Upstream::new(upstream, tls_required, ca_pem.as_deref())
                    .map_err(setup("set up TLS"))?;
                let screen = Screen::start(upstream)
                    .await
                    .map_err(|e| setup("start the screen")(e.into()))?;
                // The servers a cluster announces would bypass the screen: the URL given is
                // the one.
                let options = async_nats::ConnectOptions::new().ignore_discovered_servers();
                (via(screen.addr), Some(screen), options)
            }
            None => {
                let mut options = async_nats::ConnectOptions::new();
                if let Some(path) = &config.tls_ca_file {
                    options = options.add_root_certificates(path.clone());
                }
                (config.url.clone(), None, options)
            }
        };
        let client = match options.connect(crate::servers(&url)).await {
            Ok(client) => client,
            Err(e) => {
                let source: BoxError = match screen.as_ref().and_then(Screen::failure) {
                    Some(why) => format!("{e}: {why}").into(),
                    None => e.into(),
                };
                return Err(setup("connect")(source));
            }
        };
        let js = async_nats::jetstream::new(client);
        let stream = match &config.declare {
            Some(subjects) => js
                .get_or_create_stream(StreamConfig {
                    name: config.stream.clone(),
                    subjects: subjects.clone(),
                    storage: StorageType::File,
                    ..StreamConfig::default()
                })
                .await
                .map_err(|e| setup("create the stream")(e.into()))?,
            None => js
                .get_stream(&config.stream)
                .await
                .map_err(|e| setup("find the stream")(e.into()))?,
        };
        let consumer: PullConsumer = stream
            .get_or_create_consumer(
                &config.consumer,
                pull::Config {
                    durable_name: Some(config.consumer.clone()),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: config.ack_wait,
                    // Twice the batch: messages stranded by a restarted pull (redelivered only
                    // after ack_wait) do not stop the next pull.
                    max_ack_pending: i64::try_from(config.prefetch.saturating_mul(2))
                        .unwrap_or(i64::MAX),
                    ..pull::Config::default()
                },
            )
            .await
            .map_err(|e| setup("create the consumer")(e.into()))?;
        // An existing durable consumer keeps its own settings. Acks that cover earlier messages
        // (`All`) or no acks at all (`None`) would lose messages still being processed; refuse.
        let policy = consumer.cached_info().config.ack_policy;
        if policy != AckPolicy::Explicit {
            return Err(setup("use the existing consumer")(
                format!("its ack policy is {policy:?}; inboxed needs Explicit").into(),
            ));
        }
        let messages = pull_stream(&consumer, &config)
            .await
            .map_err(setup("pull"))?;
        Ok(Self {
            key: Arc::new(config.key.clone()),
            config,
            consumer,
            messages: Some(messages),
            failures: 0,
            screen,
        })
    }
}

/// For the URL of one server (`nats://[user:pass@]host:port`, `tls://…`, or without the
/// scheme), or of a cluster's servers separated by commas: each server's `host:port`, whether
/// the URL requires TLS, and the URL pointing at the screen's address instead. `None` for a
/// URL the screen cannot stand for (a path, servers with different credentials or TLS), which
/// async-nats reaches directly.
fn screened(url: &str) -> Option<(Vec<String>, bool, impl FnOnce(SocketAddr) -> String)> {
    // One URL, or a cluster's, as async-nats takes them: URLs separated by commas. The screen
    // stands for all of them; they must share their credentials and their TLS.
    let mut servers = Vec::new();
    let mut shared: Option<(String, bool)> = None;
    for one in url.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let (rest, tls_required) = match one.strip_prefix("tls://") {
            Some(rest) => (rest, true),
            None => (one.strip_prefix("nats://").unwrap_or(one), false),
        };
        if rest.contains("://") || rest.contains('/') {
            return None;
        }
        let (userinfo, host) = match rest.rsplit_once('@') {
            Some((userinfo, host)) => (format!("{userinfo}@"), host.to_owned()),
            None => (String::new(), rest.to_owned()),
        };
        let these = (userinfo, tls_required);
        if *shared.get_or_insert_with(|| these.clone()) != these {
            return None;
        }
        servers.push(if host.contains(':') {
            host
        } else {
            format!("{host}:4222")
        });
    }
    let (userinfo, tls_required) = shared?;
    Some((servers, tls_required, move |at: SocketAddr| {
        format!("nats://{userinfo}{at}")
    }))
}

/// Pulls of `prefetch` messages, with idle heartbeats so that a dead server is noticed.
async fn pull_stream(
    consumer: &PullConsumer,
    config: &NatsConfig,
) -> Result<pull::Stream, BoxError> {
    Ok(consumer
        .stream()
        .max_messages_per_batch(config.prefetch)
        .expires(Duration::from_secs(10))
        .heartbeat(Duration::from_secs(3))
        .messages()
        .await?)
}

impl DeliverySource for NatsSource {
    type Delivery = NatsDelivery;

    /// Never ends on its own: a failed pull stream is restarted with backoff (logged at WARN),
    /// and the consumer loop's shutdown is what stops it.
    async fn next(&mut self) -> Option<Result<NatsDelivery, BoxError>> {
        loop {
            let Some(messages) = self.messages.as_mut() else {
                tokio::time::sleep(self.config.reconnect.delay(self.failures)).await;
                match pull_stream(&self.consumer, &self.config).await {
                    Ok(messages) => {
                        info!(stream = %self.config.stream, after = self.failures, "resumed pulling from JetStream");
                        self.messages = Some(messages);
                    }
                    Err(e) => {
                        self.failures = self.failures.saturating_add(1);
                        warn!(error = %e, failures = self.failures, "JetStream pull failed; retrying");
                    }
                }
                continue;
            };
            match messages.next().await {
                Some(Ok(message)) => {
                    // Only a message proves the pull works again: starting one succeeds locally
                    // even while the server is away.
                    self.failures = 0;
                    let unreadable = match (&self.screen, &message.reply) {
                        (Some(screen), Some(reply)) => screen.wounds.take(reply.as_bytes()),
                        _ => None,
                    };
                    return Some(Ok(NatsDelivery {
                        inner: message,
                        key: Arc::clone(&self.key),
                        unreadable,
                    }));
                }
                Some(Err(e)) => {
                    warn!(error = %e, stream = %self.config.stream, "JetStream pull stream failed; restarting it")
                }
                None => {
                    warn!(stream = %self.config.stream, "JetStream pull stream ended; restarting it")
                }
            }
            self.messages = None;
            self.failures = self.failures.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::screened;

    #[test]
    fn one_server_or_a_cluster_goes_through_the_screen() {
        let (servers, tls, via) = screened("nats://u:p@n1:4222, nats://u:p@n2").unwrap();
        assert_eq!(servers, ["n1:4222", "n2:4222"]);
        assert!(!tls);
        assert_eq!(
            via("127.0.0.1:9".parse().unwrap()),
            "nats://u:p@127.0.0.1:9"
        );
        assert_eq!(screened("tls://n1:4443").unwrap().0, ["n1:4443"]);
        assert!(
            screened("nats://a@n1,nats://b@n2").is_none(),
            "credentials differ"
        );
        assert!(screened("nats://n1,tls://n2").is_none(), "TLS differs");
        assert!(screened("ws://n1:80/path").is_none());
    }
}
