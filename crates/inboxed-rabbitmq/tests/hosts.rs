//! Three consumer hosts (network namespaces of the test's own, `inboxed_test::netns`) share
//! one PostgreSQL and one RabbitMQ. Each runs, in one process, a processor on a queue of
//! 4,000 messages and a store-then-process worker (and reaper) on 4,000 inbox rows. Half-way
//! through, host 1's link is cut: its connections are neither closed nor answered, in the
//! middle of transactions and commits. The others take over its unacknowledged deliveries
//! (once RabbitMQ misses its heartbeats) and its claimed rows (once their lease expires), and
//! its open transactions end when PostgreSQL's idle-in-transaction timeout ends its sessions.
//! Then the link is mended, and what host 1 does on waking changes nothing: every message and
//! every row is in the ledger exactly once.
//!
//! The test binary re-runs itself on each host: `INBOXED_HOST_PG` holds the database's URL.

use std::process::Stdio;
use std::time::{Duration, Instant};

use lapin::options::QueueDeleteOptions;
use tokio::io::{AsyncBufReadExt, BufReader};

use inboxed_core::inbox::{Inbox, Reaper, ReaperConfig, Worker, WorkerConfig};
use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, Processor, ProcessorConfig};
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{depth, publish_all, queue};
use inboxed_test::netns::{Forwarding, GATEWAY, Network, SUBNET, address};
use inboxed_test::restart::{MESSAGES, amount, ledger_by_prefix, ledger_counts, store_on};
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Ledger, Pg, Script};

const TEST: &str = "hosts::a_host_cut_off_mid_stream_loses_and_doubles_nothing";

/// How long a cut host's open transaction holds what it locked, on the processor's and the
/// worker's transactions alike. The default, 60 s, was run by hand (the last queued message
/// 60.1 s after the cut, none dead-lettered); 3 s keeps the test short.
const IDLE: Duration = Duration::from_secs(3);
/// The workers' lease (the default is 30 s).
const LEASE: Duration = Duration::from_secs(4);

/// One host: the processor on the queue and a worker and a reaper on the inbox rows, until
/// killed.
async fn host_main(pg: &str) {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name}"));
    let store = PgStore::connect(pg, 16).await.unwrap();
    let processor = Processor::with_config(
        store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
        ProcessorConfig::default().idle_in_transaction_timeout(IDLE),
    );
    let source = RabbitSource::connect(
        RabbitConfig::new(var("INBOXED_HOST_AMQP"), var("INBOXED_HOST_QUEUE")).prefetch(32),
    )
    .await
    .unwrap();
    let consumer = Consumer::new(processor, ConsumerConfig::default().concurrency(8));
    let consume = consumer.run(source, std::future::pending::<()>());
    let config = WorkerConfig::default()
        .lease(LEASE)
        .heartbeat(Duration::from_secs(1))
        .idle_in_transaction_timeout(IDLE);
    let worker = Worker::new(
        store.clone(),
        ConsumerName::new("stored").unwrap(),
        Ledger::<Pg>::default(),
        config,
    );
    let reaper = Reaper::new(store, ReaperConfig::default());
    println!("inboxed-host: ready");
    let (consumed, worked, ()) = tokio::join!(
        consume,
        worker.run(std::future::pending::<()>()),
        reaper.run(std::future::pending::<()>())
    );
    consumed.unwrap();
    worked.unwrap();
}

/// Sessions of `host` in `pg_stat_activity` inside a transaction (active or idle in one).
async fn in_transaction(url: &str, host: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let n = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE client_addr = $1::inet \
         AND state IN ('active', 'idle in transaction')",
    )
    .bind(host)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    n
}

/// What holds the stragglers: dead letters and their reasons, and host 1's sessions.
async fn state(store: &PgStore) -> String {
    let letters: Vec<(String, String)> = sqlx::query_as(
        "SELECT coalesce(message_id, ''), reason || ': ' || left(error, 120) \
         FROM inboxed_dead_letters LIMIT 5",
    )
    .fetch_all(store.pool())
    .await
    .unwrap_or_default();
    let sessions: Vec<(String, String)> = sqlx::query_as(
        "SELECT coalesce(state, ''), left(query, 80) FROM pg_stat_activity \
         WHERE client_addr = $1::inet",
    )
    .bind(address(1))
    .fetch_all(store.pool())
    .await
    .unwrap_or_default();
    format!("dead letters {letters:?}; host 1's sessions {sessions:?}")
}

