//! The spans the library emits, one function each, named and attributed by OpenTelemetry's
//! semantic conventions for messaging (`messaging.*`, the library's own under `inboxed.`), so
//! that a tracing backend shows a message's way through inboxed as it shows any broker
//! client's. The `tracing` name (`inboxed.process`) is what a log shows; `otel.name` is what
//! an OpenTelemetry backend shows (`process`, `send orders`).
//!
//! How a span joins the trace a message carries, with the `otel` feature: the first attempt
//! at a message is a child of the span that created it; a later attempt (a redelivery, a
//! crash's retry) and every span of many messages (a batch, a relay's publish) *link* to each
//! message's creation instead, since a span has one parent and a retry is not part of the
//! sender's operation.

use tracing::Span;
use tracing::field::Empty;

use super::TraceContext;
use crate::envelope::{ConsumerName, Envelope};
use crate::error::Error;
use crate::inbox::store::InboxRow;
use crate::outbox::OutgoingMessage;
use crate::outbox::store::OutboxRow;
use crate::processor::Outcome;

/// Writing outgoing messages to the outbox (`create`, a producer span): the context stored
/// with the rows is this span's, so a relay's `send` and the next service's `process` point
/// back here. One span for a `write_many`, whose messages share it.
pub(crate) fn create(messages: &[OutgoingMessage]) -> Span {
    let span = tracing::info_span!(
        "inboxed.create",
        otel.name = Empty,
        otel.kind = "producer",
        messaging.operation.type = "create",
        messaging.operation.name = "create",
        messaging.destination.name = Empty,
        messaging.batch.message_count = Empty,
        messaging.message.body.size = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    name_by_destination(
        &span,
        "create",
        messages.iter().map(OutgoingMessage::destination),
    );
    match messages {
        [one] => span.record("messaging.message.body.size", one.payload().len()),
        many => span.record("messaging.batch.message_count", many.len()),
    };
    span
}

/// Names a span of `operation` after its messages' destination when they share one
/// (`send orders`, as the conventions name it), else after the operation alone.
fn name_by_destination<'a>(
    span: &Span,
    operation: &'static str,
    mut destinations: impl Iterator<Item = &'a str>,
) {
    let first = destinations.next().unwrap_or_default();
    if destinations.all(|d| d == first) {
        span.record("otel.name", format!("{operation} {first}"));
        span.record("messaging.destination.name", first);
    } else {
        span.record("otel.name", operation);
    }
}

/// A relay publishing claimed outbox rows (`send`, a producer span), linked to each row's
/// creation (the trace context stored with it).
pub(crate) fn send(system: Option<&'static str>, rows: &[OutboxRow]) -> Span {
    let count = rows.len();
    let span = tracing::info_span!(
        "inboxed.send",
        otel.name = Empty,
        otel.kind = "producer",
        messaging.system = system,
        messaging.operation.type = "send",
        messaging.operation.name = "send",
        messaging.destination.name = Empty,
        messaging.batch.message_count = count,
    );
    if span.is_disabled() {
        return span;
    }
    name_by_destination(&span, "send", rows.iter().map(|r| r.destination.as_str()));
    for row in rows {
        super::join(&span, false, || {
            let traceparent = row.headers.get(super::TRACEPARENT)?;
            let mut trace = TraceContext::parse(traceparent).ok()?;
            if let Some(state) = row.headers.get(super::TRACESTATE) {
                trace = trace.with_tracestate(state.as_str());
            }
            Some(trace)
        });
    }
    span
}

/// The inbox relay storing deliveries as rows for workers (`receive`, a consumer span),
/// linked to each message's creation; the worker's `process` continues each message's own
/// trace later.
pub(crate) fn receive<'a>(
    system: Option<&'static str>,
    consumer: &ConsumerName,
    envelopes: impl Iterator<Item = &'a Envelope>,
    count: usize,
) -> Span {
    let span = tracing::info_span!(
        "inboxed.receive",
        otel.name = "receive",
        otel.kind = "consumer",
        messaging.system = system,
        messaging.operation.type = "receive",
        messaging.operation.name = "receive",
        messaging.consumer.group.name = consumer.as_str(),
        messaging.batch.message_count = count,
    );
    link_each(&span, envelopes);
    span
}

/// Links a span of many messages to each one's creation.
fn link_each<'a>(span: &Span, envelopes: impl Iterator<Item = &'a Envelope>) {
    for envelope in envelopes {
        super::join(span, false, || envelope.trace_context());
    }
}

/// A worker processing a stored row: [`process`] of the row's message, a first attempt at its
/// first claim.
pub(crate) fn row(consumer: &ConsumerName, row: &InboxRow) -> Span {
    process(
        None,
        consumer,
        &row.envelope,
        Some(row.id),
        row.attempts <= 1,
    )
}

/// Processing one message (`process`, a consumer span), by a processor or by a worker from
/// its stored row (`row`): a child of the message's creation on a first attempt, linked to
/// it on a later one.
pub(crate) fn process(
    system: Option<&'static str>,
    consumer: &ConsumerName,
    envelope: &Envelope,
    row: Option<i64>,
    first_attempt: bool,
) -> Span {
    let span = tracing::info_span!(
        "inboxed.process",
        otel.name = "process",
        otel.kind = "consumer",
        otel.status_code = Empty,
        otel.status_description = Empty,
        messaging.system = system,
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.consumer.group.name = consumer.as_str(),
        messaging.message.id = %envelope.id(),
        messaging.message.conversation_id = envelope.correlation_id(),
        messaging.message.body.size = envelope.payload().len(),
        inboxed.row = row,
        inboxed.outcome = Empty,
        inboxed.dead_letter.reason = Empty,
    );
    super::join(&span, first_attempt, || envelope.trace_context());
    span
}

/// Processing many messages in one transaction (`process`, a consumer span), linked to each
/// message's creation.
pub(crate) fn process_batch<'a>(
    system: Option<&'static str>,
    consumer: &ConsumerName,
    envelopes: impl Iterator<Item = &'a Envelope>,
    count: usize,
) -> Span {
    let span = tracing::info_span!(
        "inboxed.process_batch",
        otel.name = "process",
        otel.kind = "consumer",
        messaging.system = system,
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.consumer.group.name = consumer.as_str(),
        messaging.batch.message_count = count,
    );
    link_each(&span, envelopes);
    span
}

/// Records on a `process` span how its message settled: the outcome, a duplicate as an
/// event (the inbox suppressed it: nothing ran), a dead letter's reason, and an error status
/// when it did not settle.
pub(crate) fn settled(span: &Span, result: &Result<Outcome, Error>) {
    match result {
        Ok(outcome) => {
            span.record("inboxed.outcome", outcome.as_str());
            match outcome {
                Outcome::Duplicate => {
                    tracing::info!(parent: span, "duplicate: already processed, nothing ran");
                }
                Outcome::DeadLettered { reason } => {
                    span.record("inboxed.dead_letter.reason", reason.as_str());
                    span.record("otel.status_code", "error");
                }
                _ => {}
            }
        }
        Err(error) if !span.is_disabled() => failed(span, &error.to_string()),
        Err(_) => {}
    }
}

/// Records on a `process` span that its message failed this time, and why.
pub(crate) fn failed(span: &Span, why: &str) {
    span.record("otel.status_code", "error");
    span.record("otel.status_description", why);
}
