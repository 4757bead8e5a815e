//! The demo's store-then-process path: the same faulty broker feeds receipts (store, commit,
//! ack, as `inboxed relay` does), then workers claim the rows and run the same handler.

use std::collections::BTreeMap;
use std::time::Duration;

use inboxed_core::inbox::{Inbox, InboxStore, Relayed, Worker, WorkerConfig, relay_one};
use inboxed_core::observe::ObserveStore;
use inboxed_core::{Backoff, ConsumerName, FailureStreak, Handler};

use super::broker::{Broker, Fault};

/// Stores every delivery (with the broker's faults: a receipt may die at any moment before its
/// ack), then processes the rows with `workers` claim loops until none is pending or in
/// flight. Returns outcome counts.
pub(super) async fn run<S, H>(
    store: S,
    consumer: ConsumerName,
    handler: H,
    broker: &Broker,
    workers: usize,
) -> anyhow::Result<BTreeMap<&'static str, u64>>
where
    S: InboxStore + ObserveStore,
    H: Handler<S::Db>,
{
    let inbox = Inbox::new(store.clone(), consumer.clone());
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (inbox, broker) = (inbox.clone(), broker.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(2_000 + w as u64);
            let backoff = Backoff {
                base: Duration::from_millis(1),
                max: Duration::from_millis(20),
            };
            let streak = FailureStreak::default();
            let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
            while let Some((delivery, fault)) = broker.next().await {
                let index = delivery.index;
                let work = relay_one(&inbox, delivery, &backoff, &streak);
                let relayed = if fault == Fault::Crash {
                    let moment = Duration::from_micros(rng.u64(0..3_000));
                    tokio::select! {
                        relayed = work => relayed,
                        () = tokio::time::sleep(moment) => {
                            broker.crashed(index);
                            *counts.entry("crashed").or_default() += 1;
                            continue;
                        }
                    }
                } else {
                    work.await
                };
                let key = match relayed {
                    Ok(Relayed::Stored { .. }) => "stored",
                    Ok(Relayed::Duplicate) => "duplicate",
                    Ok(Relayed::Conflict) => "conflict",
                    Ok(Relayed::Invalid) => "invalid",
                    Ok(_) => "requeued",
                    Err(_) => "broker_error",
                };
                *counts.entry(key).or_default() += 1;
            }
            counts
        }));
    }
    let mut totals = BTreeMap::new();
    for t in tasks {
        for (k, v) in t.await? {
            *totals.entry(k).or_default() += v;
        }
    }
    let worker = Worker::new(
        store.clone(),
        consumer.clone(),
        handler,
        // One row per claim: every transfer touches two of a few hot accounts, and batches
        // holding many of them at once would mostly wait on each other.
        WorkerConfig::default().concurrency(workers).batch_size(1),
    );
    worker.run(drained(store, consumer)).await?;
    Ok(totals)
}

/// Resolves once `consumer` has no row pending or in flight.
async fn drained<S: ObserveStore>(store: S, consumer: ConsumerName) {
    loop {
        if let Ok(seen) = store.observe().await {
            let open = seen
                .backlog
                .iter()
                .find(|b| b.consumer == consumer.as_str())
                .map_or(0, |b| b.pending + b.processing);
            if open == 0 {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
