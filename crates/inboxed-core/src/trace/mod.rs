//! W3C trace context, carried with a message from the service that created it to the one that
//! processes it, across the outbox, the broker and store-then-process.
//!
//! The core reads and forwards the W3C text ([`TraceContext`]) and depends on no tracing
//! system: [`OutgoingMessage::caused_by`](crate::OutgoingMessage::caused_by) forwards the
//! inbound message's context, and [`Outbox::write`](crate::Outbox::write) stores it with the
//! row as the `traceparent`, `tracestate` and `baggage` headers, which the relay publishes on
//! every broker. With the `otel` feature, the write captures the current span's context
//! instead (the handler's, a child of the processing span), and processing a message makes its
//! span a child of the context the message carries.

#[cfg(feature = "otel")]
mod otel;
pub(crate) mod spans;

use crate::headers::Headers;

/// The header that carries the W3C `traceparent` (names a trace and the span that sent the
/// message).
pub const TRACEPARENT: &str = "traceparent";
/// The header that carries the W3C `tracestate` (vendors' own entries).
pub const TRACESTATE: &str = "tracestate";
/// The header that carries W3C baggage (application key-value pairs).
pub const BAGGAGE: &str = "baggage";

/// Where producers that do not write `traceparent` put one, read in this order when it is
/// absent: CloudEvents' binary modes (Kafka's `ce_`, HTTP's and NATS's `ce-`, AMQP's
/// `cloudEvents:` and `cloudEvents_`), MassTransit's `MT-Activity-Id` and Wolverine's
/// `parent-id` (both the W3C form of a .NET `Activity` id). A value that is not a W3C
/// traceparent is passed over.
const TRACEPARENT_ELSEWHERE: [&str; 6] = [
    "ce_traceparent",
    "ce-traceparent",
    "cloudEvents:traceparent",
    "cloudEvents_traceparent",
    "MT-Activity-Id",
    "parent-id",
];
/// Where producers that do not write `tracestate` put one (CloudEvents' binary modes).
const TRACESTATE_ELSEWHERE: [&str; 4] = [
    "ce_tracestate",
    "ce-tracestate",
    "cloudEvents:tracestate",
    "cloudEvents_tracestate",
];

/// The W3C trace context of one message: the `traceparent` it was sent under, and the
/// `tracestate` and baggage that came with it.
///
/// ```
/// # use inboxed_core::trace::TraceContext;
/// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?
///     .with_tracestate("vendor=opaque");
/// assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert!(trace.sampled());
/// # Ok::<(), inboxed_core::trace::InvalidTraceparent>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
    baggage: Option<String>,
}

/// A `traceparent` that is not in the W3C form (`00-` 32 hex digits `-` 16 hex digits `-` 2
/// hex digits, lowercase, neither id all zeros).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a W3C traceparent: {0:?}")]
pub struct InvalidTraceparent(pub String);

impl TraceContext {
    /// The longest `tracestate` kept: the W3C recommendation's 512 characters, which every
    /// vendor propagates; a longer one is left out, not cut (a cut entry would mislead).
    pub const MAX_TRACESTATE_BYTES: usize = 512;
    /// The longest baggage kept: the W3C limit of 8192 bytes.
    pub const MAX_BAGGAGE_BYTES: usize = 8192;

    /// Reads a `traceparent`. A later version than `00` is read as `00` reads it (its first
    /// 55 characters), as the W3C specification asks, and forwarded as received.
    ///
    /// # Errors
    /// When `traceparent` is not in the W3C form.
    pub fn parse(traceparent: &str) -> Result<Self, InvalidTraceparent> {
        if valid_traceparent(traceparent) {
            Ok(Self {
                traceparent: traceparent.to_owned(),
                tracestate: None,
                baggage: None,
            })
        } else {
            Err(InvalidTraceparent(traceparent.to_owned()))
        }
    }

