//! Following the primary of a cluster that fails over. libpq takes several hosts in one URL
//! (`postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write`) and connects to
//! the one that accepts writes; sqlx does not. [`connect`] reads that URL, opens the pool on
//! the host that is the primary now, and keeps probing the hosts: when another one becomes the
//! primary (a standby promoted), the pool's new connections go there. Connections to the old
//! primary break with it, and the processor retries what they were doing; a commit that broke
//! mid-way is ambiguous, and the redelivery's claim settles it.
//!
//! Two guards keep the pool's connections on the primary between probes. A new connection
//! that lands on a server in recovery is refused (`after_connect`): a host demoted between two
//! probes, or a URL's single host that is a standby, is a connection error the processor
//! retries, never a write refused for each message. And once the follower has moved, a
//! connection opened before the move is closed when next acquired (`before_acquire`, by its
//! age), so that idle connections to the old primary write nothing more there.
//!
//! The old primary must still be fenced (stopped, or cut off from the clients) before the
//! standby is promoted, as every failover manager does: a client that can still reach the old
//! primary, first in the URL's order, stays on it, as libpq's would.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use inboxed_core::StoreError;

/// How long a probe of one host may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether `url` names several hosts (`postgres://app@db1:5432,db2:5432/app`).
#[must_use]
pub fn is_multi_host(url: &str) -> bool {
    url.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        hosts.contains(',')
    })
}

/// The pool's hosts, each as the URL's options with that host.
#[derive(Debug, Clone)]
pub struct Hosts {
    hosts: Vec<(String, PgConnectOptions)>,
}

impl Hosts {
    /// The hosts of `url`: libpq's multi-host form (`host1:port1,host2:port2` in place of one
    /// host), or one host. `target_session_attrs`, when given, must be `read-write` or
    /// `primary`: the inbox writes.
    ///
    /// # Errors
    /// A URL that does not parse, or names no host, or asks for a standby.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let bad = |why: String| {
            StoreError::Database(sqlx::Error::Configuration(
                format!("a multi-host URL: {why}").into(),
            ))
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("the URL has no scheme".to_owned()))?;
        let (authority, tail) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (userinfo, hostlist) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (Some(user), hosts),
            None => (None, authority),
        };
        let (path, query) = match tail.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (tail, None),
        };
        let mut kept = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", "read-write" | "primary")) => {}
                Some(("target_session_attrs", other)) => {
                    return Err(bad(format!(
                        "target_session_attrs={other}: the inbox writes, so it follows the \
                         primary (read-write or primary)"
                    )));
                }
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let mut hosts = Vec::new();
        for host in hostlist.split(',').filter(|h| !h.is_empty()) {
            let one = match userinfo {
                Some(user) => format!("{scheme}://{user}@{host}{path}{query}"),
                None => format!("{scheme}://{host}{path}{query}"),
            };
            let options =
                PgConnectOptions::from_str(&one).map_err(|e| bad(format!("host {host}: {e}")))?;
            hosts.push((host.to_owned(), options));
        }
        if hosts.is_empty() {
            return Err(bad("the URL names no host".to_owned()));
        }
        Ok(Self { hosts })
    }

    /// The hosts, as written in the URL.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.hosts.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// The first host, in the URL's order, that answers as a primary (not in recovery).
    pub async fn primary(&self) -> Option<(&str, &PgConnectOptions)> {
        for (name, options) in &self.hosts {
            if is_primary(options).await {
                return Some((name, options));
            }
        }
        None
    }
}

/// Whether the server of `options` answers, within [`PROBE_TIMEOUT`], as a primary.
async fn is_primary(options: &PgConnectOptions) -> bool {
    let probe = async {
        let mut conn = options.connect().await.ok()?;
        let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await
            .ok()?;
        let _ = conn.close().await;
        Some(!in_recovery)
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe).await,
        Ok(Some(true))
    )
}

/// The task following the primary; dropping it stops the following (the pool stays, on the
/// host it was last pointed at).
#[derive(Debug)]
pub struct Follower {
    task: JoinHandle<()>,
    current: Arc<std::sync::Mutex<String>>,
}

