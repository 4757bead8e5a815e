//! A RabbitMQ node of a test's own (its own node name, ports and data directory), so that a
//! test can kill and restart it, or give it a TLS listener, without touching the machine's.

use std::process::Command;
use std::time::Duration;

use crate::tls::TestCa;

/// A RabbitMQ node in a temporary directory; killed when dropped.
#[derive(Debug)]
pub struct Node {
    dir: tempfile::TempDir,
    port: u16,
    dist_port: u16,
    tls_port: Option<u16>,
}

impl Node {
    /// A node listening with plain AMQP.
    ///
    /// # Panics
    /// When the node does not start.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// A node that also listens with `amqps` on a port of its own ([`Node::tls_url`]),
    /// presenting `ca`'s server certificate (for `localhost`) and asking no client certificate.
    ///
    /// # Panics
    /// When the node does not start.
    pub async fn start_tls(ca: &TestCa) -> Self {
        Self::start_with(Some(ca)).await
    }

    async fn start_with(ca: Option<&TestCa>) -> Self {
        let (port, dist_port) = (crate::free_port(), crate::free_port());
        let node = Self::create(port, dist_port, ca, "");
        node.boot().await;
        node
    }

    /// The node's name, which the cluster's configuration lists.
    fn name(port: u16) -> String {
        format!("inboxedtest{port}@localhost")
    }

