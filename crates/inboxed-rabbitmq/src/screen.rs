//! The screen between the broker's socket and lapin: every frame the broker sends passes
//! through it verbatim, except a delivery that lapin could not parse.
//!
//! lapin treats a frame it cannot parse as a broken connection. A short string that is not
//! UTF-8 (a `message_id`, a header name, a routing key: RabbitMQ stores and forwards such bytes
//! unchanged, and any producer outside Rust can send them) thus closed the connection, the
//! broker requeued the message at the head of the queue, and the reconnected consumer received
//! it first again: one message stopped the queue. The screen reads each `basic.deliver` and
//! content header leniently ([`wire`](crate::wire)); when it finds what lapin would fail on, it
//! hands lapin the same delivery with empty properties (and the method's strings made valid)
//! and records the flaws and the raw bytes under the delivery tag, where the source finds them
//! and dead-letters the delivery with a reason naming the field. The body passes unchanged,
//! the ack goes through lapin as for any delivery, and nothing else on the connection changes.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};

use inboxed_core::escape_bytes;

use crate::wire::{self, Bytes, Flaw};

const FRAME_METHOD: u8 = 1;
const FRAME_HEADER: u8 = 2;
const FRAME_END: u8 = 0xCE;
const CLASS_BASIC: u16 = 60;
const METHOD_DELIVER: u16 = 60;
const METHOD_GET_OK: u16 = 71;
/// Type octet, channel, payload size.
const FRAME_HEAD: usize = 7;
/// What one read asks of the socket.
const READ_CHUNK: usize = 64 * 1024;

/// A delivery lapin got with its unreadable parts taken out, as the screen found it.
#[derive(Debug, Clone)]
pub(crate) struct Unreadable {
    /// Each field that could not be read.
    pub(crate) flaws: Vec<Flaw>,
    /// The `message_id` property as sent, when there was one.
    pub(crate) message_id: Option<Vec<u8>>,
    /// The exchange and routing key as sent.
    pub(crate) exchange: Vec<u8>,
    pub(crate) routing_key: Vec<u8>,
    /// The content header's property flags and list as sent: nothing of them is lost.
    pub(crate) raw_properties: Vec<u8>,
}

impl Unreadable {
    /// The dead letter's error: the fields, the message, and every byte that was replaced.
    pub(crate) fn detail(&self) -> String {
        let flaws: Vec<String> = self.flaws.iter().map(ToString::to_string).collect();
        let id = self.message_id.as_deref().map_or_else(
            || "no message_id property".to_owned(),
            |id| format!("message_id {}", escape_bytes(id)),
        );
        format!(
            "the AMQP client cannot read {}; {id}, exchange {:?}, routing key {}; raw \
             properties as sent: {}",
            flaws.join("; "),
            String::from_utf8_lossy(&self.exchange),
            escape_bytes(&self.routing_key),
            escape_bytes(&self.raw_properties),
        )
    }
}

/// The deliveries of one connection that the screen changed, by channel and delivery tag,
/// until the source takes each.
#[derive(Debug, Default)]
pub(crate) struct Wounds {
    by_tag: Mutex<HashMap<(u16, u64), Unreadable>>,
}

impl Wounds {
    /// Takes what the screen recorded for a delivery, if it changed it.
    pub(crate) fn take(&self, channel: u16, tag: u64) -> Option<Unreadable> {
        let mut by_tag = self.by_tag.lock().unwrap_or_else(PoisonError::into_inner);
        if by_tag.is_empty() {
            return None;
        }
        by_tag.remove(&(channel, tag))
    }

    fn record(&self, channel: u16, tag: u64, unreadable: Unreadable) {
        let mut by_tag = self.by_tag.lock().unwrap_or_else(PoisonError::into_inner);
        by_tag.insert((channel, tag), unreadable);
    }
}

/// The method frame of a delivery, waiting for its content header.
#[derive(Debug)]
struct Pending {
    tag: u64,
    flaws: Vec<Flaw>,
    exchange: Vec<u8>,
    routing_key: Vec<u8>,
}

