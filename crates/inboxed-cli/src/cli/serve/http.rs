//! A minimal HTTP/1.1 responder for `/metrics` and `/health`: GET only, one request per
//! connection, small bounded requests. Enough for Prometheus and a load balancer's probe, and
//! no web framework in the binary for two routes.

use std::future::Future;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

/// Connections served at once; more are closed at accept.
const MAX_CONNECTIONS: usize = 32;
/// The whole exchange, request read to response written.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// A response: status code, content type, body.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &'static str, body: String) -> Self {
        Self {
            status,
            content_type,
            body,
        }
    }
}

/// Serves `route(path)` for every GET on `listener` until the task is dropped.
pub(crate) async fn serve<F, Fut>(listener: TcpListener, route: F)
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + Send,
{
    // Bounded: a scraper and a few probes need a handful of connections, and a client that
    // trickles its request must not hold one for long.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = std::sync::Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let route = route.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(REQUEST_DEADLINE, answer(stream, route)).await {
                Ok(Err(e)) => debug!(error = %e, "HTTP request not answered"),
                Err(_) => debug!("HTTP request took too long; connection closed"),
                Ok(Ok(())) => {}
            }
            drop(slot);
        });
    }
}

async fn answer<F, Fut>(mut stream: TcpStream, route: F) -> std::io::Result<()>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Response>,
{
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // The request line and headers only: no route takes a body.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => request.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(e),
        }
    }
    let line = String::from_utf8_lossy(&request);
    let mut parts = line.split_whitespace();
    let response = match (parts.next(), parts.next()) {
        (Some("GET"), Some(path)) => {
            let path = path.split('?').next().unwrap_or(path).to_owned();
            route(path).await
        }
        _ => Response::new(405, "text/plain", "GET only\n".to_owned()),
    };
    let reason = match response.status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(response.body.as_bytes()).await?;
    stream.shutdown().await
}
