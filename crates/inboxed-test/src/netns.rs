//! Hosts of a test's own on this machine: network namespaces (`ip netns`), each joined to a
//! bridge in the test's namespace by a veth pair, so that a process run in one has an address
//! of its own and reaches the servers only across its link. Cutting the link (its bridge side
//! set down) is a network partition: nothing is closed, packets stop, and each side learns of
//! it only by its own timeouts, as across a real switch. Needs root (`CAP_NET_ADMIN`).
//!
//! The bridge is `10.77.0.1/24`; host `n` (from 1) is `10.77.0.1n`. One network exists at a
//! time: [`Network::create`] removes what a killed run left behind.

use std::net::SocketAddr;
use std::process::Command;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The bridge's address: what the hosts reach the servers at.
pub const GATEWAY: &str = "10.77.0.1";
/// The hosts' network, for a server's access rules (`pg_hba.conf`).
pub const SUBNET: &str = "10.77.0.0/24";
const BRIDGE: &str = "ibxbr";

/// Namespaces joined to a bridge; removed when dropped.
#[derive(Debug)]
pub struct Network {
    hosts: usize,
}

impl Network {
    /// `hosts` namespaces (at most 9), each with its link up.
    ///
    /// # Panics
    /// When a namespace or link cannot be made: not root, or no `ip`.
    #[must_use]
    pub fn create(hosts: usize) -> Self {
        assert!((1..=9).contains(&hosts), "1 to 9 hosts");
        remove_all();
        ip(&["link", "add", BRIDGE, "type", "bridge"]);
        ip(&["addr", "add", &format!("{GATEWAY}/24"), "dev", BRIDGE]);
        ip(&["link", "set", BRIDGE, "up"]);
        for n in 1..=hosts {
            let (ns, outer, inner) = names(n);
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["link", "set", &outer, "master", BRIDGE]);
            ip(&["link", "set", &outer, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", address(n)),
                "dev",
                &inner,
            ]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        Self { hosts }
    }

    /// A command that runs `program` on host `n`.
    #[must_use]
    pub fn command(&self, n: usize, program: &str) -> tokio::process::Command {
        assert!((1..=self.hosts).contains(&n), "no host {n}");
        let mut cmd = tokio::process::Command::new("ip");
        cmd.args(["netns", "exec", &names(n).0, program]);
        cmd
    }

    /// Cuts host `n`'s link: its packets go nowhere, in both directions.
    pub fn cut(&self, n: usize) {
        ip(&["link", "set", &names(n).1, "down"]);
    }

    /// Mends host `n`'s link.
    pub fn mend(&self, n: usize) {
        ip(&["link", "set", &names(n).1, "up"]);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        remove_all();
    }
}

/// Host `n`'s address.
#[must_use]
pub fn address(n: usize) -> String {
    format!("10.77.0.1{n}")
}

/// Host `n`'s namespace, and the bridge and host ends of its link.
fn names(n: usize) -> (String, String, String) {
    (format!("ibxh{n}"), format!("ibxh{n}b"), format!("ibxh{n}h"))
}

fn remove_all() {
    for n in 1..=9 {
        let (ns, outer, _) = names(n);
        let _ = Command::new("ip").args(["link", "del", &outer]).output();
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
    }
    let _ = Command::new("ip").args(["link", "del", BRIDGE]).output();
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e} (iproute2 is needed)"));
    assert!(
        out.status.success(),
        "ip {args:?} failed (network namespaces need root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Connections to [`GATEWAY`] on a port of its own, forwarded to a server on this host's
/// loopback (one that listens on 127.0.0.1 only). A cut link leaves the forwarder's upstream
/// connection open, so the server learns of the loss by its protocol's heartbeat, as behind a
/// load balancer. Forwarding stops when this is dropped.
#[derive(Debug)]
pub struct Forwarding {
    /// The port on [`GATEWAY`].
    pub port: u16,
    task: JoinHandle<()>,
}

impl Forwarding {
    /// Forwards a free port of [`GATEWAY`] to `upstream`.
    ///
    /// # Panics
    /// When the gateway's port cannot be bound (no [`Network`]).
    pub async fn to(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind((GATEWAY, 0))
            .await
            .expect("bind on the bridge's address");
        let port = listener.local_addr().expect("local address").port();
        let task = tokio::spawn(async move {
            // Dropped with the task: every forwarded pair ends with the forwarding.
            let mut pairs = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                pairs.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { port, task }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.task.abort();
    }
}
