//! The outbox relay's SQS side: `SendMessageBatch`, ten rows a call, each message carrying
//! the outbox id in the message attribute `message_id` (where
//! [`SqsSource`](crate::SqsSource)'s default key source reads it). On a FIFO queue the
//! outbox id is also the `MessageDeduplicationId`, so that SQS drops a re-send within its
//! five-minute window, and the ordering key is the `MessageGroupId`, so that a key's messages
//! are delivered in order. SQS's answer for an entry is its confirmation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use tracing::warn;

use inboxed_core::outbox::{Confirmation, OutboxRow, Publisher};

use crate::config::SqsConfig;
use crate::entry::entry;
use crate::source::{SqsSetupError, client};

/// SQS's limit of entries a batch.
const BATCH: usize = 10;

/// Settings of an [`SqsPublisher`]: plain fields, each with its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsPublisherConfig {
    /// Queues by outbox destination, each a queue URL or a queue name (whose URL is asked of
    /// SQS once, with `GetQueueUrl`). A destination with none names its queue. Defaults to
    /// none.
    pub queues: BTreeMap<String, String>,
    /// An endpoint other than AWS's (an emulator, a VPC endpoint). Defaults to `None`: the
    /// region's own.
    pub endpoint_url: Option<String>,
    /// The region. Defaults to `None`: the environment's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// The largest message, body and attributes together, as SQS counts it: a larger one is
    /// refused before sending, for good. A batch call carries no more than this in all, as
    /// SQS requires. Raise it only for queues whose
    /// `MaximumMessageSize` is larger. Defaults to 262,144 bytes (256 KiB), SQS's long-standing
    /// default.
    pub max_message_bytes: usize,
}

impl Default for SqsPublisherConfig {
    fn default() -> Self {
        Self {
            queues: BTreeMap::new(),
            endpoint_url: None,
            region: None,
            max_message_bytes: 256 * 1024,
        }
    }
}

impl SqsPublisherConfig {
    /// Publishes `destination`'s messages to `queue`, a queue URL or name.
    #[must_use]
    pub fn queue(mut self, destination: impl Into<String>, queue: impl Into<String>) -> Self {
        self.queues.insert(destination.into(), queue.into());
        self
    }

    /// Sets [`SqsPublisherConfig::endpoint_url`].
    #[must_use]
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint_url = Some(url.into());
        self
    }

    /// Sets [`SqsPublisherConfig::region`].
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Sets [`SqsPublisherConfig::max_message_bytes`].
    #[must_use]
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`SqsPublisherConfig::queues`].
    #[must_use]
    pub fn queues(mut self, queues: BTreeMap<String, String>) -> Self {
        self.queues = queues;
        self
    }
}