/// A socket read through the screen. Writes pass straight through.
#[derive(Debug)]
pub(crate) struct Screened<S> {
    inner: S,
    /// Bytes read from the socket and not yet cut into frames, from `raw_at`.
    raw: Vec<u8>,
    raw_at: usize,
    /// Screened bytes for lapin, from `ready_at`.
    ready: Vec<u8>,
    ready_at: usize,
    /// Per channel, the delivery whose content header comes next.
    pending: HashMap<u16, Pending>,
    wounds: Arc<Wounds>,
}

impl<S> Screened<S> {
    pub(crate) fn new(inner: S, wounds: Arc<Wounds>) -> Self {
        Self {
            inner,
            raw: Vec::new(),
            raw_at: 0,
            ready: Vec::new(),
            ready_at: 0,
            pending: HashMap::new(),
            wounds,
        }
    }

    /// Moves every complete frame from `raw` to `ready`, screened.
    fn cut_frames(&mut self) {
        loop {
            let raw = &self.raw[self.raw_at..];
            // A protocol header: the broker refusing our protocol version. Not a frame.
            if raw.starts_with(b"AMQP") {
                if raw.len() < 8 {
                    break;
                }
                self.ready.extend_from_slice(&raw[..8]);
                self.raw_at += 8;
                continue;
            }
            if raw.len() < FRAME_HEAD {
                break;
            }
            let size = u32::from_be_bytes([raw[3], raw[4], raw[5], raw[6]]);
            let Some(total) = usize::try_from(size)
                .ok()
                .and_then(|n| n.checked_add(FRAME_HEAD + 1))
            else {
                break;
            };
            if raw.len() < total {
                break;
            }
            let at = self.raw_at;
            self.raw_at += total;
            // Only methods and content headers can hold what lapin fails on; everything else
            // (bodies above all) goes straight through, without a copy of its own.
            if !matches!(self.raw[at], FRAME_METHOD | FRAME_HEADER) {
                self.ready.extend_from_slice(&self.raw[at..at + total]);
                continue;
            }
            let frame = self.raw[at..at + total].to_vec();
            self.screen(&frame);
        }
        if self.raw_at == self.raw.len() {
            self.raw.clear();
            self.raw_at = 0;
        } else if self.raw_at > READ_CHUNK {
            self.raw.drain(..self.raw_at);
            self.raw_at = 0;
        }
    }

    /// Appends `frame` to `ready`, or the frame lapin can read in its place.
    fn screen(&mut self, frame: &[u8]) {
        let kind = frame[0];
        let channel = u16::from_be_bytes([frame[1], frame[2]]);
        let payload = &frame[FRAME_HEAD..frame.len() - 1];
        if frame[frame.len() - 1] != FRAME_END {
            // Not AMQP any more: lapin says so and closes.
            self.ready.extend_from_slice(frame);
            return;
        }
        match kind {
            FRAME_METHOD => {
                if let Some((pending, replacement)) = read_delivery_method(payload) {
                    self.pending.insert(channel, pending);
                    if let Some(method) = replacement {
                        push_frame(&mut self.ready, FRAME_METHOD, channel, &method);
                        return;
                    }
                }
            }
            FRAME_HEADER => {
                if let Some(replacement) = self.read_content_header(channel, payload) {
                    push_frame(&mut self.ready, FRAME_HEADER, channel, &replacement);
                    return;
                }
            }
            _ => {}
        }
        self.ready.extend_from_slice(frame);
    }

    /// Checks a content header; `Some(replacement)` when lapin could not read it, after
    /// recording what it held under its delivery's tag.
    fn read_content_header(&mut self, channel: u16, payload: &[u8]) -> Option<Vec<u8>> {
        let pending = self.pending.remove(&channel);
        // Class, weight, body size, then the properties.
        let props = payload.get(12..)?;
        let mut found = wire::read_properties(props);
        let mut flaws = pending
            .as_ref()
            .map(|p| p.flaws.clone())
            .unwrap_or_default();
        // The lenient reader applies lapin's rules; lapin's own parser has the last word, so
        // that nothing it would still fail on reaches it.
        if found.flaws.is_empty() && flaws.is_empty() && lapin_reads(channel, payload) {
            return None;
        }
        if found.flaws.is_empty() && flaws.is_empty() {
            found.flaws.push(Flaw {
                field: "properties".to_owned(),
                what: "the client's parser refuses them".to_owned(),
            });
        }
        flaws.append(&mut found.flaws);
        // The same header with no properties at all: class, weight and body size kept.
        let mut replacement = payload[..12].to_vec();
        replacement.extend_from_slice(&0u16.to_be_bytes());
        if let Some(pending) = pending {
            self.wounds.record(
                channel,
                pending.tag,
                Unreadable {
                    flaws,
                    message_id: found.message_id,
                    exchange: pending.exchange,
                    routing_key: pending.routing_key,
                    raw_properties: props.to_vec(),
                },
            );
        }
        Some(replacement)
    }
}

