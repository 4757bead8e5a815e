//! `inboxed serve`: Prometheus metrics derived from the database (backlog, oldest pending age,
//! expired leases, dead letters, processed keys) and a health check, over HTTP.

mod console;
mod gauges;
mod http;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use tracing::{info, warn};

use inboxed_core::ConsumerName;

use super::AnyStore;
use super::daemon::{self, Shutdown, Status};
use super::database::DbArgs;
use super::duration::parse_duration;
use super::tenant;

/// `inboxed serve`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Address to serve `/metrics` and `/health` on. Loopback by default: expose it on purpose.
    #[arg(long, env = "INBOXED_LISTEN", default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// How often the gauges are read from the database, e.g. 15s.
    #[arg(long, env = "INBOXED_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    interval: Duration,
    /// Consumers whose processed keys (count, growth, oldest age, table bytes) are published
    /// too. Repeat for several; the store-then-process backlog covers every consumer anyway.
    #[arg(long = "consumer")]
    consumers: Vec<String>,
    /// The console at `/`. With `--console-users`, shown on any address to those users only.
    /// Without: `auto` shows it read-only to anyone, on a loopback address only; `on` shows
    /// it read-only to anyone on any address (behind a proxy that authenticates); `off` never.
    #[arg(long, env = "INBOXED_CONSOLE", value_enum, default_value = "auto")]
    console: ConsoleMode,
    /// TOML file of the console's users: `[[user]]` tables with `name`, `role` (`read-only` or
    /// `operator`), `token` (16 characters at least) or `token_sha256`, and `payloads` (true
    /// to let the user see payloads where --console-payloads allows). They sign in with
    /// HTTP Basic (name and token) or the token as a bearer token.
    #[arg(long, env = "INBOXED_CONSOLE_USERS")]
    console_users: Option<std::path::PathBuf>,
    /// A consumer's Prometheus endpoint (http://host:port/metrics: the service's exporter, or
    /// `inboxed relay --metrics-addr`), read for the console's dedup hit rate, which only its
    /// counters know (a duplicate writes nothing to the database).
    #[arg(long, env = "INBOXED_METRICS_URL", value_name = "URL")]
    metrics_url: Option<String>,
    /// Let the console show payloads, to the users whose entry allows it.
    #[arg(long, env = "INBOXED_CONSOLE_PAYLOADS")]
    console_payloads: bool,
    /// A tenant's database, `NAME=URL`, where each tenant has its own
    /// (`inboxed_core::Tenants`), read in place of `--database-url`'s. Repeat for several:
    /// every gauge carries a `tenant` label, `/health` reports each (503 when any is down),
    /// and the console lists the tenants at `/` with each one's pages under `/t/NAME`.
    #[arg(long = "tenant", value_name = "NAME=URL", value_parser = tenant::parse)]
    tenants: Vec<tenant::Tenant>,
}

/// Whether `inboxed serve` shows the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ConsoleMode {
    /// On a loopback address only.
    Auto,
    /// On any address.
    On,
    /// Never.
    Off,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let shutdown = Shutdown::listen("serve")?;
    let consumers = args
        .consumers
        .iter()
        .map(|c| ConsumerName::new(c.clone()))
        .collect::<Result<Vec<_>, _>>()
        .context("--consumer")?;
    // Fails before connecting: a wrong users file or tenant is found at once.
    let databases = tenant::databases(&args.db, &args.tenants)?;
    console_config(&args, "127.0.0.1:0".parse()?)?;
    let recorder = daemon::recorder()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let console = console_config(&args, addr)?;
    // Answering from the start: `/health` says what it waits for until every database is
    // connected, and the full routes take over then.
    let status = Status::default();
    let routes = http::Late::default();
    let server = tokio::spawn(
        axum::serve(
            listener,
            http::router(routes.clone(), status.clone(), recorder.clone()),
        )
        .with_graceful_shutdown(shutdown.requested())
        .into_future(),
    );
    let mut stores = Vec::new();
    for (name, db) in databases {
        let what = if name.is_some() {
            "a tenant's database"
        } else {
            "the database"
        };
        let connect = || async {
            db.connect(4)
                .await
                .map_err(|e| tenant::of(name.as_deref(), e))
        };
        let Some(store) = daemon::until_up(what, &status, &shutdown, connect).await else {
            return stopped(server, &shutdown).await;
        };
        stores.push((name.clone(), store));
    }
    let refreshes: Vec<_> = stores
        .iter()
        .map(|(name, store)| {
            let published = gauges::Published::of(name.clone());
            let read = refresh(store.clone(), published, consumers.clone(), args.interval);
            tokio::spawn(read)
        })
        .collect();
    // One write: a reader that takes the first line and closes (a test, `| head -1`) must not
    // make a second write fail.
    let mut banner = format!("serving http://{addr}/metrics and http://{addr}/health\n");
    if !args.tenants.is_empty() {
        banner.push_str(&format!("for {} tenants\n", args.tenants.len()));
    }
    if let Some(config) = &console {
        let who = if config.users.is_empty() {
            "read-only, without signing in"
        } else {
            "to the users of --console-users"
        };
        banner.push_str(&format!("the console: http://{addr}/ ({who})\n"));
    }
    let console = match console {
        Some(config) => {
            let stores = stores.iter().map(|(name, store)| {
                let store = console::ServeStore {
                    store: store.clone(),
                    metrics_url: args.metrics_url.clone(),
                };
                (name.clone(), store)
            });
            Some(console::routes(config, stores.collect())?)
        }
        None => None,
    };
    let served = Arc::new(http::Served {
        stores,
        metrics: recorder,
    });
    routes.set(http::full(served, console));
    // Printed once everything is served: a script that waits for this line may use any page.
    out.write_all(banner.as_bytes())?;
    out.flush()?;
    info!(database = %args.db.shown_url(), %addr, "serving metrics and health");
    let code = stopped(server, &shutdown).await;
    for refresh in refreshes {
        refresh.abort();
    }
    code
}

