//! Commit-to-confirm latency at a steady rate of one outbox row a transaction.

use std::time::Duration;

use lapin::options::QueueDeleteOptions;
use lapin::{Connection, ConnectionProperties};

use inboxed_core::Store;
use inboxed_core::outbox::{Outbox, OutboxRelay, OutgoingMessage};
use inboxed_core::store::BeginParams;
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitPublisher, RabbitPublisherConfig};

use super::{Args, UNSENT};

/// Commit-to-confirm latency at a steady rate, through RabbitMQ, the relay at its defaults.
pub(super) async fn latency(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    let queue = crate::rabbitmq::fresh_queue(&channel, "inboxed-bench-latency").await?;
    sqlx::query("TRUNCATE inboxed_outbox_messages")
        .execute(store.pool())
        .await?;
    let publisher =
        RabbitPublisher::connect(RabbitPublisherConfig::new(&args.broker.amqp_url)).await?;
    let mut config = args.relay();
    if let Some(n) = args.latency_batch {
        config = config.batch_size(n);
    }
    let relay = OutboxRelay::new(store.clone(), publisher, config);
    let total = (f64::from(args.rate) * args.latency_seconds) as u64;
    let writer = {
        let (store, queue, rate) = (store.clone(), queue.clone(), args.rate);
        async move {
            let outbox = Outbox::new(store.clone());
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut pending = tokio::task::JoinSet::new();
            for _ in 0..total {
                tick.tick().await;
                let (store, outbox, queue) = (store.clone(), outbox.clone(), queue.clone());
                // Each write is its own transaction, committed on a task of its own, so that a
                // slow commit does not hold back the rate.
                pending.spawn(async move {
                    let mut tx = store.begin(&BeginParams::default()).await?;
                    outbox
                        .write(&mut tx, &OutgoingMessage::new(queue, b"{}".to_vec()))
                        .await?;
                    tx.commit().await?;
                    Ok::<(), anyhow::Error>(())
                });
                while let Some(done) = pending.try_join_next() {
                    done??;
                }
            }
            while let Some(done) = pending.join_next().await {
                done??;
            }
            Ok::<(), anyhow::Error>(())
        }
    };
    let pool = store.pool().clone();
    let drained = async move {
        writer.await?;
        loop {
            let unsent: i64 = sqlx::query_scalar(UNSENT).fetch_one(&pool).await?;
            if unsent == 0 {
                return Ok::<(), anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let stop = async move {
        let _ = rx.await;
    };
    let (relayed, written) = tokio::join!(relay.run(stop), async {
        let r = drained.await;
        let _ = tx.send(());
        r
    });
    written?;
    relayed?;
    let (p50, p99, n): (f64, f64, i64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
                percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), count(*)
         FROM (SELECT extract(epoch FROM sent_at - created_at) * 1000 AS ms
               FROM inboxed_outbox_messages WHERE status = 'sent') t",
    )
    .fetch_one(store.pool())
    .await?;
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    println!(
        "| rate | rows | commit to confirm p50 | p99 |\n|---|---|---|---|\n| {} rows/s for {} s \
         | {n} | {p50:.1} ms | {p99:.1} ms |",
        args.rate, args.latency_seconds
    );
    println!(
        "(from each row's created_at, set inside its transaction just before the commit, to its \
         sent_at, set when the relay marks it after the broker's confirmation: the commit, the \
         NOTIFY, the claim, the publish, the confirm and the mark)"
    );
    Ok(())
}
