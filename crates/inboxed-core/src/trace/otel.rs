//! The `otel` feature: between [`TraceContext`] and OpenTelemetry's context, on the spans
//! `tracing-opentelemetry` records. The W3C text is already validated by [`TraceContext`], so
//! the ids convert directly; only baggage, whose percent-encoding is the propagator's to
//! read and write, goes through `opentelemetry_sdk`'s propagator (and only when there is
//! some): a message's span pays no carrier map or propagator per call.

use std::collections::HashMap;
use std::str::FromStr as _;

use opentelemetry::baggage::BaggageExt as _;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use opentelemetry_sdk::propagation::BaggagePropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::{BAGGAGE, TraceContext};

/// The current span's context, when an OpenTelemetry layer records the span (sampled or
/// not); `None` outside any recorded span.
pub(super) fn current() -> Option<TraceContext> {
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8() & TraceFlags::SAMPLED.to_u8()
    );
    let mut trace = TraceContext::parse(&traceparent).ok()?;
    let state = sc.trace_state().header();
    if !state.is_empty() {
        trace = trace.with_tracestate(state);
    }
    if !cx.baggage().is_empty() {
        let mut carrier = HashMap::new();
        BaggagePropagator::new().inject_context(&cx, &mut carrier);
        if let Some(baggage) = carrier.remove(BAGGAGE) {
            trace = trace.with_baggage(baggage);
        }
    }
    Some(trace)
}

/// The remote span `trace` names, as the W3C propagator reads it: the sampled flag alone of
/// the flags, a tracestate that does not parse left out.
fn span_context(trace: &TraceContext) -> Option<SpanContext> {
    let flags = u8::from_str_radix(&trace.traceparent()[53..55], 16).ok()?;
    Some(SpanContext::new(
        TraceId::from_hex(trace.trace_id()).ok()?,
        SpanId::from_hex(trace.parent_id()).ok()?,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        trace
            .tracestate()
            .and_then(|s| TraceState::from_str(s).ok())
            .unwrap_or_default(),
    ))
}

/// Makes `span` a child of the span `trace` names, with the baggage it carries.
pub(super) fn adopt(span: &tracing::Span, trace: &TraceContext) {
    let Some(sc) = span_context(trace) else {
        return;
    };
    let mut cx = opentelemetry::Context::new();
    if let Some(baggage) = trace.baggage() {
        let carrier = HashMap::from([(BAGGAGE.to_owned(), baggage.to_owned())]);
        cx = BaggagePropagator::new().extract_with_context(&cx, &carrier);
    }
    // An error here is a span already started or not recorded: it keeps its own parent.
    let _ = span.set_parent(cx.with_remote_span_context(sc));
}

/// Links `span` to the span `trace` names.
pub(super) fn link(span: &tracing::Span, trace: &TraceContext) {
    if let Some(sc) = span_context(trace) {
        span.add_link(sc);
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// A span adopted from a message's context hands the same trace, flags, tracestate and
    /// baggage to what is written inside it, under a span id of its own.
    #[test]
    fn a_context_read_into_a_span_is_written_back_from_it() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let received =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .unwrap()
                .with_tracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
                .with_baggage("tenant=acme,region=eu%20west");
        let written = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("process");
            adopt(&span, &received);
            span.in_scope(current)
        })
        .expect("a recorded span has a context");
        assert_eq!(written.trace_id(), received.trace_id());
        assert_ne!(written.parent_id(), received.parent_id());
        assert!(written.sampled());
        assert_eq!(written.tracestate(), received.tracestate());
        let mut baggage: Vec<_> = written.baggage().unwrap().split(',').collect();
        baggage.sort_unstable();
        assert_eq!(baggage, ["region=eu%20west", "tenant=acme"]);
    }

    /// Flags other than sampled are not carried on, and a tracestate that does not parse is
    /// left out rather than failing the span.
    #[test]
    fn unknown_flags_and_a_bad_tracestate_are_dropped() {
        let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02")
            .unwrap()
            .with_tracestate("not a tracestate");
        let sc = span_context(&trace).unwrap();
        assert!(!sc.is_sampled());
        assert_eq!(sc.trace_flags(), TraceFlags::default());
        assert_eq!(sc.trace_state().header(), "");
        assert!(sc.is_remote());
    }
}
