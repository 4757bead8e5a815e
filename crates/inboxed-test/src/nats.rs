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
    /// Arguments beyond the address, port and storage (a cluster's).
    args: Vec<String>,
}

impl NatsServer {
    /// Starts a server on a free port with its storage in a temporary directory.
    ///
    /// # Panics
    /// When `nats-server` is missing or does not listen within 5 s.
    pub async fn start() -> Self {
        let port = crate::free_port();
        let mut server = Self::create(port, Vec::new());
        server.boot().await;
        server
    }

    fn create(port: u16, args: Vec<String>) -> Self {
        Self {
            dir: tempfile::tempdir().expect("temporary directory"),
            port,
            child: None,
            args,
        }
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
            .args(&self.args)
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

/// Servers of one JetStream cluster (routes between all of them); each killed when dropped.
#[derive(Debug)]
pub struct NatsCluster {
    /// The servers, in the order of [`NatsCluster::url_from`].
    pub servers: Vec<NatsServer>,
}

impl NatsCluster {
    /// `n` servers routed to each other, returned once JetStream has a meta leader (a stream of
    /// `n` replicas can be created).
    ///
    /// # Panics
    /// When a server does not start, or the cluster elects no leader within 30 s.
    pub async fn start(n: usize) -> Self {
        let ports: Vec<(u16, u16)> = (0..n)
            .map(|_| (crate::free_port(), crate::free_port()))
            .collect();
        let mut servers = Vec::new();
        for (i, &(port, route)) in ports.iter().enumerate() {
            let routes: Vec<String> = ports
                .iter()
                .filter(|&&(_, r)| r != route)
                .map(|(_, r)| format!("nats://127.0.0.1:{r}"))
                .collect();
            let args = [
                "-n".to_owned(),
                format!("inboxed-{i}"),
                "--cluster_name".to_owned(),
                "inboxed".to_owned(),
                "--cluster".to_owned(),
                format!("nats://127.0.0.1:{route}"),
                "--routes".to_owned(),
                routes.join(","),
            ];
            let mut server = NatsServer::create(port, args.to_vec());
            server.boot().await;
            servers.push(server);
        }
        let cluster = Self { servers };
        let js = jetstream::new(
            async_nats::connect(cluster.url_from(0).split(',').collect::<Vec<_>>())
                .await
                .expect("connect to the cluster"),
        );
        // Forming the cluster (routes, a meta leader, every peer known for placement) took 27 s
        // in a passing run on a loaded two-core machine, and over 30 in a clean-clone CI run
        // here ("no suitable peers for placement"): a minute, well inside the test's own bound.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let probe = js
                .create_stream(jetstream::stream::Config {
                    name: "INBOXED_PROBE".to_owned(),
                    subjects: vec!["inboxed.probe".to_owned()],
                    num_replicas: n,
                    ..jetstream::stream::Config::default()
                })
                .await;
            if probe.is_ok() {
                let _ = js.delete_stream("INBOXED_PROBE").await;
                return cluster;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the NATS cluster has no JetStream leader: {probe:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The cluster's URL: every server, `first` first, then the others in order.
    #[must_use]
    pub fn url_from(&self, first: usize) -> String {
        let n = self.servers.len();
        (0..n)
            .map(|i| self.servers[(first + i) % n].url())
            .collect::<Vec<_>>()
            .join(",")
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

/// Publishes `messages` to `subject` (the envelope's id as `Nats-Msg-Id`, its headers as NATS
/// headers), waiting for every publish ack.
///
/// # Panics
/// When a publish is not acked.
pub async fn publish_all(js: &Context, subject: &str, messages: Vec<inboxed_core::Envelope>) {
    for message in messages {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", message.id().as_str());
        for (name, value) in message.headers().iter() {
            headers.insert(name, String::from_utf8_lossy(value).as_ref());
        }
        js.publish_with_headers(
            subject.to_owned(),
            headers,
            message.payload().to_vec().into(),
        )
        .await
        .expect("publish")
        .await
        .expect("publish ack");
    }
}
