//! The kit: the user's store, handler, reset and probe, and what every check shares (a fresh
//! consumer per run, deliveries until a message settles, the state one delivery leaves).

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use inboxed_core::inbox::WorkerConfig;
use inboxed_core::{
    BoxError, ConsumerName, Envelope, Error, Handler, Outcome, Processor, ProcessorConfig, Store,
};

use crate::failure::CheckFailure;
use crate::fault::{Fault, Faulty};

/// A user's function of the store: the reset or the probe.
type StateFn<S, T> =
    Arc<dyn Fn(S) -> Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>> + Send + Sync>;

/// How hard the checks push. Every field says its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KitConfig {
    /// Deliveries of one message in [`Kit::sequential_duplicates`] (the state is compared
    /// after the second and after the last). Defaults to 5.
    pub deliveries: usize,
    /// Copies of a message released together in [`Kit::concurrent_duplicates`]. Each takes a
    /// connection of the store's pool, which must hold at least this many (and as many as the
    /// messages given to [`Kit::concurrent_messages`]); a smaller pool runs them partly one
    /// after another, and the race proves less. Defaults to 4.
    pub copies: usize,
    /// Rounds of [`Kit::concurrent_messages`]: an interleaving that loses an update does not
    /// happen every time. Defaults to 3.
    pub rounds: usize,
    /// How long the first holder of a key keeps its transaction open before it rolls back in
    /// [`Kit::first_holder_rolls_back`], so that the other copies are waiting on its claim;
    /// how long each message's transaction stays open after its handler in
    /// [`Kit::concurrent_messages`], so that they overlap however fast the handler is; and how
    /// long a handler runs on after its lease expired in [`Kit::worker_lease_expires`].
    /// Defaults to 200 ms.
    pub hold: Duration,
    /// The processor's settings for every delivery, `max_attempts` included (which
    /// [`Kit::poison`] delivers up to). Defaults to [`ProcessorConfig::default`].
    pub processor: ProcessorConfig,
    /// The workers' settings in the `worker_*` checks (`max_attempts` and `claim_mode`
    /// included: set `ClaimMode::LockHeld` to check a handler run by lock-held workers); their
    /// retries are never delayed there. Defaults to [`WorkerConfig::default`].
    pub worker: WorkerConfig,
}

impl Default for KitConfig {
    fn default() -> Self {
        Self {
            deliveries: 5,
            copies: 4,
            rounds: 3,
            hold: Duration::from_millis(200),
            processor: ProcessorConfig::default(),
            worker: WorkerConfig::default(),
        }
    }
}

impl KitConfig {
    /// Sets [`KitConfig::deliveries`].
    #[must_use]
    pub fn deliveries(mut self, deliveries: usize) -> Self {
        self.deliveries = deliveries;
        self
    }

    /// Sets [`KitConfig::copies`].
    #[must_use]
    pub fn copies(mut self, copies: usize) -> Self {
        self.copies = copies;
        self
    }

    /// Sets [`KitConfig::rounds`].
    #[must_use]
    pub fn rounds(mut self, rounds: usize) -> Self {
        self.rounds = rounds;
        self
    }

