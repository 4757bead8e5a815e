//! A tap on the wire: a TCP proxy in front of PostgreSQL that counts what the server answers,
//! so that a benchmark or a test can say how many statements and round trips something took
//! without `pg_stat_statements` (which the server must preload). The server's side is read as
//! typed messages (a type byte and a length): each `CommandComplete` is a statement that ran.
//! A round trip is a wait of the client's: a request (a simple query, or an extended-protocol
//! `Sync`) sent when every request before it has been answered with a `ReadyForQuery`. A
//! client that pipelines (sends a request before the answer to the one before) waits once for
//! the lot, and is counted once.
//!
//! The proxy runs in the process that reads its counts and costs it CPU, so a counted drain is
//! not a timed one. Clients must connect with `sslmode=disable`: an encrypted stream cannot be
//! read.
//!
//! [`Tap::delayed`] also stands in for a network's latency (this kernel has no netem): each
//! chunk goes on half a round trip after it arrived, in each direction. Chunks in flight
//! overlap, so the link's latency does not bound its rate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};

/// The proxy; dropping it stops accepting (connections already open run on).
#[derive(Debug)]
pub struct Tap {
    port: u16,
    counts: Arc<Counts>,
    accepting: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Counts {
    statements: AtomicU64,
    round_trips: AtomicU64,
    /// Statements by their command (the first word of the tag: `UPDATE`, `COMMIT`, …).
    commands: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Statements and round trips so far, over every connection through the tap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Statements that ran (`CommandComplete`s).
    pub statements: u64,
    /// Waits of the clients for an answer.
    pub round_trips: u64,
}

impl std::ops::Sub for Counted {
    type Output = Self;

    fn sub(self, before: Self) -> Self {
        Self {
            statements: self.statements - before.statements,
            round_trips: self.round_trips - before.round_trips,
        }
    }
}

impl Tap {
    /// A tap on a free loopback port to the server of `url`.
    pub async fn start(url: &str) -> std::io::Result<Self> {
        Self::delayed(url, Duration::ZERO).await
    }

