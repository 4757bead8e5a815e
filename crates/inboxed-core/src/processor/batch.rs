//! Several messages in one inbox transaction: the claims, one call of the batch handler, one
//! commit. On a small machine the commit's flush is most of what a short message costs, so N
//! messages sharing it cost far less than N transactions.

use std::collections::{HashMap, HashSet};

use tracing::{Instrument, debug, warn};

use super::Processor;
use crate::config::AttemptCounting;
use crate::driver::{Driver, Transaction as _};
use crate::envelope::{Envelope, MessageId};
use crate::error::Error;
use crate::handler::{Handler, call_guarded_batch};
use crate::processor::Outcome;
use crate::store::{Claim, Store};
use crate::trace::spans;

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    /// Processes `batch` with one transaction and one commit, and returns one result per
    /// message, in order; each means what [`Processor::process`]'s does (`Ok`: ack it).
    ///
    /// The attempts of all its keys are counted first, in one committed statement, so a
    /// message that kills the process mid-batch still reaches the dead-letter path. Then, in
    /// one transaction, every key is claimed (in key order, so that concurrent batches with
    /// shared keys cannot deadlock), the fresh messages go to [`Handler::handle_batch`] in the
    /// order given, and the transaction commits once. Duplicates, conflicts and dead-lettered
    /// keys are settled as by `process`; a key given twice is processed once, the second copy
    /// settling as a duplicate.
    ///
    /// One failing message must not take its batch-mates down: when anything in the batch
    /// transaction fails (a handler, a claim, the commit), it is rolled back and each message
    /// is processed in a transaction of its own, where only the failing one is retried or
    /// dead-lettered. A batch with a key tried before (its batch crashed or failed) goes one
    /// message at a time from the start, the least tried first, each counted only when it is
    /// reached: later crashes are charged to the message that causes them. A crashed batch
    /// charges one attempt to each of its messages, as a crash does to every message in
    /// flight on the single path. The handler may therefore run twice for a message of a failed
    /// batch; only one run commits.
    ///
    /// An operator's redrive for this consumer ([`Envelope::redrive_for`]) takes the single
    /// path. The caller bounds the batch: its keys are claimed, and on PostgreSQL's
    /// partitioned store locked, in one transaction, and the handler's deadline is
    /// `handler_timeout` times its size.
    pub async fn process_batch(&self, batch: &[Envelope]) -> Vec<Result<Outcome, Error>> {
        self.process_batch_with_counts(batch, &[]).await
    }

    /// [`Processor::process_batch`] for messages a broker delivered with delivery counts
    /// (`delivery_counts[i]` is `batch[i]`'s; missing entries count as unknown).
    ///
    /// When every message is on its first delivery (a count of 1), no earlier run of this
    /// batch can have crashed, so the counting statement and its commit are skipped: the batch
    /// costs one transaction. If that transaction fails, each message goes through
    /// [`Processor::process`] with its count, as a consumer without batches would. A batch
    /// with any redelivered or uncounted message is counted in the store, as by
    /// `process_batch`, which is what charges a crash to the message that caused it: after a
    /// crash the broker counts every message of the batch again, the store only the one that
    /// was running.
    pub async fn process_batch_with_counts(
        &self,
        batch: &[Envelope],
        delivery_counts: &[Option<u32>],
    ) -> Vec<Result<Outcome, Error>> {
        let first = (0..batch.len()).all(|i| delivery_counts.get(i) == Some(&Some(1)));
        let run = BatchRun {
            counts: delivery_counts,
            first_delivery: first,
            ordered: false,
            system: None,
        };
        let results = self.run_batch(batch, &run).await;
        results.into_iter().flatten().collect()
    }

    /// The batch path behind the public calls and the consumer loop. `run.first_delivery`
    /// says the broker delivered every message for the first time (RabbitMQ knows it without
    /// counting); it only takes effect with [`AttemptCounting::Auto`]. With `run.ordered` (a
    /// Kafka partition), a batch that cannot go together is processed in the order given, and
    /// stops at its first failure: the failed message and everything after it are left `None`
    /// for the caller to retry in place, in order.
    pub(crate) async fn run_batch(
        &self,
        batch: &[Envelope],
        run: &BatchRun<'_>,
    ) -> Vec<Option<Result<Outcome, Error>>> {
        let count_of = |i: usize| run.counts.get(i).copied().flatten();
        let first_delivery =
            run.first_delivery && self.inner.config.attempt_counting == AttemptCounting::Auto;
        // The first copy of each key is processed; later copies settle after it. An operator's
        // redrive for this consumer takes the single path, which lifts the dead letter inside
        // its transaction.
        let consumer = self.inner.consumer.as_str();
        let mut seen = HashSet::new();
        let firsts: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].redrive_for() != Some(consumer))
            .filter(|&i| seen.insert(batch[i].id().as_str()))
            .collect();
        let mut results: Vec<Option<Result<Outcome, Error>>> =
            (0..batch.len()).map(|_| None).collect();
        // What is left after the batch transaction, in the order to run it: each message
        // with the count it goes with (`Counted`: this run's count from the store; `Broker`:
        // the broker's, or `None` to be counted when it is reached).
        // Shared while the batch's attempts are counted, its transaction runs and the messages
        // it counted run one by one: a crash then is charged to what was counted (see
        // `CrashAttribution`). Let go before a message that takes a turn of its own.
        let mut shared = Some(self.inner.config.crash_attribution.shared().await);
        let span = spans::process_batch(
            run.system,
            &self.inner.consumer,
            firsts.iter().map(|&i| &batch[i]),
            firsts.len(),
        );
        let together = self
            .together(batch, &firsts, first_delivery, &count_of)
            .instrument(span)
            .await;
        let mut steps: Vec<(usize, Step)> = match together {
            Together::Settled(settled) => {
                for (&i, result) in firsts.iter().zip(settled) {
                    self.count(&batch[i], &result);
                    results[i] = Some(result);
                }
                Vec::new()
            }
            Together::Counted(counts) => firsts
                .iter()
                .map(|&i| {
                    let attempt = counts.get(batch[i].id().as_str()).copied().unwrap_or(1);
                    (i, Step::Counted(attempt))
                })
                .collect(),
            Together::OneByOne(mut order) => {
                if run.ordered {
                    order.sort_unstable();
                }
                order
                    .into_iter()
                    .map(|i| (i, Step::Broker(count_of(i))))
                    .collect()
            }
            Together::Delivered => firsts
                .iter()
                .map(|&i| (i, Step::Broker(count_of(i))))
                .collect(),
            // The database is not answering: each message on its own, with its own error.
            Together::Unread => Vec::new(),
        };
        // Then later copies of a key, which see their first copy settled (a duplicate, the
        // same dead letter, or a conflict when the payload differs), redrives, and whatever
        // the database did not answer for.
        let mut planned = vec![false; batch.len()];
        for (i, _) in &steps {
            planned[*i] = true;
        }
        steps.extend(
            (0..batch.len())
                .filter(|&i| !planned[i] && results[i].is_none())
                .map(|i| (i, Step::Broker(count_of(i)))),
        );
        for (i, step) in steps {
            let result = match step {
                Step::Counted(attempt) => {
                    let consumer = &self.inner.consumer;
                    let span = spans::process(run.system, consumer, &batch[i], None, attempt <= 1);
                    let result = self
                        .process_counted(&batch[i], attempt, false)
                        .instrument(span.clone())
                        .await;
                    spans::settled(&span, &result);
                    self.count(&batch[i], &result);
                    result
                }
                Step::Broker(count) => {
                    shared.take();
                    self.process_as(&batch[i], count, false, run.system).await
                }
            };
            let failed = result.is_err();
            results[i] = Some(result);
            // In order, the rest is left to the caller, to retry in place.
            if failed && run.ordered {
                break;
            }
        }
        results
    }

    /// Runs the keys at `firsts` in one transaction, unless one of them was tried before.
    /// `first_delivery`: the broker delivered each of them for the first time; `count_of`,
    /// the broker's count of each.
    async fn together(
        &self,
        batch: &[Envelope],
        firsts: &[usize],
        first_delivery: bool,
        count_of: &impl Fn(usize) -> Option<u32>,
    ) -> Together {
        if firsts.is_empty() || self.ensure_ready().await.is_err() {
            return Together::Unread;
        }
        if first_delivery {
            return match self.batch_transaction(batch, firsts).await {
                Some(claims) => Together::Settled(self.settle_all(batch, firsts, claims).await),
                None => Together::Delivered,
            };
        }
        let inner = &*self.inner;
        let ids: Vec<&MessageId> = firsts.iter().map(|&i| batch[i].id()).collect();
        // Tried before (a crash took an earlier batch down, or a failure sent it one by one):
        // one message at a time, each counted only when it is reached, so that only the one
        // that crashes is charged for the crashes; the least tried first, so that its
        // batch-mates are applied before a suspect is tried again.
        let tried = self
            .with_contention_retries(|| inner.store.load_attempts(&inner.consumer, &ids))
            .await;
        let tried = match tried {
            Ok(tried) => tried,
            Err(e) => {
                warn!(error = %e, "could not read a batch's attempts; processing it one by one");
                return Together::Unread;
            }
        };
        if !tried.is_empty() {
            let tried: HashMap<String, u32> = tried.into_iter().collect();
            let mut order = firsts.to_vec();
            order.sort_by_key(|&i| tried.get(batch[i].id().as_str()).copied().unwrap_or(0));
            return Together::OneByOne(order);
        }
        // Counted as on the single path ([`AttemptCounting::Auto`]): a first delivery by the
        // broker's count writes nothing and is attempt 1; a redelivery is the store's count
        // plus that uncounted first delivery; without a count, the store's count.
        let auto = inner.config.attempt_counting == AttemptCounting::Auto;
        let (fresh, counted): (Vec<usize>, Vec<usize>) = firsts
            .iter()
            .partition(|&&i| auto && count_of(i).is_some_and(|n| n <= 1));
        let ids: Vec<&MessageId> = counted.iter().map(|&i| batch[i].id()).collect();
        let recorded = if ids.is_empty() {
            Ok(Vec::new())
        } else {
            self.with_contention_retries(|| inner.store.record_attempts(&inner.consumer, &ids))
                .await
        };
        let recorded: HashMap<String, u32> = match recorded {
            Ok(counts) => counts.into_iter().collect(),
            Err(e) => {
                warn!(error = %e, "could not count a batch's attempts; processing it one by one");
                return Together::Unread;
            }
        };
        // A concurrent delivery of a key counted it meanwhile: one by one, as counted.
        let raced = recorded.values().any(|&n| n > 1);
        let mut counts: HashMap<String, u32> = fresh
            .iter()
            .map(|&i| (batch[i].id().as_str().to_owned(), 1))
            .collect();
        for &i in &counted {
            let key = batch[i].id().as_str();
            let store = recorded.get(key).copied().unwrap_or(1);
            let first = u32::from(auto && count_of(i).is_some_and(|n| n > 1));
            counts.insert(key.to_owned(), store + first);
        }
        if raced {
            return Together::Counted(counts);
        }
        let Some(claims) = self.batch_transaction(batch, firsts).await else {
            return Together::Counted(counts);
        };
        Together::Settled(self.settle_all(batch, firsts, claims).await)
    }

    /// The outcome of each committed claim, in the order of `firsts`.
    async fn settle_all(
        &self,
        batch: &[Envelope],
        firsts: &[usize],
        claims: Vec<Claim>,
    ) -> Vec<Result<Outcome, Error>> {
        let mut settled = Vec::with_capacity(claims.len());
        for (&i, claim) in firsts.iter().zip(claims) {
            settled.push(self.settle_claim(&batch[i], claim).await);
        }
        settled
    }

    /// The batch's one transaction; the claims in the order of `firsts`, or `None` when
    /// anything failed (rolled back; the messages are then processed one by one, where each
    /// failure is reported).
    async fn batch_transaction(&self, batch: &[Envelope], firsts: &[usize]) -> Option<Vec<Claim>> {
        match self.try_batch(batch, firsts).await {
            Ok(claims) => Some(claims),
            // A handler failing is what the one-by-one pass is for; the store failing is not.
            Err(e @ Error::Handler { .. }) => {
                debug!(error = %e, size = firsts.len(), "batch handler failed; processing its messages one by one");
                None
            }
            Err(e) => {
                warn!(error = %e, size = firsts.len(), "batch transaction failed; processing its messages one by one");
                None
            }
        }
    }

    async fn try_batch(&self, batch: &[Envelope], firsts: &[usize]) -> Result<Vec<Claim>, Error> {
        let inner = &*self.inner;
        let ids: Vec<&str> = firsts.iter().map(|&i| batch[i].id().as_str()).collect();
        let mut tx = inner
            .store
            .begin_claims(&inner.config.begin_params(), &inner.consumer, &ids)
            .await?;
        match self.in_batch(&mut tx, batch, firsts).await {
            Ok(claims) => {
                tx.commit().await?;
                Ok(claims)
            }
            Err(e) => {
                // Now, not whenever the pool next touches the connection: the claims' row
                // locks go at once, so waiting duplicates and the one-by-one pass proceed.
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    /// The batch's statements inside `tx`: the claims in key order, the handler on the fresh
    /// messages in the order given, and each key's attempt counter forgotten.
    async fn in_batch(
        &self,
        tx: &mut <S::Db as Driver>::Transaction,
        batch: &[Envelope],
        firsts: &[usize],
    ) -> Result<Vec<Claim>, Error> {
        let inner = &*self.inner;
        let mut order: Vec<usize> = firsts.to_vec();
        order.sort_by(|&a, &b| batch[a].id().as_str().cmp(batch[b].id().as_str()));
        let envelopes: Vec<&Envelope> = order.iter().map(|&i| &batch[i]).collect();
        let found = inner
            .store
            .claim_many(&mut **tx, &inner.consumer, &envelopes)
            .await?;
        let mut claims: HashMap<usize, Claim> = order.iter().copied().zip(found).collect();
        let fresh: Vec<&Envelope> = firsts
            .iter()
            .filter(|i| claims.get(i) == Some(&Claim::New))
            .map(|&i| &batch[i])
            .collect();
        if !fresh.is_empty() {
            let timeout = inner.config.handler_timeout;
            call_guarded_batch(&inner.handler, &fresh, &mut **tx, timeout)
                .await
                .map_err(|source| Error::Handler {
                    consumer: inner.consumer.clone(),
                    attempt: 1,
                    source,
                })?;
        }
        // As in the single path: forget the keys' attempts, which also probes for a handler
        // that swallowed a failed statement (the transaction is then aborted).
        let ids: Vec<&MessageId> = envelopes.iter().map(|e| e.id()).collect();
        inner
            .store
            .clear_many_attempts(&mut **tx, &inner.consumer, &ids)
            .await?;
        Ok(firsts.iter().filter_map(|i| claims.remove(i)).collect())
    }
}

/// How one message of a batch that did not go together is processed.
enum Step {
    /// With this run's count from the store.
    Counted(u32),
    /// As on the single path, with the broker's count (`None`: counted when reached).
    Broker(Option<u32>),
}

/// How [`Processor::run_batch`] runs a batch.
pub(crate) struct BatchRun<'a> {
    /// The broker's delivery count of each message, in order (missing: unknown).
    pub(crate) counts: &'a [Option<u32>],
    /// Every message is on its first delivery.
    pub(crate) first_delivery: bool,
    /// Keep the given order when messages go one by one, and stop at the first failure.
    pub(crate) ordered: bool,
    /// The broker, for the spans.
    pub(crate) system: Option<&'static str>,
}

/// How much of a batch ran together.
enum Together {
    /// In one transaction: the results of the first copies, in order.
    Settled(Vec<Result<Outcome, Error>>),
    /// This delivery's attempts were counted (the attempt of each key, as the single path
    /// counts it), but the batch failed or raced: one by one, with those attempts.
    Counted(HashMap<String, u32>),
    /// Tried before: one by one in this order (the least tried first), each counted when it
    /// is reached.
    OneByOne(Vec<usize>),
    /// The database did not answer: each message goes through `process` on its own.
    Unread,
    /// A batch of first deliveries failed: each message goes through `process` with its
    /// broker's count.
    Delivered,
}
