//! A handler's cost of one outbox row: with it (notifying, quiet) against without it.

use std::time::Duration;

use sqlx::{PgConnection, Postgres};

use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, MessageId, Outcome, Processor};
use inboxed_postgres::PgStore;

use super::{ACCOUNTS, Args};
use crate::variants::Credit;

/// [`Credit`] plus one outbox row per message, in the same transaction.
struct CreditAndNotify {
    credit: Credit,
    outbox: Outbox<PgStore>,
}

impl Handler<Postgres> for CreditAndNotify {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.credit.handle(msg, conn).await?;
        let out = OutgoingMessage::new("billing.credited", msg.payload().to_vec()).caused_by(msg);
        self.outbox.write(conn, &out).await?;
        Ok(())
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut PgConnection,
    ) -> Result<(), HandlerError> {
        self.credit.handle_batch(msgs, conn).await?;
        let out: Vec<OutgoingMessage> = msgs
            .iter()
            .map(|msg| {
                OutgoingMessage::new("billing.credited", msg.payload().to_vec()).caused_by(msg)
            })
            .collect();
        self.outbox.write_many(conn, &out).await?;
        Ok(())
    }
}

fn fresh(n: usize) -> Vec<Envelope> {
    (0..n)
        .map(|_| {
            Envelope::new(
                MessageId::from_uuid(uuid::Uuid::now_v7()),
                b"{\"credit\":1}".to_vec(),
            )
        })
        .collect()
}

/// Messages a second through `processor`, one a transaction or in batches.
async fn drive<H: Handler<Postgres>>(
    processor: &Processor<PgStore, H>,
    workers: usize,
    batch: Option<usize>,
    dur: Duration,
) -> anyhow::Result<f64> {
    let processor = processor.clone();
    let (n, secs) = crate::load::for_duration(workers, dur, move || {
        let processor = processor.clone();
        async move {
            match batch {
                None => {
                    let env = &fresh(1)[0];
                    anyhow::ensure!(processor.process(env, Some(1)).await? == Outcome::Processed);
                    Ok(1)
                }
                Some(n) => {
                    let msgs = fresh(n);
                    let counts = vec![Some(1); n];
                    for r in processor.process_batch_with_counts(&msgs, &counts).await {
                        anyhow::ensure!(r? == Outcome::Processed);
                    }
                    Ok(n as u64)
                }
            }
        }
    })
    .await?;
    Ok(n as f64 / secs)
}

/// A handler with one outbox row against the same handler without it: the outbox waking the
/// relays at each commit (the default), and a quiet one (the relays poll).
pub(super) async fn handler_cost(store: &PgStore, args: &Args) -> anyhow::Result<()> {
    let consumer = ConsumerName::new("bench")?;
    let plain = Processor::new(
        store.clone(),
        consumer.clone(),
        Credit { accounts: ACCOUNTS },
    );
    plain.ensure_ready().await?;
    let outbox = Outbox::new(store.clone()).for_consumer(consumer.clone());
    let with = |outbox: Outbox<PgStore>| {
        Processor::new(
            store.clone(),
            consumer.clone(),
            CreditAndNotify {
                credit: Credit { accounts: ACCOUNTS },
                outbox,
            },
        )
    };
    let (notifying, quiet) = (with(outbox.clone()), with(outbox.quiet()));
    let dur = Duration::from_secs_f64(args.seconds);
    // (batch, [with, quiet, without] msg/s)
    let mut results: Vec<(Option<usize>, [f64; 3])> = Vec::new();
    for round in 0..args.rounds {
        for batch in [None, Some(args.batch)] {
            let mut row = [0.0; 3];
            for k in 0..3 {
                let i = (k + round) % 3;
                row[i] = match i {
                    0 => drive(&notifying, args.workers, batch, dur).await?,
                    1 => drive(&quiet, args.workers, batch, dur).await?,
                    _ => drive(&plain, args.workers, batch, dur).await?,
                };
                // The rows written stay unsent: cleared so that the table does not grow
                // across measurements.
                sqlx::query("TRUNCATE inboxed_outbox_messages")
                    .execute(store.pool())
                    .await?;
            }
            println!(
                "round {}, {}: with one outbox row {:.0} msg/s, quiet {:.0} msg/s, without {:.0} \
                 msg/s",
                round + 1,
                label(batch),
                row[0],
                row[1],
                row[2]
            );
            results.push((batch, row));
        }
    }
    println!();
    println!(
        "| processing | with one outbox row msg/s | quiet (no NOTIFY) msg/s | without msg/s | \
         with / without | quiet / without |"
    );
    println!("|---|---|---|---|---|---|");
    for batch in [None, Some(args.batch)] {
        let of = |f: &dyn Fn(&[f64; 3]) -> f64| {
            crate::median(
                results
                    .iter()
                    .filter(|r| r.0 == batch)
                    .map(|r| f(&r.1))
                    .collect(),
            )
        };
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            label(batch),
            of(&|r| r[0]),
            of(&|r| r[1]),
            of(&|r| r[2]),
            of(&|r| r[0] / r[2]),
            of(&|r| r[1] / r[2])
        );
    }
    println!();
    Ok(())
}

fn label(batch: Option<usize>) -> String {
    batch.map_or_else(
        || "one a transaction".to_owned(),
        |n| format!("batches of {n} (`write_many`)"),
    )
}
