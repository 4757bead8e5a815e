//! The checks, each a method of [`Kit`]: the attack, then the state compared with one plain
//! delivery's (or, for a message that must have no effect, with the reset state).

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use inboxed_core::driver::Driver;
use inboxed_core::{Envelope, Handler, Outcome, Processor, Store};
use tokio::sync::Barrier;

use crate::contention::{self, Contending, INJECTIONS, Injection, Point};

use crate::failure::{CheckFailure, Report};
use crate::fault::{Fault, kill_when_ran};
use crate::hooks::{HookPoint, Hooked, Seamed};
use crate::kit::{Kit, settle};

/// Effects outside `conn` survive a transaction that does not commit.
const OUTSIDE: &str = "the handler writes outside the transaction it is given (a second pool \
    connection, its own transaction or COMMIT, an HTTP call, a file, a counter in memory), so \
    work of a delivery that did not commit stayed";

impl<S, H, T> Kit<S, H, T>
where
    S: Store + Clone + Send + Sync + 'static,
    H: Handler<S::Db>,
    T: PartialEq + Debug + Send + 'static,
{
    /// Every check on `msg`, each from a reset; the failures of all of them.
    ///
    /// # Errors
    /// A [`Report`] of the checks that failed.
    pub async fn check_all(&self, msg: &Envelope) -> Result<(), Report> {
        let mut failures = Vec::new();
        let mut add = |r: Result<(), CheckFailure>| failures.extend(r.err());
        add(self.sequential_duplicates(msg).await);
        add(self.concurrent_duplicates(msg).await);
        add(self.first_holder_rolls_back(msg).await);
        add(self.crash_before_commit(msg).await);
        add(self.crash_between_commit_and_ack(msg).await);
        add(self.contention(msg).await);
        add(self.poison(msg).await);
        add(self.conflict(msg).await);
        Report::of(failures)
    }

    /// The same message delivered again after it was processed, then again up to
    /// [`KitConfig::deliveries`](crate::KitConfig::deliveries) times: each later delivery is a
    /// duplicate, and the state stays one delivery's.
    ///
    /// # Errors
    /// A later delivery was not a duplicate, or the state after the second or the last
    /// delivery differs.
    pub async fn sequential_duplicates(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "sequential_duplicates";
        let once = self.after_one(CHECK, msg).await?;
        let p = self.processor(CHECK, Fault::None);
        self.reset(CHECK).await?;
        for count in 1..=u32::try_from(self.config.deliveries.max(2)).unwrap_or(u32::MAX) {
            let (outcome, _) = settle(CHECK, &p, msg, count).await?;
            if count > 1 && outcome != Outcome::Duplicate {
                return Err(CheckFailure::outcome(
                    CHECK,
                    &format!("delivery {count} of a processed message is a duplicate"),
                    "Duplicate",
                    &outcome,
                    "the message's key was purged, or its id changes between deliveries",
                ));
            }
            if count == 2 || count as usize == self.config.deliveries.max(2) {
                let found = self.probe(CHECK).await?;
                Self::compare(
                    CHECK,
                    &format!("{count} deliveries of one message leave one delivery's state"),
                    &once,
                    &found,
                    "the handler's effect does not go through `conn`, or the processor was \
                     bypassed",
                )?;
            }
        }
        Ok(())
    }

    /// [`KitConfig::copies`](crate::KitConfig::copies) copies of the message released together
    /// at a barrier, each on a connection of its own: one processes it, the others find a
    /// duplicate.
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn concurrent_duplicates(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "concurrent_duplicates";
        let once = self.after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let copies = vec![msg.clone(); self.config.copies.max(2)];
        self.race(CHECK, copies, &Fault::None).await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            &format!(
                "{} concurrent copies of one message leave one delivery's state",
                self.config.copies.max(2)
            ),
            &once,
            &found,
            OUTSIDE,
        )
    }

    /// Three copies at a barrier; the first to get the key runs the handler, holds its
    /// transaction while the others wait on its claim, then rolls back: one of the others
    /// takes the key and processes it, and the first one's redelivery is a duplicate.
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn first_holder_rolls_back(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "first_holder_rolls_back";
        let once = self.after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let fault = Fault::FirstFails {
            first: Arc::new(AtomicBool::new(true)),
            hold: self.config.hold,
        };
        self.race(CHECK, vec![msg.clone(); 3], &fault).await?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "three concurrent copies whose first holder rolled back leave one delivery's state",
            &once,
            &found,
            OUTSIDE,
        )
    }

    /// The handler's transaction killed after the handler returned (the process died before
    /// its COMMIT), then the message redelivered: the redelivery processes it, and the state
    /// is one delivery's.
    ///
    /// # Errors
    /// The state differs from one delivery's.
    pub async fn crash_before_commit(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "crash_before_commit";
        let once = self.after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let consumer = self.consumer(CHECK);
        let (hang, ran) = Fault::hang();
        let killed = self.processor_on(self.store.clone(), &consumer, hang);
        let delivery = {
            let msg = msg.clone();
            tokio::spawn(async move { killed.process(&msg, Some(1)).await })
        };
        kill_when_ran(&ran, delivery).await;
        let p = self.processor_on(self.store.clone(), &consumer, Fault::None);
        let (outcome, _) = settle(CHECK, &p, msg, 2).await?;
        CheckFailure::unless_processed(
            CHECK,
            "the redelivery after a crash before commit processes the message",
            &outcome,
        )?;
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a delivery killed before its commit, then redelivered, leaves one delivery's state",
            &once,
            &found,
            OUTSIDE,
        )
    }

    /// Processed and committed, the ack lost, the message redelivered: the redelivery is a
    /// duplicate and the state is one delivery's.
    ///
    /// # Errors
    /// The redelivery was not a duplicate, or the state differs from one delivery's.
    pub async fn crash_between_commit_and_ack(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "crash_between_commit_and_ack";
        let once = self.after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let p = self.processor(CHECK, Fault::None);
        settle(CHECK, &p, msg, 1).await?;
        let (again, _) = settle(CHECK, &p, msg, 2).await?;
        if again != Outcome::Duplicate {
            return Err(CheckFailure::outcome(
                CHECK,
                "a redelivery after the commit is a duplicate",
                "Duplicate",
                &again,
                "the message's key was purged before its redelivery (retention shorter than \
                 the broker's redelivery window)",
            ));
        }
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a redelivery after the commit leaves one delivery's state",
            &once,
            &found,
            OUTSIDE,
        )
    }

    /// A serialization failure and then a deadlock, raised by the engine inside the inbox
    /// transaction at the claim, then (from a reset) inside the handler after the user's code
    /// ran, then at commit: the processor retries the transaction in process, the delivery
    /// processes the message, and the state is one delivery's. The conflicts are real server
    /// errors with the codes a real conflict has (see the guide); on SQLite, where writers take
    /// turns at `BEGIN IMMEDIATE` and no statement in a transaction meets a conflict, there is
    /// nothing to inject and the check passes at once.
    ///
    /// # Errors
    /// The delivery did not end processed, or the state differs from one delivery's.
    pub async fn contention(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "contention";
        if !contention::possible(<S::Db as Driver>::NAME) {
            return Ok(());
        }
        let once = self.after_one(CHECK, msg).await?;
        for point in Point::ALL {
            self.reset(CHECK).await?;
            let injection = Arc::new(Injection::<S::Engine>::new(point));
            let handler = Contending {
                inner: Arc::clone(&self.handler),
                injection: Arc::clone(&injection),
            };
            let p = Processor::with_config(
                Seamed::wrap(self.store.clone(), Arc::clone(&injection)),
                self.consumer(CHECK),
                handler,
                self.config.processor.clone(),
            );
            let (outcome, delivery) = settle(CHECK, &p, msg, 1).await?;
            if injection.misfired() {
                return Err(CheckFailure::broken(
                    CHECK,
                    format!(
                        "the engine ran the statement that raises a conflict {point} without \
                         failing ({}): the kit cannot inject contention on this server",
                        <S::Db as Driver>::NAME
                    ),
                ));
            }
            if injection.raised() < INJECTIONS {
                return Err(CheckFailure::broken(
                    CHECK,
                    format!(
                        "{} of {INJECTIONS} conflicts were raised {point}: the handler failed \
                         before the point, or the message settled without reaching it",
                        injection.raised()
                    ),
                ));
            }
            CheckFailure::unless_processed(
                CHECK,
                &format!("a delivery that met conflicts {point} processes the message"),
                &outcome,
            )?;
            if delivery > 1 && self.config.processor.contention_retries >= INJECTIONS {
                return Err(CheckFailure {
                    check: CHECK,
                    property: format!(
                        "a delivery that met {INJECTIONS} conflicts {point} retries them in \
                         process (contention_retries = {}) and settles in that delivery",
                        self.config.processor.contention_retries
                    ),
                    expected: "settled at delivery 1".to_owned(),
                    actual: format!("settled at delivery {delivery}"),
                    hint: "the engine's conflict was not taken for contention (a \
                           serialization failure or a deadlock, retried in process): the \
                           library's classification of this server's errors, a bug to report",
                });
            }
            let found = self.probe(CHECK).await?;
            Self::compare(
                CHECK,
                &format!(
                    "a delivery whose transaction met a serialization failure and a deadlock \
                     {point}, retried in process, leaves one delivery's state"
                ),
                &once,
                &found,
                OUTSIDE,
            )?;
        }
        Ok(())
    }

    /// A message whose delivery fails after the handler every time: it ends dead-lettered
    /// after the processor's `max_attempts`, and leaves no business effect at all (the reset
    /// state).
    ///
    /// # Errors
    /// It did not end dead-lettered, or the state differs from the reset state.
    pub async fn poison(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "poison";
        self.reset(CHECK).await?;
        let none = self.probe(CHECK).await?;
        let p = self.processor(CHECK, Fault::Fail);
        let (outcome, _) = settle(CHECK, &p, msg, 1).await?;
        if !matches!(outcome, Outcome::DeadLettered { .. }) {
            return Err(CheckFailure::outcome(
                CHECK,
                "a message that fails every time ends dead-lettered",
                "DeadLettered",
                &outcome,
                "the handler committed the claim itself (a COMMIT through `conn`)",
            ));
        }
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "a message dead-lettered after failing every time has no effect",
            &none,
            &found,
            OUTSIDE,
        )
    }

    /// The message processed, then another message under the same id with another payload:
    /// the second settles as a conflict, without a second effect.
    ///
    /// # Errors
    /// The second was not a conflict, or the state differs from one delivery's.
    pub async fn conflict(&self, msg: &Envelope) -> Result<(), CheckFailure> {
        const CHECK: &str = "conflict";
        let once = self.after_one(CHECK, msg).await?;
        self.reset(CHECK).await?;
        let p = self.processor(CHECK, Fault::None);
        settle(CHECK, &p, msg, 1).await?;
        let mut other = msg.payload().to_vec();
        other.extend_from_slice(b" (another payload under the same id)");
        let changed = Envelope::new(msg.id().clone(), other);
        let (outcome, _) = settle(CHECK, &p, &changed, 1).await?;
        if !matches!(outcome, Outcome::Conflict { .. }) {
            return Err(CheckFailure::outcome(
                CHECK,
                "the same id with another payload settles as a conflict",
                "Conflict",
                &outcome,
                "the processor's conflict policy, or a key purged in between",
            ));
        }
        let found = self.probe(CHECK).await?;
        Self::compare(
            CHECK,
            "the same id with another payload has no second effect",
            &once,
            &found,
            "the handler's effect does not go through `conn`",
        )
    }

    /// `msgs` (distinct messages whose effects commute, such as credits to one account)
    /// processed all at once, released at a barrier, each transaction held open
    /// [`KitConfig::hold`](crate::KitConfig::hold) after its handler, against the same messages
    /// processed one after another: the states are the same. This is where a
    /// read-modify-write without a lock loses an update. Runs
    /// [`KitConfig::rounds`](crate::KitConfig::rounds) rounds.
    ///
    /// # Errors
    /// A round's state differs from the sequential one's.
    pub async fn concurrent_messages(&self, msgs: &[Envelope]) -> Result<(), CheckFailure> {
        const CHECK: &str = "concurrent_messages";
        self.reset(CHECK).await?;
        let p = self.processor(CHECK, Fault::None);
        for msg in msgs {
            settle(CHECK, &p, msg, 1).await?;
        }
        let sequential = self.probe(CHECK).await?;
        for _ in 0..self.config.rounds.max(1) {
            self.reset(CHECK).await?;
            self.race(CHECK, msgs.to_vec(), &Fault::Hold(self.config.hold))
                .await?;
            let found = self.probe(CHECK).await?;
            Self::compare(
                CHECK,
                &format!(
                    "{} messages processed at once leave the state they leave one after another",
                    msgs.len()
                ),
                &sequential,
                &found,
                "the handler reads a value and writes back one computed from it without a lock \
                 (`SELECT … FOR UPDATE`) or an atomic update (`SET balance = balance + $1`): \
                 concurrent messages lose each other's updates",
            )?;
        }
        Ok(())
    }

    /// `msgs` delivered all at once, released together at a barrier before their transactions
    /// begin, each on a connection of its own with `fault` after the handler, each redelivered
    /// until it settles.
    async fn race(
        &self,
        check: &'static str,
        msgs: Vec<Envelope>,
        fault: &Fault,
    ) -> Result<(), CheckFailure> {
        let consumer = self.consumer(check);
        let barrier = Arc::new(Barrier::new(msgs.len()));
        // Joined as they end, so that one that fails before the barrier (the others then
        // wait there for ever) ends the race: the set aborts the rest when it is dropped.
        let mut tasks = tokio::task::JoinSet::new();
        for msg in msgs {
            let store = Hooked::new(
                self.store.clone(),
                Arc::clone(&barrier),
                HookPoint::BeforeBegin,
            );
            let p = self.processor_on(store, &consumer, fault.clone());
            tasks.spawn(async move { settle(check, &p, &msg, 1).await.map(drop) });
        }
        while let Some(joined) = tasks.join_next().await {
            joined
                .map_err(|e| CheckFailure::broken(check, format!("a delivery panicked: {e}")))??;
        }
        Ok(())
    }
}
