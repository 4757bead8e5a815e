//! NATS for restart tests: a server of a test's own (file storage, a free port, a temporary
//! directory) that can be killed and started again on the same storage, and a stream filled
//! with the restart audit's keyed messages.

use std::process::Stdio;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use tokio::process::{Child, Command};

use crate::handler::credit;
use crate::restart::{MESSAGES, amount};

/// A `nats-server -js` of the test's own; killed when dropped.
#[derive(Debug)]
pub struct NatsServer {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server on a free port with its storage in a temporary directory.
    ///
    /// # Panics
    /// When `nats-server` is missing or does not listen within 5 s.
    pub async fn start() -> Self {
        let port = crate::free_port();
        let mut server = Self {
            dir: tempfile::tempdir().expect("temporary directory"),
            port,
            child: None,
        };
        server.boot().await;
        server
    }

    /// The server's URL.
    #[must_use]
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, and waits for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
    }

    /// Starts the server again on the same port and storage.
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub async fn boot(&mut self) {
        let child = Command::new("nats-server")
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("nats-server must be installed: scripts/test.sh installs it");
        self.child = Some(child);
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("nats-server did not start on port {}", self.port);
    }
}

/// Creates stream `name` (file storage) on `subject`.
///
/// # Panics
/// When the server refuses.
pub async fn create_stream(js: &Context, name: &str, subject: &str) {
    js.create_stream(jetstream::stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        storage: jetstream::stream::StorageType::File,
        ..jetstream::stream::Config::default()
    })
    .await
    .expect("create the stream");
}

/// Publishes [`MESSAGES`] messages keyed `<prefix>-<i>` (`Nats-Msg-Id`) crediting
/// [`amount`]`(i)`, waiting for every publish ack.
///
/// # Panics
/// When a publish is not acked.
pub async fn publish_restart_messages(js: &Context, subject: &str, prefix: &str) {
    publish_keyed(js, subject, prefix, MESSAGES).await;
}

/// Publishes `count` messages keyed `<prefix>-<i>` (`Nats-Msg-Id`) crediting
/// [`amount`]`(i)`, waiting for every publish ack.
///
/// # Panics
/// When a publish is not acked.
pub async fn publish_keyed(js: &Context, subject: &str, prefix: &str, count: i64) {
    let mut acks = Vec::new();
    for i in 0..count {
        let id = format!("{prefix}-{i}");
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let body = credit(&id, amount(i)).payload().to_vec();
        acks.push(
            js.publish_with_headers(subject.to_owned(), headers, body.into())
                .await
                .expect("publish"),
        );
        // The client bounds acks in flight: collect them as we go.
        if acks.len() == 256 {
            for ack in acks.drain(..) {
                ack.await.expect("publish ack");
            }
        }
    }
    for ack in acks {
        ack.await.expect("publish ack");
    }
}