#[tokio::test]
async fn a_host_cut_off_mid_stream_loses_and_doubles_nothing() {
    if let Ok(pg) = std::env::var("INBOXED_HOST_PG") {
        return host_main(&pg).await;
    }
    let net = Network::create(3);
    let mut pg = ThrowawayPg::start();
    pg.open_to(GATEWAY, SUBNET);
    let direct = store_on(&pg).await;
    let rabbit = Forwarding::to("127.0.0.1:5672".parse().unwrap()).await;
    let (channel, name) = queue(&amqp_url()).await;
    // Each handler holds its transaction open after writing (20 ms for a queued message, 5 for
    // a stored row, which a worker runs in batches): the cut finds host 1 inside several.
    let slow = |id: String, i: i64, sleep_ms: u64| {
        Script {
            amount: amount(i),
            sleep_ms,
            ..Script::default()
        }
        .message(&id)
    };
    publish_all(
        &channel,
        &name,
        (0..MESSAGES).map(|i| slow(format!("q-{i}"), i, 20)),
    )
    .await;
    let inbox = Inbox::new(direct.clone(), ConsumerName::new("stored").unwrap());
    let rows: Vec<_> = (0..MESSAGES)
        .map(|i| slow(format!("s-{i}"), i, 5))
        .collect();
    for chunk in rows.chunks(500) {
        inbox.store_many(chunk).await.unwrap();
    }

    let exe = std::env::current_exe().unwrap();
    let mut hosts = Vec::new();
    for n in 1..=3 {
        let mut child = net
            .command(n, exe.to_str().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(
                "INBOXED_HOST_PG",
                format!("postgres://postgres@{GATEWAY}:{}/postgres", pg.port()),
            )
            .env(
                "INBOXED_HOST_AMQP",
                // RabbitMQ closes a connection after two missed heartbeats.
                format!(
                    "amqp://guest:guest@{GATEWAY}:{}/%2f?heartbeat=2",
                    rabbit.port
                ),
            )
            .env("INBOXED_HOST_QUEUE", &name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("inboxed-host: ready") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(ready, Ok(true), "host {n} started");
        // Read on, so that the host never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        hosts.push(child);
    }

    let total = 2 * MESSAGES;
    let rows = || async { ledger_counts(&pg.url()).await.map_or(0, |(r, _)| r) };
    let deadline = Instant::now() + Duration::from_secs(150);
    while rows().await < total / 4 {
        assert!(Instant::now() < deadline, "no progress before the cut");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = rows().await;
    net.cut(1);
    let cut = Instant::now();
    let open = in_transaction(&pg.url(), &address(1)).await;
    // When each part was whole again: the queue's messages, the inbox rows.
    let mut whole = (None, None);
    while whole.0.is_none() || whole.1.is_none() {
        assert!(
            Instant::now() < deadline,
            "stuck at {:?} of {MESSAGES} each after the cut; {}",
            ledger_by_prefix(&direct, "q", "s").await,
            state(&direct).await
        );
        let (queued, stored) = ledger_by_prefix(&direct, "q", "s").await;
        if queued == MESSAGES {
            whole.0.get_or_insert(cut.elapsed());
        }
        if stored == MESSAGES {
            whole.1.get_or_insert(cut.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left_open = in_transaction(&pg.url(), &address(1)).await;
    net.mend(1);
    // Host 1 wakes: its acks, commits and completions find their sessions, channels and
    // leases gone.
    tokio::time::sleep(Duration::from_secs(5)).await;

    for mut host in hosts {
        host.kill().await.unwrap();
    }
    let (ledger, distinct) = ledger_counts(&pg.url()).await.unwrap();
    let pool = direct.pool();
    let sum: i64 = sqlx::query_scalar("SELECT sum(amount)::bigint FROM ledger")
        .fetch_one(pool)
        .await
        .unwrap();
    let not_done: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE status <> 'done'")
            .fetch_one(pool)
            .await
            .unwrap();
    let letters: i64 = sqlx::query_scalar("SELECT count(*) FROM inboxed_dead_letters")
        .fetch_one(pool)
        .await
        .unwrap();
    eprintln!(
        "three hosts, host 1 cut at {before} of {total} rows with {open} sessions in a \
         transaction; the others had every queued message {:?} later and every stored row \
         {:?} later; {left_open} of host 1's sessions still in a transaction then",
        whole.0.unwrap(),
        whole.1.unwrap()
    );
    assert_eq!(
        (ledger, distinct, sum),
        (total, total, 2 * (0..MESSAGES).map(amount).sum::<i64>()),
        "ledger audit"
    );
    assert_eq!(
        (not_done, letters),
        (0, 0),
        "every row done, no dead letter"
    );
    assert_eq!(depth(&channel, &name).await, 0, "the queue drained");
    assert!(open > 0, "host 1 was cut off inside a transaction");
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