    /// A tap that holds each chunk `round_trip / 2` in each direction.
    pub async fn delayed(url: &str, round_trip: Duration) -> std::io::Result<Self> {
        let half = round_trip / 2;
        let upstream = {
            let parsed = url::Url::parse(url).map_err(std::io::Error::other)?;
            format!(
                "{}:{}",
                parsed.host_str().unwrap_or("localhost"),
                parsed.port().unwrap_or(5432)
            )
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let counts = Arc::new(Counts::default());
        let accepting = {
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let (counts, upstream) = (Arc::clone(&counts), upstream.clone());
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(&upstream).await {
                            let (client, server) = (client.into_std(), server.into_std());
                            if let (Ok(client), Ok(server)) = (client, server) {
                                let _ = relay(client, server, counts, half);
                            }
                        }
                    });
                }
            })
        };
        Ok(Self {
            port,
            counts,
            accepting,
        })
    }

    /// `url` with its server replaced by this tap, unencrypted.
    pub fn url(&self, url: &str) -> std::io::Result<String> {
        let mut through = url::Url::parse(url).map_err(std::io::Error::other)?;
        through
            .set_host(Some("127.0.0.1"))
            .map_err(std::io::Error::other)?;
        through
            .set_port(Some(self.port))
            .map_err(|()| std::io::Error::other(format!("no port in {url}")))?;
        let rest: Vec<(String, String)> = through
            .query_pairs()
            .filter(|(k, _)| k != "sslmode")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        through
            .query_pairs_mut()
            .clear()
            .extend_pairs(rest)
            .append_pair("sslmode", "disable");
        Ok(through.into())
    }

    /// What the server answered so far; subtract an earlier count for what came between.
    pub fn counted(&self) -> Counted {
        Counted {
            statements: self.counts.statements.load(Ordering::Relaxed),
            round_trips: self.counts.round_trips.load(Ordering::Relaxed),
        }
    }

    /// Statements so far by command, and clears them.
    pub fn take_commands(&self) -> std::collections::BTreeMap<String, u64> {
        std::mem::take(
            &mut *self
                .counts
                .commands
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies one connection both ways until either side closes, reading the server's side, each
/// chunk `delay` after it arrived. On threads of its own, blocking: a thread's sleep is precise
/// to tens of microseconds, where the runtime's timer rounds up to the next millisecond (a
/// round trip of 1 ms took 2.8).
fn relay(
    client: std::net::TcpStream,
    server: std::net::TcpStream,
    counts: Arc<Counts>,
    delay: Duration,
) -> std::io::Result<()> {
    for stream in [&client, &server] {
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
    }
    let (client_in, server_out) = (client.try_clone()?, server.try_clone()?);
    let owed = Arc::new(AtomicU64::new(0));
    let mut requests = Requests::default();
    let (waits, asked) = (Arc::clone(&counts), Arc::clone(&owed));
    std::thread::spawn(move || {
        forward(client_in, server_out, delay, |c| {
            requests.feed(c, &asked, &waits);
        });
    });
    let mut reader = Reader::default();
    std::thread::spawn(move || {
        forward(server, client, delay, |c| reader.feed(c, &counts, &owed));
    });
    Ok(())
}

/// The client's side of one connection: its requests, read across chunks. A chunk holding a
/// request sent while none was owed an answer is a round trip (the client had been waiting,
/// or idle); requests sent while answers are owed ride in the same one. The server's side
/// ([`Reader`]) pays the debt back, a `ReadyForQuery` an answer, as each arrives here: before
/// the client can have seen it, so the two sides never race.
#[derive(Default)]
struct Requests {
    /// A message's type byte and length, as far as they have arrived.
    header: [u8; 5],
    have: usize,
    /// Bytes of the current message's body still to pass over.
    skip: usize,
    /// Whether the startup message (the one without a type byte) has passed.
    started: bool,
}

impl Requests {
    fn feed(&mut self, mut chunk: &[u8], owed: &AtomicU64, counts: &Counts) {
        let mut sent = 0;
        while !chunk.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(chunk.len());
                self.skip -= n;
                chunk = &chunk[n..];
                continue;
            }
            // The startup message has no type byte: its length comes first.
            let width = if self.started { 5 } else { 4 };
            let n = (width - self.have).min(chunk.len());
            self.header[self.have..self.have + n].copy_from_slice(&chunk[..n]);
            self.have += n;
            chunk = &chunk[n..];
            if self.have < width {
                continue;
            }
            self.have = 0;
            let at = width - 4;
            let len = u32::from_be_bytes([
                self.header[at],
                self.header[at + 1],
                self.header[at + 2],
                self.header[at + 3],
            ]);
            self.skip = (len as usize).saturating_sub(4);
            if !self.started {
                self.started = true;
            } else if matches!(self.header[0], b'Q' | b'S') {
                sent += 1;
            }
        }
        if sent > 0 && owed.fetch_add(sent, Ordering::SeqCst) == 0 {
            counts.round_trips.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Copies `from` to `to` until either closes, each chunk shown to `seen` as it arrives and
/// written `delay` after (in order: a chunk due later never overtakes one due earlier), by a
/// writing thread, so that chunks in flight overlap.
fn forward(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    delay: Duration,
    mut seen: impl FnMut(&[u8]),
) {
    let (due, arriving) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let writing = std::thread::spawn(move || {
        for (at, chunk) in arriving {
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        seen(&buf[..n]);
        if due
            .send((Instant::now() + delay, buf[..n].to_vec()))
            .is_err()
        {
            break;
        }
    }
    drop(due);
    let _ = writing.join();
}

/// The server's side of one connection, read across chunks as they arrive.
#[derive(Default)]
struct Reader {
    /// A message's type byte and length, as far as they have arrived.
    header: [u8; 5],
    have: usize,
    /// Bytes of the current message's body still to pass over.
    skip: usize,
    /// Whether the connection's startup has ended (its first `ReadyForQuery`).
    started: bool,
    /// The tag of a `CommandComplete` as far as it has arrived.
    tag: Option<Vec<u8>>,
}

impl Reader {
    fn feed(&mut self, mut chunk: &[u8], counts: &Counts, owed: &AtomicU64) {
        while !chunk.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(chunk.len());
                if let Some(tag) = &mut self.tag {
                    tag.extend_from_slice(&chunk[..n]);
                }
                self.skip -= n;
                chunk = &chunk[n..];
                if self.skip == 0
                    && let Some(tag) = self.tag.take()
                {
                    let word = tag
                        .split(|&b| b == b' ' || b == 0)
                        .next()
                        .unwrap_or_default();
                    let word = String::from_utf8_lossy(word).into_owned();
                    let mut commands = counts
                        .commands
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    *commands.entry(word).or_default() += 1;
                }
                continue;
            }
            let n = (5 - self.have).min(chunk.len());
            self.header[self.have..self.have + n].copy_from_slice(&chunk[..n]);
            self.have += n;
            chunk = &chunk[n..];
            if self.have < 5 {
                continue;
            }
            self.have = 0;
            let len = u32::from_be_bytes([
                self.header[1],
                self.header[2],
                self.header[3],
                self.header[4],
            ]);
            self.skip = (len as usize).saturating_sub(4);
            match self.header[0] {
                b'C' => {
                    counts.statements.fetch_add(1, Ordering::Relaxed);
                    self.tag = Some(Vec::new());
                }
                b'Z' if self.started => {
                    let _ = owed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                        Some(n.saturating_sub(1))
                    });
                }
                b'Z' => self.started = true,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, Reader, Requests};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// One message: its type, its length, its body.
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// The server's messages split at every byte are read as when whole: a simple query of
    /// two statements is two statements, each counted under its command, and every
    /// `ReadyForQuery` but the startup's pays back an answer owed.
    #[test]
    fn messages_are_counted_across_any_split() {
        let stream: Vec<u8> = [
            message(b'R', &[0; 4]),
            message(b'S', &[0; 20]),
            message(b'Z', &[0; 1]),
            message(b'T', &[0; 30]),
            message(b'D', &[0; 12]),
            message(b'C', b"SELECT 1\0"),
            message(b'C', b"BEGIN\0"),
            message(b'Z', &[0; 1]),
            message(b'1', &[0; 0]),
            message(b'2', &[0; 0]),
            message(b'C', b"SELECT 7\0"),
            message(b'Z', &[0; 1]),
        ]
        .concat();
        for size in [1, 2, 3, 7, stream.len()] {
            let (mut reader, counts) = (Reader::default(), Counts::default());
            let owed = AtomicU64::new(3);
            for chunk in stream.chunks(size) {
                reader.feed(chunk, &counts, &owed);
            }
            let counted = (
                counts.statements.load(Ordering::Relaxed),
                owed.load(Ordering::SeqCst),
            );
            assert_eq!(
                counted,
                (3, 1),
                "statements, answers still owed; chunks of {size}"
            );
            let commands = counts.commands.lock().unwrap().clone();
            let expected = [("BEGIN".to_owned(), 1), ("SELECT".to_owned(), 2)];
            assert_eq!(commands, expected.into(), "chunks of {size}");
        }
    }

    /// A client's requests, split at every byte: a request sent while none is owed is a round
    /// trip; two sent together (a pipeline: `BEGIN` as a simple query, then a statement's
    /// `Parse`, `Bind`, `Execute`, `Sync`) are one; and the next after their answers another.
    #[test]
    fn pipelined_requests_are_one_round_trip() {
        let mut startup = 12_u32.to_be_bytes().to_vec();
        startup.extend_from_slice(&[0, 3, 0, 0, 0, 0, 0, 0]);
        let pipelined: Vec<u8> = [
            startup,
            message(b'Q', b"BEGIN\0"),
            message(b'P', &[0; 10]),
            message(b'B', &[0; 10]),
            message(b'E', &[0; 5]),
            message(b'S', &[]),
        ]
        .concat();
        let next = message(b'Q', b"COMMIT\0");
        for size in [1, 2, 3, 7, pipelined.len()] {
            let (mut requests, counts, owed) =
                (Requests::default(), Counts::default(), AtomicU64::new(0));
            // The whole pipeline is sent before any answer: one wait, two answers owed.
            for chunk in pipelined.chunks(size) {
                requests.feed(chunk, &owed, &counts);
            }
            assert_eq!(
                counts.round_trips.load(Ordering::Relaxed),
                1,
                "chunks of {size}"
            );
            assert_eq!(owed.load(Ordering::SeqCst), 2, "chunks of {size}");
            // Both answered: the next request is a round trip of its own.
            owed.store(0, Ordering::SeqCst);
            requests.feed(&next, &owed, &counts);
            assert_eq!(
                counts.round_trips.load(Ordering::Relaxed),
                2,
                "chunks of {size}"
            );
        }
    }

    /// Through a tap of 20 ms, an echo takes at least a round trip, and a stream of 80 chunks
    /// comes back whole and in order, in about one round trip (the chunks in flight overlap):
    /// well under the 800 ms that chunks held one after another would take each way. The
    /// bound is half of that, not a few round trips: a loaded CI machine took 122 ms.
    #[tokio::test]
    async fn a_delayed_tap_holds_each_direction_half_a_round_trip() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (conn, _) = echo.accept().await.unwrap();
            let (mut r, mut w) = conn.into_split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
        });
        let rtt = std::time::Duration::from_millis(20);
        let url = format!("postgres://127.0.0.1:{port}/db");
        let tap = super::Tap::delayed(&url, rtt).await.unwrap();
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", tap.port))
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let sent: Vec<u8> = (0..20_000_u32).flat_map(u32::to_be_bytes).collect();
        for chunk in sent.chunks(1_000) {
            conn.write_all(chunk).await.unwrap();
        }
        let mut back = vec![0; sent.len()];
        conn.read_exact(&mut back).await.unwrap();
        let took = started.elapsed();
        assert_eq!(back, sent, "the bytes came back changed or out of order");
        assert!(
            took >= rtt,
            "back after {took:?}, under a round trip of {rtt:?}"
        );
        let chunks = u32::try_from(sent.len() / 1_000).unwrap();
        assert!(
            took < rtt / 2 * chunks / 2,
            "{took:?}: the chunks waited for each other"
        );
    }
}