/// Waits for the server, which stops taking connections at the signal and lets the requests
/// in flight finish within their deadline; past it (and a second), the process exits anyway.
async fn stopped(
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    shutdown: &Shutdown,
) -> anyhow::Result<ExitCode> {
    let bound = {
        let requested = shutdown.requested();
        async move {
            requested.await;
            tokio::time::sleep(daemon::http::REQUEST_DEADLINE + Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        served = server => {
            served
                .context("the HTTP server panicked")?
                .context("the HTTP server failed")?;
            Ok(ExitCode::SUCCESS)
        }
        () = bound => {
            warn!("requests still open at the shutdown bound: exiting");
            Ok(ExitCode::from(1))
        }
    }
}

/// The console's configuration, or `None` when it is not shown (see `--console`).
fn console_config(
    args: &Args,
    addr: SocketAddr,
) -> anyhow::Result<Option<inboxed_console::ConsoleConfig>> {
    let mut config = inboxed_console::ConsoleConfig::default();
    config.show_payloads = args.console_payloads;
    config.consumers.clone_from(&args.consumers);
    if args.console == ConsoleMode::Off {
        return Ok(None);
    }
    if let Some(path) = &args.console_users {
        config.users = console::users(path)?;
        if !addr.ip().is_loopback() {
            warn!(%addr, "the console's users sign in over plain HTTP beyond loopback: put TLS in front of it");
        }
        return Ok(Some(config));
    }
    if args.console == ConsoleMode::Auto && !addr.ip().is_loopback() {
        info!(%addr, "the console is not shown on a non-loopback address without --console-users");
        return Ok(None);
    }
    config.anonymous = Some(inboxed_console::Role::ReadOnly);
    if args.console == ConsoleMode::Auto {
        // Open without credentials on loopback: only under loopback names, so that a page of
        // another site whose name is rebound to 127.0.0.1 reads nothing (DNS rebinding).
        config.hosts = ["127.0.0.1", "localhost", "[::1]"]
            .map(str::to_owned)
            .to_vec();
    }
    Ok(Some(config))
}

/// Reads one database every `interval` and sets its gauges; a failed read sets
/// `inboxed_observe_up` to 0 and is retried at the next interval.
async fn refresh(
    store: AnyStore,
    mut published: gauges::Published,
    consumers: Vec<ConsumerName>,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let now = SystemTime::now();
        match store.observe().await {
            Ok(seen) => {
                published.set(&seen, now);
                published.gauge(gauges::UP, []).set(1.0);
            }
            Err(e) => {
                warn!(error = %e, tenant = published.tenant(), "could not read the inbox tables");
                published.gauge(gauges::UP, []).set(0.0);
            }
        }
        for consumer in &consumers {
            match store.processed_stats(consumer).await {
                Ok(stats) => stats.publish_labelled(consumer, now, &published.labels([])),
                Err(e) => warn!(
                    error = %e, consumer = %consumer, tenant = published.tenant(),
                    "could not read processed keys"
                ),
            }
        }
        published
            .gauge(gauges::OBSERVE_SECONDS, [])
            .set(started.elapsed().as_secs_f64());
    }
}
