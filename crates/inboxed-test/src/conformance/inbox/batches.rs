//! Batch handlers: one `handle_batch` call per claimed batch, all or nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use inboxed_core::inbox::{ClaimMode, WorkerConfig};
use inboxed_core::{Envelope, Handler, HandlerError, Store};

use super::{drain, enqueue_all, with_status};
use crate::backend::{Backend, Conn, TestDb};
use crate::conformance::{ledger, ledger_state};
use crate::handler::{Ledger, Script, credit};

/// Applies a batch in one call and, unlike the default, keeps writing past a failing message
/// before it reports the failure: its batch-mates' writes must be rolled back with it.
struct Batched<B> {
    ledger: Ledger<B>,
    batch_calls: Arc<AtomicU32>,
}

impl<B: Backend> Handler<<B::Store as Store>::Db> for Batched<B> {
    const BATCHES: bool = true;

    async fn handle(&self, msg: &Envelope, conn: &mut Conn<B>) -> Result<(), HandlerError> {
        self.ledger.handle(msg, conn).await
    }

    async fn handle_batch(
        &self,
        msgs: &[&Envelope],
        conn: &mut Conn<B>,
    ) -> Result<(), HandlerError> {
        self.batch_calls.fetch_add(1, Ordering::SeqCst);
        let mut first_error = None;
        for msg in msgs {
            if let Err(e) = self.ledger.handle(msg, conn).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A clean batch is applied by one `handle_batch` call and nothing else; a batch holding two
/// poison messages is rolled back whole (the override wrote its good messages before failing)
/// and redone one message per savepoint: every good message applied exactly once, the poison
/// ones dead. In both claim modes where the engine has them.
pub async fn batch_handler_is_all_or_nothing<B: Backend>(_test: &str) {
    let db = B::create().await;
    let mut modes = vec![ClaimMode::Lease];
    if !B::SERIAL_WRITERS {
        modes.push(ClaimMode::LockHeld);
    }
    let (mut applied, mut sum) = (0, 0);
    for (round, mode) in modes.into_iter().enumerate() {
        let handler = Batched {
            ledger: Ledger::<B>::default(),
            batch_calls: Arc::default(),
        };
        let (calls, batch_calls) = (handler.ledger.calls.clone(), handler.batch_calls.clone());
        let config = WorkerConfig::default()
            .batch_size(100)
            .claim_mode(mode)
            .ladder(inboxed_core::Ladder::constant(std::time::Duration::ZERO));
        let w = inboxed_core::inbox::Worker::new(db.store.clone(), ledger(), handler, config);

        let clean: Vec<Envelope> = (1..=20)
            .map(|i| credit(&format!("clean-{round}-{i}"), i))
            .collect();
        enqueue_all(&db, clean, 1).await;
        drain(&db, std::slice::from_ref(&w)).await;
        (applied, sum) = (applied + 20, sum + 210);
        assert_eq!(
            ledger_state(&db).await,
            (applied, sum),
            "{mode:?}: clean batch"
        );
        assert_eq!(batch_calls.load(Ordering::SeqCst), 1, "{mode:?}: one call");
        assert_eq!(calls.load(Ordering::SeqCst), 20, "{mode:?}: no row redone");

        let mut mixed: Vec<Envelope> = (1..=30)
            .map(|i| credit(&format!("mixed-{round}-{i}"), 100))
            .collect();
        for i in [7, 23] {
            mixed[i] = Script {
                amount: 1_000_000,
                fail: Some("permanent".into()),
                ..Script::default()
            }
            .message(&format!("poison-{round}-{i}"));
        }
        enqueue_all(&db, mixed, 1).await;
        drain(&db, std::slice::from_ref(&w)).await;
        (applied, sum) = (applied + 28, sum + 2_800);
        assert_eq!(
            ledger_state(&db).await,
            (applied, sum),
            "{mode:?}: each good message once, no poison write kept"
        );
        assert_eq!(with_status(&db, "dead").await, 2 * (round as i64 + 1));
        assert_eq!(
            batch_calls.load(Ordering::SeqCst),
            2,
            "{mode:?}: one batch call"
        );
    }
    assert_eq!(with_status(&db, "done").await, applied);
    assert_eq!(
        inbox_rows(&db).await,
        applied + with_status(&db, "dead").await
    );
    db.finish().await;
}

async fn inbox_rows<B: Backend>(db: &TestDb<B>) -> i64 {
    db.scalar("SELECT count(*) FROM inboxed_inbox_messages")
        .await
}
