//! The daemons (`relay`, `outbox relay`, `serve`) under a supervisor, as processes on the real
//! engines and brokers: SIGTERM in the middle of a stream stops each within its bound with exit
//! 0 and loses nothing (every message a row or still in its queue, every outbox row published
//! once or still pending); a second signal exits at once; started before their database and
//! broker they wait, saying on `/health` what for, and come up when those do; `/health` says
//! 503 with the reason while either is down and 200 once it is back.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};

use inboxed_core::outbox::OutgoingMessage;
use inboxed_test::amqp::{depth, publish_keyed, queue};
use inboxed_test::nats::{NatsServer, create_stream};
use inboxed_test::outbox;
use inboxed_test::restart::store_on;
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Backend, Pg};

use common::amqp_url;

/// The daemons' own bound on a drain (`DRAIN_BOUND` in the CLI): a stop slower than this is
/// the bug these tests catch.
const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// `inboxed ARGS` with its metrics and health on a free port: the process and that address.
fn daemon(args: &[&str]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", inboxed_test::free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(args)
        .args(["--metrics-addr", &addr])
        .env("INBOXED_LOG", "warn")
        .env("INBOXED_CONNECT_TIMEOUT", "1s")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start inboxed");
    (child, addr)
}

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: &str) {
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// SIGTERM, then how long the process took to exit, its exit code and what it printed.
async fn stop(child: Child) -> (Duration, Option<i32>, String) {
    common::stop(child, DRAIN_BOUND + Duration::from_secs(15)).await
}

/// `/health` at `addr` until `want` holds of its status and body (60 s at most); the body.
async fn health_until(addr: &str, what: &str, want: impl Fn(u16, &Value) -> bool) -> Value {
    let mut last = (0, Value::Null);
    for _ in 0..600 {
        // Not listening yet (or any more): try again.
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            let (code, body) = common::http_get(addr, "/health").await;
            let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
            if want(code, &body) {
                return body;
            }
            last = (code, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/health never showed {what}; last {last:?}");
}

fn waiting_for(what: &'static str) -> impl Fn(u16, &Value) -> bool {
    move |code, body| code == 503 && body["status"] == "starting" && body["waiting_for"] == what
}

fn ok(code: u16, body: &Value) -> bool {
    code == 200 && body["status"] == "ok"
}

/// Rows of consumer `billing` in `store`'s inbox table.
async fn inbox_rows<B: Backend>(store: &B::Store) -> i64 {
    B::scalar(
        store,
        "SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'billing'",
    )
    .await
}

async fn until_rows(store: &inboxed_postgres::PgStore, want: i64) {
    for _ in 0..1200 {
        if inbox_rows::<Pg>(store).await >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("fewer than {want} rows after 120 s");
}

async fn until_sent(store: &inboxed_postgres::PgStore, want: i64) {
    for _ in 0..1200 {
        if outbox::count(store, outbox::SENT).await >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "fewer than {want} outbox rows sent after 120 s: {}",
        outbox::count(store, outbox::SENT).await
    );
}

/// SIGTERM while the relay is storing a stream: it stops within its bound with exit 0, and
/// every message is either a row (acked) or still in the queue (not acked), none both, none
/// neither; a second relay then stores the rest.
#[tokio::test]
async fn relay_stops_mid_stream_within_its_bound_and_loses_nothing() {
    const MESSAGES: i64 = 20_000;
    let db = Pg::create().await;
    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "s", 0..MESSAGES).await;
    let relay = |db: &str| {
        daemon(&[
            "relay",
            "--from",
            &amqp_url(),
            "--queue",
            &name,
            "--to",
            db,
            "--consumer",
            "billing",
        ])
    };
    let (child, _) = relay(&db.locator);
    until_rows(&db.store, MESSAGES / 10).await;
    let (took, code, out) = stop(child).await;
    let rows = inbox_rows::<Pg>(&db.store).await;
    let left = i64::from(depth(&channel, &name).await);
    println!("stopped in {took:?} with {rows} rows stored and {left} messages left");
    assert_eq!(code, Some(0), "exit 0 after SIGTERM: {out}");
    assert!(took < DRAIN_BOUND, "stopped within its bound: {took:?}");
    assert!(rows < MESSAGES, "stopped mid-stream: {rows} rows");
    assert_eq!(
        rows + left,
        MESSAGES,
        "each message a row or in the queue, never both, never neither"
    );
    let (child, _) = relay(&db.locator);
    until_rows(&db.store, MESSAGES).await;
    let (_, code, _) = stop(child).await;
    assert_eq!(code, Some(0));
    assert_eq!(inbox_rows::<Pg>(&db.store).await, MESSAGES);
    assert_eq!(depth(&channel, &name).await, 0, "everything acked");
    db.finish().await;
}

/// SIGTERM while the outbox relay publishes a backlog: it stops within its bound with exit 0,
/// and the queue holds exactly the rows marked sent (none published and left pending, which a
/// restart would publish twice); a second relay publishes the rest, each once.
#[tokio::test]
async fn outbox_relay_stops_mid_stream_within_its_bound_and_loses_nothing() {
    const ROWS: i64 = 20_000;
    let db = Pg::create().await;
    let (channel, name) = queue(&amqp_url()).await;
    let messages: Vec<OutgoingMessage> = (0..ROWS)
        .map(|i| OutgoingMessage::new("billing.charged", i.to_be_bytes().to_vec()))
        .collect();
    for chunk in messages.chunks(1_000) {
        outbox::write(&db.store, chunk).await;
    }
    let route = format!("billing.charged=/{name}");
    let relay = || {
        daemon(&[
            "outbox",
            "relay",
            "--database-url",
            &db.locator,
            "--broker",
            &amqp_url(),
            "--route",
            &route,
            "--batch-size",
            "100",
        ])
    };
    let (child, _) = relay();
    until_sent(&db.store, ROWS / 10).await;
    let (took, code, out) = stop(child).await;
    let sent = outbox::count(&db.store, outbox::SENT).await;
    let published = i64::from(depth(&channel, &name).await);
    println!("stopped in {took:?} with {sent} rows sent and {published} published");
    assert_eq!(code, Some(0), "exit 0 after SIGTERM: {out}");
    assert!(took < DRAIN_BOUND, "stopped within its bound: {took:?}");
    assert!(sent < ROWS, "stopped mid-stream: {sent} sent");
    assert_eq!(published, sent, "what was published is what is marked sent");
    let (child, _) = relay();
    until_sent(&db.store, ROWS).await;
    let (_, code, _) = stop(child).await;
    assert_eq!(code, Some(0));
    assert_eq!(
        i64::from(depth(&channel, &name).await),
        ROWS,
        "each row once"
    );
    db.finish().await;
}

/// A NATS server of the test's own with a stream `orders` of `messages` keyed messages, then
/// stopped.
async fn stopped_nats_with(messages: i64) -> NatsServer {
    let mut nats = NatsServer::start().await;
    let js = jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    create_stream(&js, "orders", "orders.>").await;
    inboxed_test::nats::publish_keyed(&js, "orders.new", "n", messages).await;
    nats.kill().await;
    nats
}

/// Started before its database and its broker, the relay waits for each in turn, saying so on
/// `/health`; once both are up it stores the stream; `/health` then says 503 with the reason
/// while either goes away, and 200 when it is back.
#[tokio::test]
async fn relay_waits_for_its_database_and_broker_and_says_which_is_down() {
    const MESSAGES: i64 = 500;
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    pg.crash();
    let mut nats = stopped_nats_with(MESSAGES).await;
    let (child, addr) = daemon(&[
        "relay",
        "--from",
        &nats.url(),
        "--stream",
        "orders",
        "--to",
        &pg.url(),
        "--consumer",
        "billing",
    ]);
    let body = health_until(
        &addr,
        "waiting for the database",
        waiting_for("the database"),
    )
    .await;
    assert!(
        body["error"].as_str().unwrap().contains("PostgreSQL"),
        "{body}"
    );
    pg.restart();
    health_until(&addr, "waiting for the broker", waiting_for("the broker")).await;
    nats.boot().await;
    until_rows(&store, MESSAGES).await;
    let body = health_until(&addr, "ready", ok).await;
    assert_eq!(body["broker"], "reachable", "{body}");

    nats.kill().await;
    let body = health_until(&addr, "the broker down", |code, body| {
        code == 503
            && body["broker"]
                .as_str()
                .is_some_and(|b| b.contains("unreachable"))
    })
    .await;
    assert_eq!(body["database"], "ok", "{body}");
    nats.boot().await;
    health_until(&addr, "ready again", ok).await;
    pg.crash();
    let body = health_until(&addr, "the database down", |code, body| {
        code == 503 && body["status"] == "down"
    })
    .await;
    assert!(body["database"].as_str().is_some(), "{body}");
    pg.restart();
    health_until(&addr, "ready again", ok).await;
    let (_, code, out) = stop(child).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        inbox_rows::<Pg>(&store).await,
        MESSAGES,
        "each message once"
    );
}

/// The same for the outbox relay: started before its database and its broker it waits for
/// each, then publishes every committed row once.
#[tokio::test]
async fn outbox_relay_waits_for_its_database_and_broker_and_says_which_is_down() {
    const ROWS: i64 = 300;
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    let messages: Vec<OutgoingMessage> = (0..ROWS)
        .map(|i| OutgoingMessage::new("orders.new", i.to_be_bytes().to_vec()))
        .collect();
    outbox::write(&store, &messages).await;
    pg.crash();
    let mut nats = stopped_nats_with(0).await;
    let (child, addr) = daemon(&[
        "outbox",
        "relay",
        "--database-url",
        &pg.url(),
        "--broker",
        &nats.url(),
    ]);
    health_until(
        &addr,
        "waiting for the database",
        waiting_for("the database"),
    )
    .await;
    pg.restart();
    let body = health_until(&addr, "waiting for the broker", waiting_for("the broker")).await;
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("cannot reach the broker"),
        "{body}"
    );
    nats.boot().await;
    until_sent(&store, ROWS).await;
    health_until(&addr, "ready", ok).await;
    nats.kill().await;
    health_until(&addr, "the broker down", |code, body| {
        code == 503
            && body["broker"]
                .as_str()
                .is_some_and(|b| b.contains("unreachable"))
    })
    .await;
    nats.boot().await;
    health_until(&addr, "ready again", ok).await;
    let (_, code, out) = stop(child).await;
    assert_eq!(code, Some(0), "{out}");
    let js = jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let stream = js.get_stream("orders").await.unwrap();
    let info = stream.get_info().await.unwrap();
    assert_eq!(
        i64::try_from(info.state.messages).unwrap(),
        ROWS,
        "each row once"
    );
}

/// `serve` started before its database answers `/health` at once, 503 and what it waits
/// for, then 200; SIGTERM with a request in flight lets the request finish and exits 0; a
/// second signal exits at once.
#[tokio::test]
async fn serve_waits_for_its_database_and_stops_on_sigterm() {
    let pg = ThrowawayPg::start();
    let store = store_on(&pg).await;
    pg.crash();
    let addr = format!("127.0.0.1:{}", inboxed_test::free_port());
    let serve = || {
        Command::new(env!("CARGO_BIN_EXE_inboxed"))
            .args(["serve", "--database-url", &pg.url(), "--listen", &addr])
            .args(["--interval", "1s"])
            .env("INBOXED_LOG", "warn")
            .env("INBOXED_CONNECT_TIMEOUT", "1s")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start inboxed serve")
    };
    let child = serve();
    health_until(
        &addr,
        "waiting for the database",
        waiting_for("the database"),
    )
    .await;
    pg.restart();
    health_until(&addr, "ready", ok).await;
    assert_eq!(common::http_get(&addr, "/health/live").await.0, 200);

    // A request in flight: `/health` reads the inbox table, which a transaction holds locked.
    let lock = |store: &inboxed_postgres::PgStore| {
        let pool = store.pool().clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("LOCK TABLE inboxed_inbox_messages IN ACCESS EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx
        }
    };
    let held = lock(&store).await;
    let in_flight = tokio::spawn({
        let addr = addr.clone();
        async move { common::http_get(&addr, "/health").await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (took, code, out) = stop(child).await;
    let (status, _) = in_flight.await.unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        status, 503,
        "the request in flight was answered (the database did not)"
    );
    assert!(
        took < Duration::from_secs(12),
        "within the request deadline: {took:?}"
    );
    drop(held);

    let mut child = serve();
    health_until(&addr, "ready", ok).await;
    let held = lock(&store).await;
    let in_flight = tokio::spawn({
        let addr = addr.clone();
        async move { common::http_get(&addr, "/health").await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = Instant::now();
    signal(&child, "TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still finishing the request"
    );
    signal(&child, "INT");
    let status = tokio::time::timeout(Duration::from_secs(3), child.wait())
        .await
        .expect("the second signal exits at once")
        .unwrap();
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(sent.elapsed() < Duration::from_secs(3));
    in_flight.abort();
    drop(held);
}

/// Written to a pipe, the log carries no colour codes, and every line names the component
/// (the module) that wrote it; a relay waiting for its broker stops at once on SIGTERM.
#[tokio::test]
async fn logs_to_a_pipe_are_plain_and_name_their_component() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("relay.db").display());
    let port = inboxed_test::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args([
            "relay",
            "--from",
            &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        ])
        .args(["--queue", "q", "--to", &db, "--consumer", "billing"])
        .env("INBOXED_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut log = Vec::new();
    let mut chunk = [0; 4096];
    while !String::from_utf8_lossy(&log).contains("waiting for the broker") {
        let n = tokio::time::timeout(Duration::from_secs(30), stderr.read(&mut chunk))
            .await
            .expect("the relay logs that it waits")
            .unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&log));
        log.extend_from_slice(&chunk[..n]);
    }
    let (took, code, out) = stop(child).await;
    stderr.read_to_end(&mut log).await.unwrap();
    let log = String::from_utf8(log).unwrap();
    assert_eq!(code, Some(0), "{out}{log}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(out.contains("stopped before it started"), "{out}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a piped log:\n{log}"
    );
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.split_whitespace()
                .any(|word| word.starts_with("inboxed") && word.contains("::")),
            "a line that names no component: {line}"
        );
    }
}
