//! The ambiguous commit, made on demand: a TCP proxy in front of PostgreSQL that lets a
//! transaction's `COMMIT` reach the server and then cuts the connection before the server's
//! answer reaches the client; or cuts it before the `COMMIT` reaches the server, which then
//! rolls back. The client sees the same broken connection either way, as it does when a
//! network drops the reply, a host's link goes down mid-COMMIT or a load balancer resets the
//! flow: a consumer must ack in neither case, and must settle the redelivery of the first as
//! the duplicate it is.
//!
//! Which transactions are cut is said in the transaction itself: the simple query
//! [`CUT_AFTER`] or [`CUT_BEFORE`], run by a handler under test on its connection, marks the
//! connection's next `COMMIT`. The proxy reads the client's side of the
//! protocol (the startup packets, then typed messages: a type byte and a length) to find the
//! markers and the `COMMIT`, as a simple query (`Q`) or a statement parsed for the extended
//! protocol (`P`); the server's side is copied as bytes, except that nothing more is copied
//! once a cut has begun.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Run in a transaction (as a simple query: `sqlx::raw_sql`), marks its commit to go through
/// and its answer to be lost.
pub const CUT_AFTER: &str = "SELECT 'inboxed-test: cut the commit after the server has it'";

/// Run in a transaction, marks its commit to be lost before the server has it.
pub const CUT_BEFORE: &str = "SELECT 'inboxed-test: cut the commit before the server has it'";

/// The proxy; dropping it stops accepting (connections already open run on).
#[derive(Debug)]
pub struct CommitCut {
    port: u16,
    state: Arc<State>,
    accepting: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct State {
    /// Commits cut so far: forwarded to the server, their answers dropped.
    cut: AtomicU64,
    /// Commits dropped so far: never forwarded, so rolled back.
    lost: AtomicU64,
    /// Commits seen so far, cut or not.
    seen: AtomicU64,
}

/// What to do with a connection's next commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    After,
    Before,
}

impl CommitCut {
    /// A proxy on a free loopback port to the server at `upstream` (`127.0.0.1:5432`).
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port for the proxy");
        let port = listener.local_addr().expect("its address").port();
        let state = Arc::new(State::default());
        let upstream = upstream.to_owned();
        let accepting = {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let state = Arc::clone(&state);
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(&upstream).await {
                            relay(client, server, state).await;
                        }
                    });
                }
            })
        };
        Self {
            port,
            state,
            accepting,
        }
    }

    /// The proxy's port: a client's URL names `127.0.0.1:<port>` in place of the server.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Commits cut so far after the server had them.
    #[must_use]
    pub fn cut(&self) -> u64 {
        self.state.cut.load(Ordering::SeqCst)
    }

    /// Commits dropped so far before the server had them.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.state.lost.load(Ordering::SeqCst)
    }

    /// Commits seen so far, cut, dropped or passed on.
    #[must_use]
    pub fn seen(&self) -> u64 {
        self.state.seen.load(Ordering::SeqCst)
    }
}

impl Drop for CommitCut {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies one connection both ways until either side closes, or a cut closes both.
async fn relay(client: TcpStream, server: TcpStream, state: Arc<State>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let cutting = Arc::new(AtomicBool::new(false));
    let answers = {
        let cutting = Arc::clone(&cutting);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match server_in.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                // Checked after the read: the answer to a commit being cut arrives after the
                // flag was set, since the commit is forwarded only then.
                if cutting.load(Ordering::SeqCst) || client_out.write_all(&buf[..n]).await.is_err()
                {
                    break;
                }
            }
            let _ = client_out.shutdown().await;
        })
    };
    let _ = requests(&mut client_in, &mut server_out, &state, &cutting).await;
    if cutting.load(Ordering::SeqCst) {
        // Give the server the moment it takes to commit, then drop both sides.
        tokio::time::sleep(Duration::from_millis(200)).await;
        answers.abort();
    } else {
        let _ = server_out.shutdown().await;
        let _ = answers.await;
    }
}

/// The protocol's code of an SSLRequest and of a GSSENCRequest: a startup packet the server
/// answers with one byte, after which the real startup packet follows.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

/// Forwards the client's messages; returns when it closes, or after a commit it cut.
async fn requests(
    client: &mut tokio::net::tcp::OwnedReadHalf,
    server: &mut tokio::net::tcp::OwnedWriteHalf,
    state: &State,
    cutting: &AtomicBool,
) -> std::io::Result<()> {
    // Startup packets: a length (itself included) and a body, no type byte.
    loop {
        let len = client.read_u32().await?;
        let mut body = vec![0u8; (len as usize).saturating_sub(4)];
        client.read_exact(&mut body).await?;
        server.write_u32(len).await?;
        server.write_all(&body).await?;
        let code = body
            .get(..4)
            .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        if code != SSL_REQUEST && code != GSSENC_REQUEST {
            break;
        }
    }
    // Typed messages.
    let mut next: Option<Cut> = None;
    loop {
        let kind = client.read_u8().await?;
        let len = client.read_u32().await?;
        let mut body = vec![0u8; (len as usize).saturating_sub(4)];
        client.read_exact(&mut body).await?;
        if kind == b'Q' {
            let text = String::from_utf8_lossy(&body);
            if text.contains(CUT_AFTER) {
                next = Some(Cut::After);
            } else if text.contains(CUT_BEFORE) {
                next = Some(Cut::Before);
            }
        }
        let commit = is_commit(kind, &body);
        if commit {
            state.seen.fetch_add(1, Ordering::SeqCst);
            match next.take() {
                Some(Cut::Before) => {
                    state.lost.fetch_add(1, Ordering::SeqCst);
                    // Closed without the commit: the server rolls the transaction back.
                    return Ok(());
                }
                Some(Cut::After) => cutting.store(true, Ordering::SeqCst),
                None => {}
            }
        }
        server.write_u8(kind).await?;
        server.write_u32(len).await?;
        server.write_all(&body).await?;
        server.flush().await?;
        if commit && cutting.load(Ordering::SeqCst) {
            state.cut.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
    }
}

/// Whether a client message is a `COMMIT`: a simple query, or the statement of a Parse (its
/// body: the statement's name, NUL, the text, NUL, …).
fn is_commit(kind: u8, body: &[u8]) -> bool {
    let text = match kind {
        b'Q' => body,
        b'P' => match body.iter().position(|&b| b == 0) {
            Some(end) => &body[end + 1..],
            None => return false,
        },
        _ => return false,
    };
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let text = String::from_utf8_lossy(text);
    let word = text.trim().trim_end_matches(';').trim();
    word.eq_ignore_ascii_case("COMMIT") || word.eq_ignore_ascii_case("END")
}

#[cfg(test)]
mod tests {
    use super::is_commit;

    #[test]
    fn commits_are_told_from_other_statements() {
        assert!(is_commit(b'Q', b"COMMIT\0"));
        assert!(is_commit(b'Q', b" commit; \0"));
        assert!(is_commit(b'P', b"\0COMMIT\0\0\0"));
        assert!(is_commit(b'P', b"s1\0COMMIT\0\0\0"));
        assert!(!is_commit(b'Q', b"SELECT 'COMMIT'\0"));
        assert!(!is_commit(b'Q', b"ROLLBACK\0"));
        assert!(!is_commit(b'B', b"COMMIT\0"));
    }
}
