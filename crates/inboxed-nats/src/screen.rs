//! A screen between the NATS server and async-nats: the server's bytes pass through it
//! verbatim, except a message async-nats could not parse.
//!
//! async-nats reads a message's header block as UTF-8 text of `name: value` lines, with names
//! of visible ASCII, and treats one it cannot read as a broken connection. The server forwards
//! whatever a producer published (any client outside Rust can send such headers), so one
//! message made the client reconnect, the pull lose its batch, and JetStream redeliver the same
//! message after `ack_wait`, to fail again: the messages fetched with it stalled behind it. The
//! screen is a proxy on the loopback interface that async-nats connects to instead of the
//! server. It reads each `MSG` and `HMSG` the server sends; one async-nats could not read
//! reaches it with an empty header block (and its subject made valid), and what it held is
//! recorded under its reply subject, JetStream's ack subject for that one delivery, where the
//! source finds it and dead-letters the message naming the field. Payloads pass unchanged, acks
//! go through async-nats as for any message, and everything the client sends passes verbatim.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use inboxed_core::escape_bytes;

/// A byte stream to the server, plain or TLS.
pub(crate) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// How the screen reaches the server (`upstream.rs`: plain TCP, or TLS done by the screen).
pub(crate) trait Dial: Send + Sync + 'static {
    /// A connection to the server and the `INFO` line to hand the client first.
    fn dial(&self) -> impl Future<Output = io::Result<(Box<dyn Io>, Vec<u8>)>> + Send;
}

/// What the screen took out of a message, by its reply subject.
#[derive(Debug, Default)]
pub(crate) struct Wounds {
    by_reply: Mutex<HashMap<Vec<u8>, String>>,
}

impl Wounds {
    /// Takes what the screen recorded for the message with this reply subject, if anything.
    pub(crate) fn take(&self, reply: &[u8]) -> Option<String> {
        let mut by_reply = self.by_reply.lock().unwrap_or_else(PoisonError::into_inner);
        if by_reply.is_empty() {
            return None;
        }
        by_reply.remove(reply)
    }

    fn record(&self, reply: Vec<u8>, detail: String) {
        let mut by_reply = self.by_reply.lock().unwrap_or_else(PoisonError::into_inner);
        by_reply.insert(reply, detail);
    }
}

/// The proxy: its address on the loopback interface, and the task accepting connections there.
#[derive(Debug)]
pub(crate) struct Screen {
    pub(crate) addr: SocketAddr,
    pub(crate) wounds: Arc<Wounds>,
    /// Why the last connection to the server failed (a refused certificate, say): async-nats
    /// sees only the screen's socket close, so its error alone would not say.
    failure: Arc<Mutex<Option<String>>>,
    accepting: JoinHandle<()>,
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Screen {
    /// Starts screening connections to `upstream`.
    pub(crate) async fn start(upstream: impl Dial) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let wounds = Arc::new(Wounds::default());
        let failure = Arc::new(Mutex::new(None));
        let (shared, failed) = (Arc::clone(&wounds), Arc::clone(&failure));
        let upstream = Arc::new(upstream);
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, wounds, failed) = (
                    Arc::clone(&upstream),
                    Arc::clone(&shared),
                    Arc::clone(&failed),
                );
                tokio::spawn(async move {
                    let server = match upstream.dial().await {
                        Ok(server) => server,
                        Err(e) => {
                            warn!(error = %e, "NATS: the screen could not reach the server");
                            *failed.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(e.to_string());
                            return;
                        }
                    };
                    if let Err(e) = pipe(client, server, &wounds).await {
                        debug!(error = %e, "NATS screen connection ended");
                    }
                });
            }
        });
        Ok(Self {
            addr,
            wounds,
            failure,
            accepting,
        })
    }

    /// Why the screen's last connection to the server failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One client connection: what the client sends goes to the server verbatim, what the server
/// sends goes through [`Reader`], after the `INFO` line [`Dial::dial`] read.
async fn pipe(
    client: TcpStream,
    (server, info): (Box<dyn Io>, Vec<u8>),
    wounds: &Wounds,
) -> io::Result<()> {
    client.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    client_tx.write_all(&info).await?;
    let (mut server_rx, mut server_tx) = tokio::io::split(server);
    let outbound = async {
        let copied = tokio::io::copy(&mut client_rx, &mut server_tx).await;
        let _ = server_tx.shutdown().await;
        copied.map(drop)
    };
    let inbound = async {
        let mut reader = Reader::default();
        let mut chunk = vec![0; 64 * 1024];
        loop {
            let n = server_rx.read(&mut chunk).await?;
            if n == 0 {
                client_tx.write_all(&reader.rest()).await?;
                let _ = client_tx.shutdown().await;
                return Ok::<(), io::Error>(());
            }
            let out = reader.feed(&chunk[..n], wounds);
            client_tx.write_all(&out).await?;
        }
    };
    tokio::select! {
        done = outbound => done,
        done = inbound => done,
    }
}