    /// Sets [`KitConfig::hold`].
    #[must_use]
    pub fn hold(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// Sets [`KitConfig::processor`].
    #[must_use]
    pub fn processor(mut self, processor: ProcessorConfig) -> Self {
        self.processor = processor;
        self
    }

    /// Sets [`KitConfig::worker`].
    #[must_use]
    pub fn worker(mut self, worker: WorkerConfig) -> Self {
        self.worker = worker;
        self
    }
}

/// Checks for one handler on one database: each runs the library's real processor against the
/// real engine, and compares the business state the `probe` reads after an attack with the
/// state one plain delivery leaves.
///
/// The `reset` puts the business tables back as every run starts (a delete, a truncate, a
/// known balance); the kit never touches them itself. Each run takes a consumer name of its
/// own, so the inbox's tables need no reset. Run the checks of one database one after another,
/// not side by side: each resets the state the others compare.
pub struct Kit<S, H, T> {
    pub(crate) store: S,
    pub(crate) handler: Arc<H>,
    reset: StateFn<S, ()>,
    probe: StateFn<S, T>,
    pub(crate) config: KitConfig,
    /// Set once the store's tables are migrated (at the first reset).
    migrated: tokio::sync::OnceCell<()>,
}

impl<S: Debug, H, T> Debug for Kit<S, H, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kit")
            .field("store", &self.store)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, H, T> Kit<S, H, T> {
    /// The [`KitConfig`] in use.
    #[must_use]
    pub fn config(&self) -> &KitConfig {
        &self.config
    }

    /// Replaces the [`KitConfig`].
    #[must_use]
    pub fn with_config(mut self, config: KitConfig) -> Self {
        self.config = config;
        self
    }
}

impl<S, H, T> Kit<S, H, T>
where
    S: Store + Clone + Send + Sync + 'static,
    H: Handler<S::Db>,
    T: PartialEq + Debug + Send + 'static,
{
    /// The checks for `handler` on `store` (whose tables the kit migrates at the first run),
    /// with the default [`KitConfig`].
    pub fn new<R, RF, RE, P, PF, PE>(store: S, handler: H, reset: R, probe: P) -> Self
    where
        R: Fn(S) -> RF + Send + Sync + 'static,
        RF: Future<Output = Result<(), RE>> + Send + 'static,
        RE: Into<BoxError>,
        P: Fn(S) -> PF + Send + Sync + 'static,
        PF: Future<Output = Result<T, PE>> + Send + 'static,
        PE: Into<BoxError>,
    {
        Self {
            store,
            handler: Arc::new(handler),
            reset: Arc::new(move |s| {
                let f = reset(s);
                Box::pin(async move { f.await.map_err(Into::into) })
            }),
            probe: Arc::new(move |s| {
                let f = probe(s);
                Box::pin(async move { f.await.map_err(Into::into) })
            }),
            config: KitConfig::default(),
            migrated: tokio::sync::OnceCell::new(),
        }
    }

    /// Resets the business state, under `check`'s name when it fails; the first reset
    /// migrates the store's tables first.
    pub(crate) async fn reset(&self, check: &'static str) -> Result<(), CheckFailure> {
        self.migrated
            .get_or_try_init(|| async { self.store.migrate().await.map(drop) })
            .await
            .map_err(|e| CheckFailure::broken(check, format!("the migrations failed: {e}")))?;
        (self.reset)(self.store.clone())
            .await
            .map_err(|e| CheckFailure::broken(check, format!("the reset failed: {e}")))
    }

    /// The business state now.
    pub(crate) async fn probe(&self, check: &'static str) -> Result<T, CheckFailure> {
        (self.probe)(self.store.clone())
            .await
            .map_err(|e| CheckFailure::broken(check, format!("the probe failed: {e}")))
    }

    /// A processor of a consumer of its own (`inboxed-testkit-<check>-<random>`), whose
    /// handler is the user's with `fault` after it.
    pub(crate) fn processor(&self, check: &str, fault: Fault) -> Processor<S, Faulty<H>> {
        self.processor_on(self.store.clone(), &self.consumer(check), fault)
    }

    /// A processor of `consumer` on `store` (the user's, or one wrapped with a barrier).
    pub(crate) fn processor_on<T2: Store>(
        &self,
        store: T2,
        consumer: &ConsumerName,
        fault: Fault,
    ) -> Processor<T2, Faulty<H>>
    where
        H: Handler<T2::Db>,
    {
        let handler = Faulty {
            inner: Arc::clone(&self.handler),
            fault,
        };
        Processor::with_config(
            store,
            consumer.clone(),
            handler,
            self.config.processor.clone(),
        )
    }

    /// A consumer name no run has used.
    pub(crate) fn consumer(&self, check: &str) -> ConsumerName {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..12];
        ConsumerName::new(format!("inboxed-testkit-{check}-{suffix}"))
            .unwrap_or_else(|e| unreachable!("a fixed-shape consumer name is valid: {e}"))
    }

    /// The state one plain delivery of `msg` leaves, from a reset.
    pub(crate) async fn after_one(
        &self,
        check: &'static str,
        msg: &Envelope,
    ) -> Result<T, CheckFailure> {
        self.reset(check).await?;
        let none = self.probe(check).await?;
        let p = self.processor(check, Fault::None);
        match settle(check, &p, msg, 1).await? {
            (Outcome::Processed, _) => Self::seen(check, &none, self.probe(check).await?),
            (outcome, count) => Err(CheckFailure::broken(
                check,
                format!(
                    "one plain delivery did not process the message: {outcome:?} at delivery \
                     {count} (the handler fails, or times out, without any fault injected)"
                ),
            )),
        }
    }

    /// `once`, the state one plain delivery left, when it differs from `none`, the reset
    /// state: otherwise the probe does not see the handler's effect, and no check could catch
    /// anything.
    pub(crate) fn seen(check: &'static str, none: &T, once: T) -> Result<T, CheckFailure> {
        if once == *none {
            return Err(CheckFailure::broken(
                check,
                format!(
                    "one plain delivery left the state the reset leaves ({once:?}): the probe \
                     does not see the handler's effect, so no check could catch anything"
                ),
            ));
        }
        Ok(once)
    }

    /// The state's comparison: `Err` naming the property when `found` differs from `expected`.
    pub(crate) fn compare(
        check: &'static str,
        property: &str,
        expected: &T,
        found: &T,
        hint: &'static str,
    ) -> Result<(), CheckFailure> {
        if expected == found {
            return Ok(());
        }
        Err(CheckFailure {
            check,
            property: property.to_owned(),
            expected: format!("{expected:?}"),
            actual: format!("{found:?}"),
            hint,
        })
    }
}

/// Delivers `msg` until it settles (the broker's redelivery of a transient failure), starting
/// at delivery `from`: the outcome, and the delivery count it settled at. Gives up after the
/// processor's `max_attempts` and a few more.
pub(crate) async fn settle<S: Store, H: Handler<S::Db>>(
    check: &'static str,
    p: &Processor<S, H>,
    msg: &Envelope,
    from: u32,
) -> Result<(Outcome, u32), CheckFailure> {
    let last = from
        .saturating_add(p.config().max_attempts)
        .saturating_add(3);
    let mut failure: Option<Error> = None;
    for count in from..last {
        match p.process(msg, Some(count)).await {
            Ok(outcome) => return Ok((outcome, count)),
            Err(e) if e.is_transient() => failure = Some(e),
            Err(e) => return Err(CheckFailure::failed_for_good(check, &e)),
        }
    }
    Err(CheckFailure::broken(
        check,
        format!(
            "the message did not settle in {} deliveries: {}",
            last - from,
            failure.map_or_else(String::new, |e| inboxed_core::error_chain(&e))
        ),
    ))
}