/// Runs `bytes` through a screen in reads of `chunk` bytes, then ends the stream: what lapin
/// would read.
#[cfg(any(test, fuzzing))]
pub(crate) fn screen_all(bytes: &[u8], chunk: usize) -> (Vec<u8>, Arc<Wounds>) {
    let wounds = Arc::new(Wounds::default());
    let mut screened = Screened::new((), Arc::clone(&wounds));
    for piece in bytes.chunks(chunk.max(1)) {
        screened.raw.extend_from_slice(piece);
        screened.cut_frames();
    }
    // At the end of the stream what is left of a frame goes to lapin as it came (poll_read).
    let rest = screened.raw[screened.raw_at..].to_vec();
    screened.ready.extend_from_slice(&rest);
    (screened.ready, wounds)
}

/// Whether lapin's own frame parser reads this content header.
fn lapin_reads(channel: u16, payload: &[u8]) -> bool {
    let mut frame = Vec::with_capacity(payload.len() + FRAME_HEAD + 1);
    push_frame(&mut frame, FRAME_HEADER, channel, payload);
    amq_protocol::frame::parsing::parse_frame(frame.as_slice()).is_ok()
}

/// A frame of `kind` on `channel` around `payload`.
fn push_frame(out: &mut Vec<u8>, kind: u8, channel: u16, payload: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&channel.to_be_bytes());
    let size = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(payload);
    out.push(FRAME_END);
}

/// Reads a `basic.deliver` or `basic.get-ok` method: the delivery it announces, and a
/// replacement method when one of its strings is not UTF-8 (each replaced lossily, which is
/// what lapin can read; the bytes as sent are kept for the dead letter). `None` for any other
/// method.
fn read_delivery_method(payload: &[u8]) -> Option<(Pending, Option<Vec<u8>>)> {
    let mut at = Bytes::new(payload);
    let (class, method) = (at.u16()?, at.u16()?);
    if class != CLASS_BASIC || !matches!(method, METHOD_DELIVER | METHOD_GET_OK) {
        return None;
    }
    let consumer_tag = if method == METHOD_DELIVER {
        Some(at.short()?)
    } else {
        None
    };
    let tag = at.u64()?;
    let redelivered = at.u8()?;
    let exchange = at.short()?;
    let routing_key = at.short()?;
    let rest = at.take(at.remaining())?;
    let mut flaws = Vec::new();
    wire::check_text(exchange, || "exchange".to_owned(), &mut flaws);
    wire::check_text(routing_key, || "routing key".to_owned(), &mut flaws);
    let replacement = (!flaws.is_empty()).then(|| {
        let mut out = payload[..4].to_vec();
        if let Some(consumer_tag) = consumer_tag {
            push_short(&mut out, consumer_tag);
        }
        out.extend_from_slice(&tag.to_be_bytes());
        out.push(redelivered);
        push_short(&mut out, exchange);
        push_short(&mut out, routing_key);
        out.extend_from_slice(rest);
        out
    });
    let pending = Pending {
        tag,
        flaws,
        exchange: exchange.to_vec(),
        routing_key: routing_key.to_vec(),
    };
    Some((pending, replacement))
}

/// A short string, made UTF-8 (lossily) and cut to 255 bytes on a character boundary.
fn push_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(255);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push(u8::try_from(end).unwrap_or(u8::MAX));
    out.extend_from_slice(&text.as_bytes()[..end]);
}