/// The server's byte stream, cut into protocol operations.
#[derive(Debug, Default)]
struct Reader {
    buf: Vec<u8>,
}

impl Reader {
    /// Takes `bytes` from the server and returns what goes to the client: every complete
    /// operation, screened.
    fn feed(&mut self, bytes: &[u8], wounds: &Wounds) -> Vec<u8> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::with_capacity(self.buf.len());
        let mut at = 0;
        while let Some(used) = screen_op(&self.buf[at..], &mut out, wounds) {
            at += used;
        }
        self.buf.drain(..at);
        out
    }

    /// What is left at the end of the stream, as it came.
    fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// Runs `bytes` through a reader in reads of `chunk` bytes, then ends the stream: what
/// async-nats would read, and how many messages the screen changed.
#[cfg(any(test, fuzzing))]
pub(crate) fn screen_all(bytes: &[u8], chunk: usize) -> (Vec<u8>, usize) {
    let (wounds, mut reader, mut out) = (Wounds::default(), Reader::default(), Vec::new());
    for piece in bytes.chunks(chunk.max(1)) {
        out.extend(reader.feed(piece, &wounds));
    }
    // The stream ends: what is left goes as it came, as the proxy passes it.
    out.extend(reader.rest());
    let changed = wounds.by_reply.lock().map_or(0, |w| w.len());
    (out, changed)
}

/// Screens the operation at the start of `buf` into `out`; the bytes it took, or `None` when
/// it is not complete yet.
fn screen_op(buf: &[u8], out: &mut Vec<u8>, wounds: &Wounds) -> Option<usize> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[..end];
    let with_headers = line.starts_with(b"HMSG ");
    if !with_headers && !line.starts_with(b"MSG ") {
        out.extend_from_slice(&buf[..end + 2]);
        return Some(end + 2);
    }
    let args: Vec<&[u8]> = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|a| !a.is_empty())
        .skip(1)
        .collect();
    let number = |a: &[u8]| std::str::from_utf8(a).ok()?.parse::<usize>().ok();
    let (subject, sid, reply, header_len, total) = match (with_headers, args.as_slice()) {
        (true, [s, sid, r, h, t]) => (*s, *sid, Some(*r), number(h)?, number(t)?),
        (true, [s, sid, h, t]) => (*s, *sid, None, number(h)?, number(t)?),
        (false, [s, sid, r, t]) => (*s, *sid, Some(*r), 0, number(t)?),
        (false, [s, sid, t]) => (*s, *sid, None, 0, number(t)?),
        // Not a shape the screen knows: the client decides.
        _ => {
            out.extend_from_slice(&buf[..end + 2]);
            return Some(end + 2);
        }
    };
    let body_at = end + 2;
    let used = body_at.checked_add(total)?.checked_add(2)?;
    if buf.len() < used || header_len > total {
        return if header_len > total {
            out.extend_from_slice(&buf[..end + 2]);
            Some(end + 2)
        } else {
            None
        };
    }
    let headers = &buf[body_at..body_at + header_len];
    let payload = &buf[body_at + header_len..body_at + total];
    let mut flaws = Vec::new();
    if std::str::from_utf8(line).is_err() {
        flaws.push(format!(
            "subject: not valid UTF-8 (bytes {})",
            escape_bytes(subject)
        ));
    }
    if with_headers {
        read_headers(headers, &mut flaws);
    }
    match reply {
        Some(reply) if !flaws.is_empty() && std::str::from_utf8(reply).is_ok() => {
            let detail = format!(
                "the NATS client cannot read {}; subject {}; headers as sent: {}",
                flaws.join("; "),
                escape_bytes(subject),
                escape_bytes(headers),
            );
            wounds.record(reply.to_vec(), detail);
            let subject = String::from_utf8_lossy(subject);
            let empty = b"NATS/1.0\r\n\r\n";
            out.extend_from_slice(b"HMSG ");
            out.extend_from_slice(subject.as_bytes());
            out.push(b' ');
            out.extend_from_slice(sid);
            out.push(b' ');
            out.extend_from_slice(reply);
            let sizes = format!(" {} {}\r\n", empty.len(), empty.len() + payload.len());
            out.extend_from_slice(sizes.as_bytes());
            out.extend_from_slice(empty);
            out.extend_from_slice(payload);
            out.extend_from_slice(b"\r\n");
        }
        _ => out.extend_from_slice(&buf[..used]),
    }
    Some(used)
}

