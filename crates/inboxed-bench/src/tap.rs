//! A tap on the wire: a TCP proxy in front of PostgreSQL that counts what the server answers,
//! so that a benchmark can say how many statements and round trips a job took without
//! `pg_stat_statements` (which the server must preload). The server's side is read as typed
//! messages (a type byte and a length): each `CommandComplete` is a statement that ran, each
//! `ReadyForQuery` after the first of a connection (the end of its startup) a round trip, the
//! client having waited for it (a simple query, or an extended-protocol `Sync`).
//!
//! The proxy runs in the benchmark's process and costs it CPU, so a counted drain is not a
//! timed one. Clients must connect with `sslmode=disable`: an encrypted stream cannot be read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy; dropping it stops accepting (connections already open run on).
pub(crate) struct Tap {
    port: u16,
    counts: Arc<Counts>,
    accepting: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Counts {
    statements: AtomicU64,
    round_trips: AtomicU64,
    /// Statements by their command (the first word of the tag: `UPDATE`, `COMMIT`, …).
    commands: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Statements and round trips so far, over every connection through the tap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    pub(crate) statements: u64,
    pub(crate) round_trips: u64,
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
    pub(crate) async fn start(url: &str) -> anyhow::Result<Self> {
        let upstream = {
            let parsed = url::Url::parse(url)?;
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
                            relay(client, server, &counts).await;
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
    pub(crate) fn url(&self, url: &str) -> anyhow::Result<String> {
        let mut through = url::Url::parse(url)?;
        through
            .set_host(Some("127.0.0.1"))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        through
            .set_port(Some(self.port))
            .map_err(|()| anyhow::anyhow!("no port in {url}"))?;
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

    pub(crate) fn counted(&self) -> Counted {
        Counted {
            statements: self.counts.statements.load(Ordering::Relaxed),
            round_trips: self.counts.round_trips.load(Ordering::Relaxed),
        }
    }

    /// Statements so far by command, and clears them.
    pub(crate) fn take_commands(&self) -> std::collections::BTreeMap<String, u64> {
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

/// Copies one connection both ways until either side closes, reading the server's side.
async fn relay(client: TcpStream, server: TcpStream, counts: &Counts) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_in, &mut server_out).await;
        let _ = server_out.shutdown().await;
    });
    let mut reader = Reader::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match server_in.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        reader.feed(&buf[..n], counts);
        if client_out.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = client_out.shutdown().await;
    requests.abort();
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
    fn feed(&mut self, mut chunk: &[u8], counts: &Counts) {
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
                    counts.round_trips.fetch_add(1, Ordering::Relaxed);
                }
                b'Z' => self.started = true,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, Reader};
    use std::sync::atomic::Ordering;

    /// One message: its type, its length, its body.
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// Messages split at every byte are read as when whole: the startup's `ReadyForQuery` is
    /// not a round trip, a simple query of two statements is two statements and one trip, and
    /// each statement is counted under its command.
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
            for chunk in stream.chunks(size) {
                reader.feed(chunk, &counts);
            }
            let counted = (
                counts.statements.load(Ordering::Relaxed),
                counts.round_trips.load(Ordering::Relaxed),
            );
            assert_eq!(counted, (3, 2), "statements, round trips; chunks of {size}");
            let commands = counts.commands.lock().unwrap().clone();
            let expected = [("BEGIN".to_owned(), 1), ("SELECT".to_owned(), 2)];
            assert_eq!(commands, expected.into(), "chunks of {size}");
        }
    }
}
