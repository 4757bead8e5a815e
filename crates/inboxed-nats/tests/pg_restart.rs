//! PostgreSQL crashed (`pg_ctl stop -m immediate`) and restarted in the middle of a
//! 10,000-message JetStream stream: transactions cut by the crash roll back, their messages are
//! nak'ed and redelivered, the pool reconnects, and a ledger audit finds every message applied
//! exactly once. The database is a throwaway cluster of the test's own.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use sqlx::postgres::PgPoolOptions;

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, KeySource, Processor, Store};
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_postgres::PgStore;
use inboxed_test::backend::LEDGER;
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Ledger, Pg, credit};

const MESSAGES: i64 = 10_000;

fn nats_url() -> String {
    std::env::var("INBOXED_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// Rows in the ledger, or `None` while the server is down.
async fn ledger_rows(url: &str) -> Option<i64> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(1))
        .connect(url)
        .await
        .ok()?;
    let n = sqlx::query_scalar("SELECT count(*) FROM ledger")
        .fetch_one(&pool)
        .await
        .ok();
    pool.close().await;
    n
}

#[tokio::test]
async fn postgres_crashed_and_restarted_mid_stream_loses_and_repeats_nothing() {
    let pg = ThrowawayPg::start();
    let url = pg.url();
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&url)
        .await
        .unwrap();
    sqlx::raw_sql(LEDGER).execute(&pool).await.unwrap();
    let store = PgStore::new(pool);
    store.migrate().await.unwrap();

    let js = jetstream::new(async_nats::connect(nats_url()).await.unwrap());
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (name, subject) = (
        format!("INBOXED_PGRESTART_{tag}"),
        format!("inboxed.pgrestart.{tag}"),
    );
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        storage: jetstream::stream::StorageType::File,
        ..jetstream::stream::Config::default()
    })
    .await
    .unwrap();
    let mut acks = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("p-{i}");
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let body = credit(&id, i % 5 + 1).payload().to_vec();
        acks.push(
            js.publish_with_headers(subject.clone(), headers, body.into())
                .await
                .unwrap(),
        );
        if acks.len() == 256 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }

    let config = NatsConfig::new(nats_url(), &name, "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(5))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    let processor = Processor::new(
        store,
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consuming = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default().concurrency(16))
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });

    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    while ledger_rows(&url).await.unwrap_or(0) < MESSAGES / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress before the crash"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pg.crash();
    tokio::time::sleep(Duration::from_secs(1)).await;
    pg.restart();
    let after = ledger_rows(&url).await.unwrap();
    eprintln!("pg restart test: {after} rows committed before the crash");

    while ledger_rows(&url).await.unwrap_or(0) < MESSAGES {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stuck at {:?} of {MESSAGES} after the restart",
            ledger_rows(&url).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.send(()).unwrap();
    consuming.await.unwrap().unwrap();

    let pool = PgPoolOptions::new().connect(&url).await.unwrap();
    let (rows, distinct, sum): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT message_id), coalesce(sum(amount), 0)::bigint FROM ledger",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let expected: i64 = (0..MESSAGES).map(|i| i % 5 + 1).sum();
    assert!(after < MESSAGES, "the crash came mid-stream ({after})");
    assert_eq!(
        (rows, distinct, sum),
        (MESSAGES, MESSAGES, expected),
        "ledger audit"
    );
    js.delete_stream(&name).await.unwrap();
}
