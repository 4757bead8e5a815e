//! Receipt in `inboxed-bench peer`: pgmq's `send_batch` against `Inbox::store_many`, 1,000
//! jobs a call, and (outside the smoke run) the [`ladder`](super::ladder)'s receipt rungs, each
//! with the server's CPU a job beside its rate.

use std::time::Instant;

use inboxed_postgres::PgStore;

use super::{PROCESSES, envelopes, into_inbox, into_pgmq, ladder, rate};
use crate::cpu::Cpu;

/// The receivers measured and each one's receipts, a round at a time.
pub(super) struct Receipts {
    names: Vec<&'static str>,
    rungs: bool,
    received: Vec<Vec<Received>>,
}

impl Receipts {
    /// The receivers; with `rungs`, the ladder's receipt rungs too (their table made afresh).
    pub(super) async fn new(pool: &sqlx::PgPool, rungs: bool) -> anyhow::Result<Self> {
        if rungs {
            ladder::receipt_setup(pool).await?;
        }
        let names: Vec<&'static str> = ["pgmq `send_batch`", "inboxed `Inbox::store_many`"]
            .into_iter()
            .chain(ladder::RECEIPT_RUNGS.into_iter().filter(|_| rungs))
            .collect();
        let received = vec![Vec::new(); names.len()];
        Ok(Self {
            names,
            rungs,
            received,
        })
    }

    /// One round of `jobs` jobs through each receiver, printed.
    pub(super) async fn round(
        &mut self,
        round: usize,
        url: &str,
        store: &PgStore,
        jobs: usize,
    ) -> anyhow::Result<()> {
        let n = self.names.len();
        let order = (0..n).map(|i| (i + round - 1) % n);
        let received = receipt(url, store, jobs, self.rungs, order).await?;
        let each: Vec<String> = self
            .names
            .iter()
            .zip(&received)
            .map(|(name, r)| {
                format!(
                    "{name} {:.0} jobs/s, server {:.1} µs a job",
                    r.rate, r.server_us
                )
            })
            .collect();
        println!(
            "- round {round}, receipt of {jobs} jobs, 1,000 a call: {}",
            each.join("; ")
        );
        for (all, r) in self.received.iter_mut().zip(received) {
            all.push(r);
        }
        Ok(())
    }

    /// The medians of the rounds, and each receiver's same-round ratio to pgmq.
    pub(super) fn print(&self) {
        println!();
        println!(
            "| receipt, 1,000 jobs a call (medians) | jobs/s | / pgmq (same round) | server µs a job |"
        );
        println!("|---|---|---|---|");
        for (name, received) in self.names.iter().zip(&self.received) {
            let ratio = crate::median(
                received
                    .iter()
                    .zip(&self.received[0])
                    .map(|(r, p)| r.rate / p.rate)
                    .collect(),
            );
            println!(
                "| {name} | {:.0} | {ratio:.2} | {:.1} |",
                crate::median(received.iter().map(|r| r.rate).collect()),
                crate::median(received.iter().map(|r| r.server_us).collect()),
            );
        }
    }
}

/// A receipt's rate and the server's CPU a job.
#[derive(Clone, Copy)]
struct Received {
    rate: f64,
    server_us: f64,
}

/// `receiving`, storing `jobs` jobs, timed.
async fn timed(
    jobs: usize,
    receiving: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Received> {
    let (cpu, started) = (Cpu::read(PROCESSES), Instant::now());
    receiving.await?;
    let took = started.elapsed();
    #[allow(clippy::cast_precision_loss, reason = "job counts")]
    let server_us = cpu.used(&Cpu::read(PROCESSES), "postgres") / jobs as f64 * 1e6;
    Ok(Received {
        rate: rate(jobs, took),
        server_us,
    })
}

/// `jobs` jobs through each receiver: pgmq's `send_batch`, `store_many`, and (with `rungs`)
/// the receipt's rungs below `store_many`, 1,000 a call each, in the order given (index 0
/// pgmq, 1 `store_many`, then the rungs), each into emptied tables; the results by receiver.
/// Rounds rotate the order, so that no receiver always follows the same one: what a receipt
/// leaves the server to do after it (an autovacuum of the rows just written, say) is charged
/// to each receiver in turn.
async fn receipt(
    url: &str,
    store: &PgStore,
    jobs: usize,
    rungs: bool,
    order: impl Iterator<Item = usize>,
) -> anyhow::Result<Vec<Received>> {
    let (queued, stored) = (super::jobs(jobs), envelopes(jobs)?);
    let mut received = Vec::new();
    for receiver in order {
        ladder::empty(store.pool(), rungs).await?;
        let took = match receiver {
            0 => timed(jobs, into_pgmq(url, &queued)).await?,
            1 => timed(jobs, into_inbox(store, &stored)).await?,
            rung => {
                let receiving = ladder::receipt(store.pool(), store, &stored, rung - 2);
                timed(jobs, receiving).await?
            }
        };
        received.push((receiver, took));
    }
    ladder::empty(store.pool(), rungs).await?;
    received.sort_by_key(|&(receiver, _)| receiver);
    Ok(received.into_iter().map(|(_, r)| r).collect())
}
