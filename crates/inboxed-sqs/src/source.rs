//! The messages of one queue, long-polled in batches of up to ten.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::SharedHttpClient;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use tracing::warn;

use inboxed_core::{BoxError, Delivery, DeliverySource};

use crate::config::{SqsConfig, seconds};
use crate::delivery::{Shared, SqsDelivery};

/// The HTTPS client [`SqsSource::connect`] gives the SDK: rustls on ring. The SDK's default
/// client is not built in (it needs aws-lc, a large C build), so a client built by hand for
/// [`SqsSource::with_client`] needs one too: `Config::builder().http_client(https_client())`.
#[must_use]
pub fn https_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// A client from the environment's credentials and region (the SDK's default chain), with
/// [`SqsConfig::endpoint_url`] and [`SqsConfig::region`] over them, on [`https_client`]: the
/// client [`SqsSource::connect`] uses, for sending to the same queue.
pub async fn client(config: &SqsConfig) -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(https_client());
    if let Some(endpoint) = &config.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    Client::new(&loader.load().await)
}

/// Why an SQS source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqsSetupError {
    /// Reaching the queue failed (endpoint, credentials, permissions, a wrong URL).
    #[error("SQS: could not {step} (queue {queue_url:?})")]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The queue's URL.
        queue_url: String,
        /// The SDK's error.
        #[source]
        source: BoxError,
    },
}

/// Messages of one queue. A message is deleted only by its ack, after the database commit; a
/// failed receive is retried with backoff (logged at WARN).
pub struct SqsSource {
    config: SqsConfig,
    shared: Arc<Shared>,
    ready: VecDeque<(Instant, SqsDelivery)>,
    visibility: Duration,
    failures: u32,
}

impl std::fmt::Debug for SqsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsSource")
            .field("config", &self.config)
            .field("ready", &self.ready.len())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl SqsSource {
    /// Builds a client from the environment's credentials and region (the SDK's default chain:
    /// environment variables, profile files, web identity, container and instance metadata),
    /// with [`SqsConfig::endpoint_url`] and [`SqsConfig::region`] over them, then checks the
    /// queue as [`SqsSource::with_client`] does.
    ///
    /// # Errors
    /// [`SqsSetupError::Setup`] when the queue cannot be reached.
    pub async fn connect(config: SqsConfig) -> Result<Self, SqsSetupError> {
        let client = client(&config).await;
        Self::with_client(client, config).await
    }

    /// Uses a client built by the caller (its endpoint, region and credentials; the config's
    /// own are ignored), after checking that the queue answers, so that a wrong URL or missing
    /// permission fails here rather than as endless receive retries.
    ///
    /// # Errors
    /// [`SqsSetupError::Setup`] when the queue cannot be reached.
    pub async fn with_client(client: Client, config: SqsConfig) -> Result<Self, SqsSetupError> {
        let attributes = client
            .get_queue_attributes()
            .queue_url(&config.queue_url)
            .attribute_names(QueueAttributeName::VisibilityTimeout)
            .send()
            .await
            .map_err(|e| SqsSetupError::Setup {
                step: "find the queue",
                queue_url: config.queue_url.clone(),
                source: e.into(),
            })?;
        let queue_visibility = attributes
            .attributes
            .as_ref()
            .and_then(|a| a.get(&QueueAttributeName::VisibilityTimeout))
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(30), Duration::from_secs);
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                queue_url: config.queue_url.clone(),
                key: config.key.clone(),
            }),
            visibility: config.visibility_timeout.unwrap_or(queue_visibility),
            config,
            ready: VecDeque::new(),
            failures: 0,
        })
    }

    async fn receive(&mut self) -> Result<(), BoxError> {
        let c = &self.config;
        let mut request = self
            .shared
            .client
            .receive_message()
            .queue_url(&c.queue_url)
            .max_number_of_messages(i32::try_from(c.prefetch.clamp(1, 10)).unwrap_or(10))
            .wait_time_seconds(seconds(c.wait).min(20))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .message_attribute_names("All");
        if let Some(timeout) = c.visibility_timeout {
            request = request.visibility_timeout(seconds(timeout));
        }
        let output = request.send().await?;
        for message in output.messages.unwrap_or_default() {
            let Some(receipt_handle) = message.receipt_handle else {
                continue;
            };
            let system = |name| message.attributes.as_ref().and_then(|a| a.get(&name));
            let receive_count = system(MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| n.parse().ok());
            let sent_ms =
                system(MessageSystemAttributeName::SentTimestamp).and_then(|ms| ms.parse().ok());
            self.ready.push_back((
                Instant::now(),
                SqsDelivery {
                    message_id: message.message_id,
                    receipt_handle,
                    body: message.body.unwrap_or_default().into_bytes(),
                    attributes: message.message_attributes.unwrap_or_default(),
                    receive_count,
                    sent_ms,
                    shared: Arc::clone(&self.shared),
                },
            ));
        }
        Ok(())
    }
}

/// Messages received but never handed out become visible again at once (best effort: it
/// needs a running runtime), instead of staying hidden for their whole visibility timeout.
impl Drop for SqsSource {
    fn drop(&mut self) {
        if self.ready.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let buffered: Vec<SqsDelivery> = self.ready.drain(..).map(|(_, d)| d).collect();
        runtime.spawn(async move {
            for delivery in buffered {
                let _ = delivery.requeue(None).await;
            }
        });
    }
}

impl DeliverySource for SqsSource {
    type Delivery = SqsDelivery;

    /// Never ends on its own: a failed receive is retried with backoff, and the consumer loop's
    /// shutdown is what stops it.
    async fn next(&mut self) -> Option<Result<SqsDelivery, BoxError>> {
        loop {
            if let Some((received, delivery)) = self.ready.pop_front() {
                // A message that waited in the batch for a free handler has used up part of
                // its visibility: renew it, so it is not delivered elsewhere meanwhile.
                if received.elapsed() > self.visibility / 2
                    && let Err(e) = delivery.extend_deadline(self.visibility).await
                {
                    warn!(error = %e, "could not renew the visibility of a buffered message");
                }
                return Some(Ok(delivery));
            }
            match self.receive().await {
                Ok(()) => self.failures = 0,
                Err(e) => {
                    self.failures = self.failures.saturating_add(1);
                    warn!(error = %e, queue = %self.config.queue_url, failures = self.failures,
                        "SQS receive failed; retrying");
                    tokio::time::sleep(self.config.reconnect.delay(self.failures)).await;
                }
            }
        }
    }
}