    /// With `tracestate`, unless it is longer than [`TraceContext::MAX_TRACESTATE_BYTES`] or
    /// holds a control character, when it is left out.
    #[must_use]
    pub fn with_tracestate(mut self, tracestate: impl Into<String>) -> Self {
        self.tracestate = Some(tracestate.into())
            .filter(|s| !s.is_empty() && s.len() <= Self::MAX_TRACESTATE_BYTES && printable(s));
        self
    }

    /// With W3C `baggage`, unless it is longer than [`TraceContext::MAX_BAGGAGE_BYTES`] or
    /// holds a control character, when it is left out.
    #[must_use]
    pub fn with_baggage(mut self, baggage: impl Into<String>) -> Self {
        self.baggage = Some(baggage.into())
            .filter(|s| !s.is_empty() && s.len() <= Self::MAX_BAGGAGE_BYTES && printable(s));
        self
    }

    /// The context a message's headers carry: `traceparent`, or where other producers put one
    /// (CloudEvents' binary modes, MassTransit, Wolverine), with its `tracestate` and
    /// `baggage`. `None` when no header holds a W3C traceparent.
    #[must_use]
    pub fn from_headers(headers: &Headers) -> Option<Self> {
        let traceparent = std::iter::once(TRACEPARENT)
            .chain(TRACEPARENT_ELSEWHERE)
            .filter_map(|name| headers.get_str(name))
            .map(str::trim)
            .find(|value| valid_traceparent(value))?;
        let mut trace = Self {
            traceparent: traceparent.to_owned(),
            tracestate: None,
            baggage: None,
        };
        if let Some(state) = std::iter::once(TRACESTATE)
            .chain(TRACESTATE_ELSEWHERE)
            .find_map(|name| headers.get_str(name))
        {
            trace = trace.with_tracestate(state.trim());
        }
        if let Some(baggage) = headers.get_str(BAGGAGE) {
            trace = trace.with_baggage(baggage.trim());
        }
        Some(trace)
    }

    /// The `traceparent`, as received.
    #[must_use]
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The trace's id: 32 lowercase hex digits.
    #[must_use]
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The id of the span that sent the message: 16 lowercase hex digits.
    #[must_use]
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// Whether the sender recorded its trace (the `sampled` flag).
    #[must_use]
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.traceparent[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    }

    /// The `tracestate`, if one came and was kept.
    #[must_use]
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The baggage, if some came and was kept.
    #[must_use]
    pub fn baggage(&self) -> Option<&str> {
        self.baggage.as_deref()
    }

    /// The headers that carry it: `traceparent`, and `tracestate` and `baggage` when present.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            Some((TRACEPARENT, self.traceparent.as_str())),
            self.tracestate.as_deref().map(|s| (TRACESTATE, s)),
            self.baggage.as_deref().map(|s| (BAGGAGE, s)),
        ]
        .into_iter()
        .flatten()
    }
}

/// The context current where a message is written: with the `otel` feature, the current
/// span's when an OpenTelemetry layer records it; otherwise none.
pub(crate) fn ambient() -> Option<TraceContext> {
    #[cfg(feature = "otel")]
    {
        otel::current()
    }
    #[cfg(not(feature = "otel"))]
    {
        None
    }
}

