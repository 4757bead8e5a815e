//! How lapin gets a socket read through the [`screen`](crate::screen).
//!
//! lapin takes its transport from the runtime's reactor: the stream type is the reactor's, and
//! the only way to put something between the broker's bytes and lapin's parser is a reactor
//! whose stream is the screen. This one is tokio's reactor in all but that. TLS, when the URI
//! says `amqps`, is done below the screen (by lapin's own TLS code), so the screen reads
//! plaintext frames.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_rs::traits::Reactor;
use async_rs::util::RuntimeParts;
use async_rs::{Runtime, Tokio};
use futures_core::Stream;
use futures_io::{AsyncRead, AsyncWrite};
use lapin::tcp::{AMQPUriTcpExt, AsyncTcpStream, OwnedTLSConfig};
use lapin::uri::AMQPUri;
use lapin::{Connection, ConnectionProperties};

use crate::screen::{Screened, Wounds};

/// The socket lapin reads: TLS (or not) as the URI says, then the screen.
type Socket = Screened<AsyncTcpStream<<Tokio as Reactor>::TcpStream>>;

/// tokio's reactor, whose TCP streams are screened.
#[derive(Debug, Clone)]
pub(crate) struct Screening {
    tokio: Tokio,
}

impl Reactor for Screening {
    type TcpStream = Socket;
    type Sleep = <Tokio as Reactor>::Sleep;

    fn register<H: Read + Write + AsFd + AsRawFd + Send + 'static>(
        &self,
        socket: H,
    ) -> io::Result<impl AsyncRead + AsyncWrite + Send + Unpin + 'static> {
        self.tokio.register(socket)
    }

    fn sleep(&self, dur: Duration) -> Self::Sleep {
        self.tokio.sleep(dur)
    }

    fn interval(&self, dur: Duration) -> impl Stream<Item = Instant> + Send + 'static {
        self.tokio.interval(dur)
    }

    /// Not the path [`connect`] takes (it connects through lapin's TLS code, then screens), but
    /// a plain connection made here is screened too.
    fn tcp_connect_addr(
        &self,
        addr: SocketAddr,
    ) -> impl Future<Output = io::Result<Self::TcpStream>> + Send + 'static {
        let connecting = self.tokio.tcp_connect_addr(addr);
        async move {
            let plain = AsyncTcpStream::Plain(connecting.await?);
            Ok(Screened::new(plain, Arc::default()))
        }
    }
}

type Kit = RuntimeParts<Tokio, Screening>;

/// How long one node of a cluster's URI may take to connect before the next is tried: a node
/// cut off from the network answers nothing, and the caller's own bound covers all of them.
const PER_NODE: Duration = Duration::from_secs(5);

/// Opens a connection to `uri` whose deliveries lapin reads through the screen; what the screen
/// took out of a delivery is in the returned [`Wounds`], by channel and delivery tag. A URI
/// naming several nodes ([`crate::nodes`]) connects to the first that answers, each tried for
/// [`PER_NODE`] at most; the last node's error when none does.
pub(crate) async fn connect(
    uri: &str,
    tls: OwnedTLSConfig,
) -> lapin::Result<(Connection, Arc<Wounds>)> {
    let mut nodes = crate::nodes::split(uri);
    let last = nodes.pop().unwrap_or_default();
    for node in &nodes {
        match tokio::time::timeout(PER_NODE, connect_node(node, tls.clone())).await {
            Ok(Ok(connected)) => return Ok(connected),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "a RabbitMQ node did not answer; trying the next")
            }
            Err(_) => {
                tracing::warn!(after = ?PER_NODE, "a RabbitMQ node did not answer in time; trying the next")
            }
        }
    }
    connect_node(&last, tls).await
}

async fn connect_node(uri: &str, tls: OwnedTLSConfig) -> lapin::Result<(Connection, Arc<Wounds>)> {
    let uri: AMQPUri = uri
        .parse()
        .map_err(|e: String| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let tokio = Tokio::current();
    let runtime = Runtime::new(RuntimeParts::new(
        tokio.clone(),
        Screening {
            tokio: tokio.clone(),
        },
    ));
    let wounds = Arc::new(Wounds::default());
    let shared = Arc::clone(&wounds);
    let dial = async move |uri: AMQPUri, _: Runtime<Kit>| {
        let tokio = Runtime::new(Tokio::current());
        let socket = uri.connect_with_config_async(tls.as_ref(), &tokio).await?;
        Ok(AsyncTcpStream::Plain(Screened::new(
            socket,
            Arc::clone(&shared),
        )))
    };
    let conn = Connection::connector(uri, runtime, dial, ConnectionProperties::default()).await?;
    Ok((conn, wounds))
}
