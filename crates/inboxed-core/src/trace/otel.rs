//! The `otel` feature: between [`TraceContext`] and OpenTelemetry's context, through the W3C
//! propagators, on the spans `tracing-opentelemetry` records.

use std::collections::HashMap;

use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{BAGGAGE, TRACEPARENT, TRACESTATE, TraceContext};

/// W3C trace context and baggage: the wire form the library stores and publishes, whatever
/// propagator the application set for its own HTTP calls.
fn w3c() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

/// The current span's context, when an OpenTelemetry layer records the span (sampled or
/// not); `None` outside any recorded span.
pub(super) fn current() -> Option<TraceContext> {
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    w3c().inject_context(&cx, &mut carrier);
    let mut trace = TraceContext::parse(carrier.get(TRACEPARENT)?).ok()?;
    if let Some(state) = carrier.remove(TRACESTATE) {
        trace = trace.with_tracestate(state);
    }
    if let Some(baggage) = carrier.remove(BAGGAGE) {
        trace = trace.with_baggage(baggage);
    }
    Some(trace)
}

/// OpenTelemetry's context of the (remote) span `trace` names, with its baggage.
fn extract(trace: &TraceContext) -> opentelemetry::Context {
    let carrier: HashMap<String, String> = trace
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    w3c().extract(&carrier)
}

/// Makes `span` a child of the span `trace` names.
pub(super) fn adopt(span: &tracing::Span, trace: &TraceContext) {
    // An error here is a span already started or not recorded: it keeps its own parent.
    let _ = span.set_parent(extract(trace));
}

/// Links `span` to the span `trace` names.
pub(super) fn link(span: &tracing::Span, trace: &TraceContext) {
    span.add_link(extract(trace).span().span_context().clone());
}