/// Joins `span` to the trace of the context `trace` reads, as its parent or as a link, with
/// the `otel` feature (a span that no subscriber records reads nothing); without it, nothing.
pub(crate) fn join(
    span: &tracing::Span,
    as_parent: bool,
    trace: impl FnOnce() -> Option<TraceContext>,
) {
    #[cfg(feature = "otel")]
    if !span.is_disabled()
        && let Some(trace) = trace()
    {
        if as_parent {
            otel::adopt(span, &trace);
        } else {
            otel::link(span, &trace);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, as_parent, trace);
}

/// W3C Trace Context, level 1, section 3.2: `version-traceid-parentid-flags`, lowercase hex.
fn valid_traceparent(value: &str) -> bool {
    let b = value.as_bytes();
    let hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let zeros = |s: &[u8]| s.iter().all(|&c| c == b'0');
    if b.len() < 55 || !hex(&b[..2]) || &b[..2] == b"ff" {
        return false;
    }
    // Version 00 is exactly 55 characters; a later one may carry more after a dash.
    let length_fits = if &b[..2] == b"00" {
        b.len() == 55
    } else {
        b.len() == 55 || b[55] == b'-'
    };
    length_fits
        && b[2] == b'-'
        && b[35] == b'-'
        && b[52] == b'-'
        && hex(&b[3..35])
        && !zeros(&b[3..35])
        && hex(&b[36..52])
        && !zeros(&b[36..52])
        && hex(&b[53..55])
}

/// Visible ASCII and spaces: what `tracestate` and baggage are made of (baggage
/// percent-encodes the rest), so that nothing else reaches a broker's header.
fn printable(s: &str) -> bool {
    s.bytes()
        .all(|c| c == b' ' || c == b'\t' || c.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_is_read_by_the_w3c_rules() {
        let trace = TraceContext::parse(PARENT).unwrap();
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.parent_id(), "00f067aa0ba902b7");
        assert!(trace.sampled());
        assert!(
            !TraceContext::parse(&PARENT.replace("-01", "-00"))
                .unwrap()
                .sampled()
        );
        let later = format!("cc{}-what-comes-later", &PARENT[2..]);
        assert_eq!(TraceContext::parse(&later).unwrap().traceparent(), later);
        for bad in [
            "",
            &PARENT.to_uppercase(),
            &PARENT.replace("4bf92f3577b34da6a3ce929d0e0e4736", &"0".repeat(32)),
            &PARENT.replace("00f067aa0ba902b7", &"0".repeat(16)),
            &format!("ff{}", &PARENT[2..]),
            &format!("{PARENT}-more"),
            &PARENT[..54],
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        ] {
            assert!(TraceContext::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tracestate_and_baggage_past_their_bounds_are_left_out() {
        let trace = TraceContext::parse(PARENT)
            .unwrap()
            .with_tracestate("a=".repeat(257))
            .with_baggage("k=v");
        assert_eq!(trace.tracestate(), None);
        assert_eq!(trace.baggage(), Some("k=v"));
        let trace = trace.with_tracestate("a=1,b=2").with_baggage("k=\u{1}");
        assert_eq!(trace.tracestate(), Some("a=1,b=2"));
        assert_eq!(trace.baggage(), None);
        assert_eq!(
            trace.headers().collect::<Vec<_>>(),
            [(TRACEPARENT, PARENT), (TRACESTATE, "a=1,b=2")]
        );
    }

    #[test]
    fn other_producers_headers_are_read_when_traceparent_is_absent() {
        let masstransit = Headers::new().with("MT-Activity-Id", PARENT);
        assert_eq!(
            TraceContext::from_headers(&masstransit).map(|t| t.traceparent().to_owned()),
            Some(PARENT.to_owned())
        );
        let cloudevents = Headers::new()
            .with("ce_traceparent", PARENT)
            .with("ce_tracestate", "v=1");
        let trace = TraceContext::from_headers(&cloudevents).unwrap();
        assert_eq!(trace.tracestate(), Some("v=1"));
        // A .NET hierarchical Activity id is not a traceparent: passed over for the next.
        let wolverine = Headers::new()
            .with("parent-id", "|a.b.c.")
            .with("cloudEvents:traceparent", PARENT);
        assert!(TraceContext::from_headers(&wolverine).is_some());
        // `traceparent` first, whatever its case on the wire.
        let both = Headers::new()
            .with(
                "MT-Activity-Id",
                "00-11111111111111111111111111111111-1111111111111111-01",
            )
            .with("Traceparent", PARENT);
        assert_eq!(
            TraceContext::from_headers(&both).unwrap().traceparent(),
            PARENT
        );
        let garbage = Headers::new().with("traceparent", b"\xff\xfe".to_vec());
        assert_eq!(TraceContext::from_headers(&garbage), None);
    }
}