impl Follower {
    /// The host the pool's new connections go to now.
    #[must_use]
    pub fn primary(&self) -> String {
        self.current.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A pool on the primary among `url`'s hosts, and the task that points it at another host when
/// that one becomes the primary, probing every `every` (a second is a fair choice: a failover
/// takes longer to decide).
///
/// The pool's `after_connect` and `before_acquire` hooks are the module's two guards; hooks
/// set on `pool` before are replaced.
///
/// # Errors
/// The URL does not parse, or no host answers as a primary ([`StoreError::Unavailable`]).
pub async fn connect(
    url: &str,
    pool: PgPoolOptions,
    every: Duration,
) -> Result<(PgPool, Follower), StoreError> {
    let hosts = Hosts::parse(url)?;
    let Some((name, options)) = hosts.primary().await else {
        return Err(StoreError::Unavailable(sqlx::Error::Io(
            std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!(
                    "none of the hosts {:?} answers as a primary (all down, or all in recovery)",
                    hosts.names()
                ),
            ),
        )));
    };
    let moved: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let pool = guarded(pool, Arc::clone(&moved)).connect_lazy_with(options.clone());
    let current = Arc::new(std::sync::Mutex::new(name.to_owned()));
    let task = {
        let pool = pool.clone();
        let current = Arc::clone(&current);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some((name, options)) = hosts.primary().await else {
                    warn!(hosts = ?hosts.names(), "no host answers as a primary");
                    continue;
                };
                let mut now = lock(&current);
                if *now != name {
                    info!(from = %*now, to = %name, "the primary moved: new connections go to it");
                    *lock(&moved) = Some(Instant::now());
                    pool.set_connect_options(options.clone());
                    *now = name.to_owned();
                }
            }
        })
    };
    Ok((pool, Follower { task, current }))
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `pool` with the two guards: a connection to a server in recovery is refused, and one
/// opened before the follower last `moved` is closed instead of handed out.
fn guarded(pool: PgPoolOptions, moved: Arc<std::sync::Mutex<Option<Instant>>>) -> PgPoolOptions {
    pool.after_connect(|conn, _| {
        Box::pin(async move {
            let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
                .fetch_one(&mut *conn)
                .await?;
            if in_recovery {
                // An I/O error, so that it is a connection failure (StoreError::Unavailable)
                // that the processor retries, as it would a host that is down.
                return Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "the server is a standby (in recovery): the primary has moved",
                )));
            }
            Ok(())
        })
    })
    .before_acquire(move |_, meta| {
        // Opened before the move (older than the time since it): to the old primary.
        let stale = lock(&moved).is_some_and(|at| meta.age > at.elapsed());
        Box::pin(async move { Ok(!stale) })
    })
}

#[cfg(test)]
mod tests {
    use super::Hosts;

    #[test]
    fn a_multi_host_url_is_one_url_per_host() {
        let hosts = Hosts::parse(
            "postgres://app:secret@db1:5432,db2:5433/orders?target_session_attrs=read-write&sslmode=disable",
        )
        .unwrap();
        assert_eq!(hosts.names(), ["db1:5432", "db2:5433"]);
        assert_eq!(hosts.hosts[1].1.get_port(), 5433);
        assert_eq!(hosts.hosts[1].1.get_database(), Some("orders"));
        assert_eq!(hosts.hosts[0].1.get_username(), "app");
        assert_eq!(
            Hosts::parse("postgres://db1/x").unwrap().names(),
            ["db1"],
            "one host"
        );
        assert!(Hosts::parse("postgres://db1,db2/x?target_session_attrs=standby").is_err());
        assert!(Hosts::parse("postgres:///x").is_err(), "no host");
        assert!(Hosts::parse("db1,db2").is_err(), "no scheme");
        assert!(super::is_multi_host("postgres://u:p,w@db1,db2/x"));
        assert!(!super::is_multi_host("postgres://u:p,w@db1/x?options=a,b"));
        assert!(!super::is_multi_host("postgres:///x?host=/run/postgresql"));
    }
}