impl<S: AsyncRead + Unpin> AsyncRead for Screened<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if this.ready_at < this.ready.len() {
                let n = buf.len().min(this.ready.len() - this.ready_at);
                buf[..n].copy_from_slice(&this.ready[this.ready_at..this.ready_at + n]);
                this.ready_at += n;
                if this.ready_at == this.ready.len() {
                    this.ready.clear();
                    this.ready_at = 0;
                }
                return Poll::Ready(Ok(n));
            }
            let filled = this.raw.len();
            this.raw.resize(filled + READ_CHUNK, 0);
            let read = Pin::new(&mut this.inner).poll_read(cx, &mut this.raw[filled..]);
            let n = match read {
                Poll::Ready(Ok(n)) => n,
                other => {
                    this.raw.truncate(filled);
                    return other;
                }
            };
            this.raw.truncate(filled + n);
            if n == 0 {
                // End of stream: what is left of a frame goes to lapin as it came.
                this.ready.extend_from_slice(&this.raw[this.raw_at..]);
                this.raw.clear();
                this.raw_at = 0;
                if this.ready.is_empty() {
                    return Poll::Ready(Ok(0));
                }
                continue;
            }
            this.cut_frames();
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Screened<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deliver(tag: u64, routing_key: &[u8]) -> Vec<u8> {
        let mut payload = [CLASS_BASIC.to_be_bytes(), METHOD_DELIVER.to_be_bytes()].concat();
        push_raw_short(&mut payload, b"ctag");
        payload.extend_from_slice(&tag.to_be_bytes());
        payload.push(0);
        push_raw_short(&mut payload, b"");
        push_raw_short(&mut payload, routing_key);
        let mut frame = Vec::new();
        push_frame(&mut frame, FRAME_METHOD, 1, &payload);
        frame
    }

    fn push_raw_short(out: &mut Vec<u8>, bytes: &[u8]) {
        out.push(u8::try_from(bytes.len()).unwrap());
        out.extend_from_slice(bytes);
    }

    fn header(message_id: &[u8]) -> Vec<u8> {
        let mut payload = [CLASS_BASIC.to_be_bytes(), [0, 0]].concat();
        payload.extend_from_slice(&3u64.to_be_bytes());
        payload.extend_from_slice(&(1u16 << 7).to_be_bytes());
        push_raw_short(&mut payload, message_id);
        let mut frame = Vec::new();
        push_frame(&mut frame, FRAME_HEADER, 1, &payload);
        frame
    }

    use super::screen_all as through;

    #[test]
    fn readable_frames_pass_byte_for_byte_whatever_the_reads() {
        let stream = [
            deliver(1, b"rk"),
            header(b"m-1"),
            vec![3, 0, 1, 0, 0, 0, 3, b'a', b'b', b'c', FRAME_END],
        ]
        .concat();
        for chunk in [1, 2, 7, 100] {
            let (out, wounds) = through(&stream, chunk);
            assert_eq!(out, stream, "chunk {chunk}");
            assert!(wounds.take(1, 1).is_none());
        }
    }

    #[test]
    fn an_unreadable_delivery_reaches_lapin_readable_and_is_recorded() {
        let stream = [deliver(7, b"rk\xff"), header(b"m-\xff")].concat();
        let (out, wounds) = through(&stream, 3);
        let frames = amq_protocol::frame::parsing::parse_frame(out.as_slice());
        let (rest, _) = frames.expect("lapin reads the method");
        assert!(
            amq_protocol::frame::parsing::parse_frame(rest).is_ok(),
            "and the header"
        );
        let unreadable = wounds.take(1, 7).expect("recorded under its tag");
        let detail = unreadable.detail();
        assert!(
            detail.contains("routing key: not valid UTF-8 (bytes rk\\xff)"),
            "{detail}"
        );
        assert!(
            detail.contains("message_id property: not valid UTF-8 (bytes m-\\xff)"),
            "{detail}"
        );
        assert!(detail.contains("message_id m-\\xff"), "{detail}");
        assert_eq!(
            unreadable.raw_properties,
            header(b"m-\xff")[19..header(b"m-\xff").len() - 1]
        );
        assert!(wounds.take(1, 7).is_none(), "taken once");
    }
}