/// Checks a header block the way async-nats reads it, noting each flaw.
fn read_headers(block: &[u8], flaws: &mut Vec<String>) {
    let Ok(text) = std::str::from_utf8(block) else {
        // Name what is not UTF-8, line by line, before the client would fail on all of it.
        for line in block.split(|&b| b == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if std::str::from_utf8(line).is_ok() {
                continue;
            }
            match line.iter().position(|&b| b == b':') {
                Some(colon) if std::str::from_utf8(&line[..colon]).is_ok() => flaws.push(format!(
                    "header {}: not valid UTF-8 (bytes {})",
                    String::from_utf8_lossy(&line[..colon]),
                    escape_bytes(line[colon + 1..].trim_ascii())
                )),
                _ => flaws.push(format!(
                    "a header name: not valid UTF-8 (bytes {})",
                    escape_bytes(line)
                )),
            }
        }
        return;
    };
    let mut lines = text.lines();
    if !lines.next().is_some_and(|v| v.starts_with("NATS/1.0")) {
        flaws.push("the header block: no NATS/1.0 version line".to_owned());
        return;
    }
    for line in lines {
        if line.is_empty() || line.starts_with(char::is_whitespace) {
            continue;
        }
        match line.split_once(':') {
            None => flaws.push(format!(
                "a header line without a colon: {}",
                escape_bytes(line.as_bytes())
            )),
            Some((name, _)) if name.contains(|c: char| !c.is_ascii_graphic()) => {
                flaws.push(format!(
                    "a header name: not visible ASCII (bytes {})",
                    escape_bytes(name.as_bytes())
                ))
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hmsg(subject: &[u8], reply: &[u8], headers: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut out = b"HMSG ".to_vec();
        out.extend_from_slice(subject);
        out.extend_from_slice(b" 1 ");
        out.extend_from_slice(reply);
        out.extend_from_slice(
            format!(" {} {}\r\n", headers.len(), headers.len() + payload.len()).as_bytes(),
        );
        out.extend_from_slice(headers);
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
        out
    }

    #[test]
    fn readable_operations_pass_byte_for_byte_whatever_the_reads() {
        let stream = [
            &b"INFO {}\r\nPING\r\n"[..],
            &hmsg(
                b"a.b",
                b"$JS.ACK.1",
                b"NATS/1.0\r\nNats-Msg-Id: m-1\r\n\r\n",
                b"{\r\n}",
            ),
            b"MSG a.b 1 5\r\nhe\r\no\r\n",
            &hmsg(
                b"a.b",
                b"_INBOX.x",
                b"NATS/1.0 100 Idle Heartbeat\r\n\r\n",
                b"",
            ),
        ]
        .concat();
        for chunk in [1, 3, 10, 1000] {
            let (out, changed) = screen_all(&stream, chunk);
            assert_eq!(out, stream, "chunk {chunk}");
            assert_eq!(changed, 0);
        }
    }

    #[test]
    fn an_unreadable_message_reaches_the_client_readable_and_is_recorded() {
        let headers = b"NATS/1.0\r\nNats-Msg-Id: m-\xff\r\nX-\xfe: v\r\nbad line\r\n\r\n";
        let (wounds, mut reader) = (Wounds::default(), Reader::default());
        let out = reader.feed(&hmsg(b"a.\xff", b"$JS.ACK.7", headers, b"body"), &wounds);
        assert_eq!(
            out,
            b"HMSG a.\xef\xbf\xbd 1 $JS.ACK.7 12 16\r\nNATS/1.0\r\n\r\nbody\r\n"
        );
        let detail = wounds.take(b"$JS.ACK.7").expect("recorded under its reply");
        for flaw in [
            "subject: not valid UTF-8 (bytes a.\\xff)",
            "header Nats-Msg-Id: not valid UTF-8 (bytes m-\\xff)",
            "a header name: not valid UTF-8 (bytes X-\\xfe: v)",
        ] {
            assert!(detail.contains(flaw), "{detail}");
        }
        let no_colon = hmsg(b"a", b"r", b"NATS/1.0\r\nbad line\r\n\r\n", b"");
        reader.feed(&no_colon, &wounds);
        assert!(
            wounds
                .take(b"r")
                .unwrap()
                .contains("a header line without a colon: bad line")
        );
    }
}