/// Publishes outbox rows to SQS queues.
pub struct SqsPublisher {
    config: SqsPublisherConfig,
    client: Client,
    /// Queue URLs asked of SQS, by queue name.
    urls: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for SqsPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsPublisher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SqsPublisher {
    /// A client from the environment's credentials and region (the SDK's default chain), with
    /// the config's endpoint and region over them, checked with one `ListQueues` call so that
    /// an endpoint or credentials that do not work fail here.
    ///
    /// # Errors
    /// [`SqsSetupError::Setup`] (step `reach SQS`).
    pub async fn connect(config: SqsPublisherConfig) -> Result<Self, SqsSetupError> {
        let mut source = SqsConfig::new("");
        source.endpoint_url.clone_from(&config.endpoint_url);
        source.region.clone_from(&config.region);
        Self::with_client(client(&source).await, config).await
    }

    /// Uses a client built by the caller (its endpoint, region and credentials; the config's
    /// own are ignored), checked as [`SqsPublisher::connect`] checks its own.
    ///
    /// # Errors
    /// [`SqsSetupError::Setup`] (step `reach SQS`).
    pub async fn with_client(
        client: Client,
        config: SqsPublisherConfig,
    ) -> Result<Self, SqsSetupError> {
        client
            .list_queues()
            .max_results(1)
            .send()
            .await
            .map_err(|e| SqsSetupError::Setup {
                step: "reach SQS",
                queue_url: config.endpoint_url.clone().unwrap_or_default(),
                source: DisplayErrorContext(e).to_string().into(),
            })?;
        Ok(Self {
            config,
            client,
            urls: Mutex::new(HashMap::new()),
        })
    }

    /// The URL of `destination`'s queue: its route when that is a URL, otherwise the queue
    /// the route (or the destination itself) names, asked of SQS once.
    async fn queue_url(&self, destination: &str) -> Result<String, Confirmation> {
        let name = match self.config.queues.get(destination) {
            Some(url) if url.contains("://") => return Ok(url.clone()),
            Some(name) => name.as_str(),
            None => destination,
        };
        if let Some(url) = self.lock().get(name) {
            return Ok(url.clone());
        }
        match self.client.get_queue_url().queue_name(name).send().await {
            Ok(out) => {
                let url = out.queue_url.unwrap_or_default();
                self.lock().insert(name.to_owned(), url.clone());
                Ok(url)
            }
            Err(e) => Err(classify(&e, &format!("destination: queue {name:?}"))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.urls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes rows of one queue, ten a call, every call sent before any answer is awaited.
    async fn publish_to(&self, url: &str, rows: &[(usize, &OutboxRow)], out: &mut [Confirmation]) {
        let fifo = url.ends_with(".fifo");
        let mut calls = Vec::new();
        let mut valid: Vec<(usize, (SendMessageBatchRequestEntry, usize))> = Vec::new();
        for &(at, row) in rows {
            match entry(row, fifo, self.config.max_message_bytes, at) {
                Ok(e) => valid.push((at, e)),
                Err(reason) => {
                    out[at] = Confirmation::Refused {
                        reason,
                        permanent: true,
                    };
                }
            }
        }
        // A call carries at most ten entries and, together, no more than one message may
        // weigh: SQS refuses a larger call whole.
        let mut chunks: Vec<Vec<(usize, SendMessageBatchRequestEntry)>> = Vec::new();
        let mut weight = 0;
        for (at, (entry, size)) in valid {
            match chunks.last_mut() {
                Some(chunk)
                    if chunk.len() < BATCH && weight + size <= self.config.max_message_bytes =>
                {
                    weight += size;
                    chunk.push((at, entry));
                }
                _ => {
                    weight = size;
                    chunks.push(vec![(at, entry)]);
                }
            }
        }
        for chunk in chunks {
            let ats: Vec<usize> = chunk.iter().map(|(at, _)| *at).collect();
            let send = self
                .client
                .send_message_batch()
                .queue_url(url)
                .set_entries(Some(chunk.into_iter().map(|(_, e)| e).collect()))
                .send();
            calls.push((ats, send));
        }
        // The calls go out side by side: a key has at most one row in a batch, so no order
        // within a key depends on which call lands first.
        let (ats, sends): (Vec<_>, Vec<_>) = calls.into_iter().unzip();
        let answers = futures_util::future::join_all(sends).await;
        for (ats, answer) in ats.into_iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    // Entry ids are the rows' places in the batch; one this call did not send
                    // is ignored, and its row keeps "no answer" (unconfirmed).
                    let mine = |id: &str| id.parse::<usize>().ok().filter(|at| ats.contains(at));
                    for ok in answer.successful() {
                        if let Some(at) = mine(ok.id()) {
                            out[at] = Confirmation::Confirmed;
                        }
                    }
                    for failed in answer.failed() {
                        if let Some(at) = mine(failed.id()) {
                            let reason = format!(
                                "{}: {}",
                                failed.code(),
                                failed.message().unwrap_or_default()
                            );
                            out[at] = by_code(failed.code(), reason, failed.sender_fault());
                        }
                    }
                }
                Err(e) => {
                    let outcome = classify(&e, "SendMessageBatch");
                    for at in ats {
                        out[at] = outcome.clone();
                    }
                }
            }
        }
    }
}

/// What a failed call means for its rows: by the SDK's kind of failure and the service's
/// error code, never its message.
fn classify<E, R>(e: &SdkError<E, R>, what: &str) -> Confirmation
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let reason = format!("{what}: {}", DisplayErrorContext(e));
    match e {
        // The request could not be built (a parameter, the credentials): nothing was sent,
        // and it may be mended; retried, then dead.
        SdkError::ConstructionFailure(_) => Confirmation::Refused {
            reason,
            permanent: false,
        },
        // Only a refused connection shows that nothing was sent; a connection that died after
        // the request was written may have delivered it.
        SdkError::DispatchFailure(d)
            if d.as_connector_error()
                .is_some_and(|c| refused_connection(c)) =>
        {
            Confirmation::NotSent { reason }
        }
        SdkError::ServiceError(s) => by_code(s.err().code().unwrap_or_default(), reason, false),
        // A timeout, a reset, or a response that could not be read: the batch may have been
        // stored.
        _ => Confirmation::Unconfirmed { reason },
    }
}

/// What an SQS error code means for the rows it concerns, for a whole call and for one entry
/// of a batch alike; `sender_fault`: SQS said the request itself is at fault (an entry's flag).
fn by_code(code: &str, reason: String, sender_fault: bool) -> Confirmation {
    match code {
        // A queue may yet be created, a permission or a key granted.
        "AWS.SimpleQueueService.NonExistentQueue"
        | "QueueDoesNotExist"
        | "AccessDenied"
        | "AccessDeniedException"
        | "KmsAccessDenied"
        | "KmsDisabled"
        | "KmsNotFound" => Confirmation::Refused {
            reason,
            permanent: false,
        },
        // SQS cannot take it now: the relay pauses, no attempt spent.
        "RequestThrottled"
        | "ThrottlingException"
        | "ServiceUnavailable"
        | "InternalFailure"
        | "InternalError"
        | "KmsThrottled" => Confirmation::NotSent { reason },
        _ => Confirmation::Refused {
            reason,
            permanent: sender_fault,
        },
    }
}

/// Whether the call failed because the endpoint refused the connection (found in the error's
/// chain of sources).
fn refused_connection(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        source = err.source();
    }
    false
}

impl Publisher for SqsPublisher {
    fn system(&self) -> Option<&'static str> {
        Some("aws_sqs")
    }

    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        let mut out: Vec<Confirmation> = rows
            .iter()
            .map(|_| Confirmation::Unconfirmed {
                reason: "SQS gave no answer for the message".to_owned(),
            })
            .collect();
        // Rows by queue, each queue's in insert order.
        let mut by_queue: BTreeMap<&str, Vec<(usize, &OutboxRow)>> = BTreeMap::new();
        for (at, row) in rows.iter().enumerate() {
            by_queue
                .entry(&row.destination)
                .or_default()
                .push((at, row));
        }
        for (destination, rows) in by_queue {
            match self.queue_url(destination).await {
                Ok(url) => self.publish_to(&url, &rows, &mut out).await,
                Err(outcome) => {
                    if matches!(outcome, Confirmation::NotSent { .. }) {
                        warn!(destination, "SQS unreachable while finding a queue");
                    }
                    for (at, _) in rows {
                        out[at] = outcome.clone();
                    }
                }
            }
        }
        out
    }
}