    /// A node's directory and configuration (`extra` appended to it), not started.
    fn create(port: u16, dist_port: u16, ca: Option<&TestCa>, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Debian's rabbitmq-server runs the node as the rabbitmq user.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let mut conf = format!("listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n");
        let tls_port = ca.map(|ca| {
            let tls_port = crate::free_port();
            conf.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{tls_port}\n\
                 ssl_options.cacertfile = {}\n\
                 ssl_options.certfile = {}\n\
                 ssl_options.keyfile = {}\n\
                 ssl_options.verify = verify_none\n\
                 ssl_options.fail_if_no_peer_cert = false\n",
                ca.ca_file().display(),
                ca.cert_file().display(),
                ca.key_file().display()
            ));
            tls_port
        });
        conf.push_str(extra);
        std::fs::write(dir.path().join("rabbitmq.conf"), conf).unwrap();
        Self {
            dir,
            port,
            dist_port,
            tls_port,
        }
    }

    /// Starts the node on its directory (again) and waits for its port.
    ///
    /// # Panics
    /// When the node's VM exits while booting, or the node does not listen within 120 s; the
    /// message ends with the node's log.
    pub async fn boot(&self) {
        self.spawn();
        // Two minutes: a node boots in seconds alone, but CI boots some beside four tests,
        // the two-minute outage tests and the doctests' build on two cores.
        let mut gone = 0;
        for _ in 0..480 {
            let mut up = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok();
            if let Some(tls) = self.tls_port {
                up = up
                    && tokio::net::TcpStream::connect(("127.0.0.1", tls))
                        .await
                        .is_ok();
            }
            if up {
                return;
            }
            // A VM that exited (a bad configuration, a port taken) will not listen: say so
            // now rather than after the deadline. Twice missing, since the launcher forks
            // twice and one look may fall between a parent's exit and its child's start.
            gone = if self.running() { 0 } else { gone + 1 };
            assert!(
                gone < 2,
                "the RabbitMQ node on {} exited while booting; its log ends:\n{}",
                self.port,
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "the RabbitMQ node did not listen on {} within 120 s; its log ends:\n{}",
            self.port,
            self.log_tail()
        );
    }

    /// `rabbitmq-server -detached` on the node's directory: returns once the VM runs.
    fn spawn(&self) {
        let d = self.dir.path();
        let status = Command::new("rabbitmq-server")
            .arg("-detached")
            .env("RABBITMQ_NODENAME", Self::name(self.port))
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("plugins"))
            .env("RABBITMQ_PID_FILE", d.join("pid"))
            .env("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", self.marker())
            .status()
            .expect("rabbitmq-server must be installed: scripts/test.sh installs it");
        assert!(status.success(), "rabbitmq-server -detached failed");
    }

    /// An argument on the VM's command line that names this node's directory, so that the VM
    /// is found (and killed) from its first instant: the node writes its pid file only once
    /// its configuration is read and its distribution started, and a VM that outlived a failed
    /// test would hold its ports and a core.
    fn marker(&self) -> String {
        format!("-inboxed_test_node {}", self.dir.path().display())
    }

    /// The marker as `pgrep -f` and `pkill -f` match it: literally, and whole (a directory
    /// whose name another one's begins with is not this node's).
    fn marker_pattern(&self) -> String {
        let mut pattern = String::new();
        for c in self.marker().chars() {
            if !c.is_ascii_alphanumeric() && !matches!(c, ' ' | '/' | '_' | '-') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("( |$)");
        pattern
    }

    /// Whether the node's VM is running.
    fn running(&self) -> bool {
        Command::new("pgrep")
            .args(["-f", "--", &self.marker_pattern()])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// SIGKILL to the node's VM, whatever it is doing, until it is gone: a VM of many threads
    /// takes a moment to die, and its directory is removed after this.
    fn sigkill(&self) {
        for _ in 0..100 {
            let _ = Command::new("pkill")
                .args(["-9", "-f", "--", &self.marker_pattern()])
                .status();
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the node's log, for a failure's message.
    fn log_tail(&self) -> String {
        let log = self
            .dir
            .path()
            .join("log")
            .join(format!("{}.log", Self::name(self.port)));
        let Ok(text) = std::fs::read_to_string(&log) else {
            return "(no log: the VM stopped before it opened one, printing to the console \
                    that -detached closed)"
                .to_owned();
        };
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// SIGKILL to the node's VM, and waits until its port is closed.
    ///
    /// # Panics
    /// When it still listens after 10 s.
    pub async fn kill(&self) {
        self.sigkill();
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the RabbitMQ node on {} still listens after SIGKILL",
            self.port
        );
    }

    /// Runs `rabbitmqctl` (or another CLI tool of RabbitMQ's) against this node; its output.
    ///
    /// # Panics
    /// When the tool cannot be run or fails.
    #[must_use]
    pub fn ctl(&self, tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool)
            .args(["-n", &Self::name(self.port)])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The node's AMQP port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The plain AMQP URL.
    #[must_use]
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// The `amqps` URL at `host` (`localhost`, the certificate's name, or another), for a node
    /// started with [`Node::start_tls`].
    ///
    /// # Panics
    /// For a node without TLS.
    #[must_use]
    pub fn tls_url(&self, host: &str) -> String {
        let port = self.tls_port.expect("a node started with start_tls");
        format!("amqps://guest:guest@{host}:{port}/%2f")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the node said of its queues' recovery tells broker loss from ours.
            let log = self
                .dir
                .path()
                .join("log")
                .join(format!("{}.log", Self::name(self.port)));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            for line in text.lines().filter(|l| {
                ["dropped", "unclean", "crash", "error", "Restarting"]
                    .iter()
                    .any(|w| l.contains(w))
            }) {
                eprintln!("node log: {line}");
            }
        }
        self.sigkill();
    }
}

/// Nodes of one RabbitMQ cluster, formed at boot from the list of their names (peer
/// discovery by `classic_config`); each node killed when dropped.
#[derive(Debug)]
pub struct Cluster {
    /// The nodes, in the order of [`Cluster::url_from`].
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// `n` nodes booted together, returned once every one counts `n` running nodes.
    ///
    /// # Panics
    /// When a node does not start or the cluster does not form within 90 s.
    pub async fn start(n: usize) -> Self {
        let ports: Vec<(u16, u16)> = (0..n)
            .map(|_| (crate::free_port(), crate::free_port()))
            .collect();
        let mut extra = String::from(
            "cluster_formation.peer_discovery_backend = classic_config\n\
             cluster_formation.randomized_startup_delay_range.min = 0\n\
             cluster_formation.randomized_startup_delay_range.max = 1\n",
        );
        for (i, (port, _)) in ports.iter().enumerate() {
            extra.push_str(&format!(
                "cluster_formation.classic_config.nodes.{} = {}\n",
                i + 1,
                Node::name(*port)
            ));
        }
        let nodes: Vec<Node> = ports
            .iter()
            .map(|&(port, dist)| Node::create(port, dist, None, &extra))
            .collect();
        futures_util::future::join_all(nodes.iter().map(Node::boot)).await;
        let cluster = Self { nodes };
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        for node in &cluster.nodes {
            loop {
                let running = node.ctl(
                    "rabbitmqctl",
                    &["eval", "length(rabbit_nodes:all_running())."],
                );
                if running.trim() == n.to_string() {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the cluster did not form: {running}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        cluster
    }

    /// The cluster's URL: every node, `first` first, then the others in order.
    #[must_use]
    pub fn url_from(&self, first: usize) -> String {
        let hosts: Vec<String> = (0..self.nodes.len())
            .map(|i| {
                format!(
                    "127.0.0.1:{}",
                    self.nodes[(first + i) % self.nodes.len()].port
                )
            })
            .collect();
        format!("amqp://guest:guest@{}/%2f", hosts.join(","))
    }

    /// The index of the node that leads the quorum queue `queue`, as the first node that
    /// answers says.
    ///
    /// # Panics
    /// When no node answers, or none is named as its leader.
    #[must_use]
    pub fn leader(&self, queue: &str) -> usize {
        let listed = self
            .nodes
            .iter()
            .find_map(|node| {
                let out = Command::new("rabbitmqctl")
                    .args(["-n", &Node::name(node.port)])
                    .args([
                        "list_queues",
                        "name",
                        "leader",
                        "--quiet",
                        "--no-table-headers",
                    ])
                    .output()
                    .ok()?;
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .expect("a node of the cluster answers rabbitmqctl");
        let leader = listed
            .lines()
            .find_map(|l| {
                let mut cols = l.split_whitespace();
                (cols.next() == Some(queue)).then(|| cols.next().unwrap_or_default().to_owned())
            })
            .unwrap_or_else(|| panic!("no leader listed for {queue}: {listed}"));
        self.nodes
            .iter()
            .position(|n| Node::name(n.port) == leader)
            .unwrap_or_else(|| panic!("the leader {leader} is none of the cluster's nodes"))
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::Node;

    /// A node whose configuration RabbitMQ refuses exits before it opens its log or writes its
    /// pid file: the boot says so within seconds instead of waiting out its two minutes.
    #[tokio::test]
    async fn a_node_that_exits_while_booting_is_reported_at_once() {
        let node = Node::create(
            crate::free_port(),
            crate::free_port(),
            None,
            "no_such_setting = 1\n",
        );
        let started = std::time::Instant::now();
        let boot = tokio::spawn(async move { node.boot().await });
        let failure = boot
            .await
            .expect_err("a node with a bad configuration booted");
        let message = failure.into_panic();
        let message = message
            .downcast_ref::<String>()
            .map_or("(not a message)", String::as_str);
        assert!(message.contains("exited while booting"), "{message}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    /// A node dropped before its VM has booted (the test that started it failed early) leaves
    /// no VM behind, though it has no pid file yet.
    #[tokio::test]
    async fn a_node_dropped_while_booting_leaves_no_vm() {
        let node = Node::create(crate::free_port(), crate::free_port(), None, "");
        node.spawn();
        assert!(node.running());
        let marker = node.marker_pattern();
        assert!(!node.dir.path().join("pid").exists());
        drop(node);
        let left = Command::new("pgrep")
            .args(["-f", "--", &marker])
            .status()
            .unwrap();
        assert!(!left.success(), "a VM outlived its node");
    }
}
