//! Failure paths: dead letters, retries, rollbacks, conflicts, serialization and durability.

use std::time::Duration;

use inboxed_core::{
    ConflictPolicy, DeadLetterReason, Error, Isolation, Outcome, Processor, ProcessorConfig,
    StoreError,
};

use super::{ledger, ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Ledger, Script, credit};

/// A permanent failure goes to the dead-letter table, leaves no processed row and no ledger
/// row, and later deliveries of the key are settled without running the handler.
pub async fn permanent_failure_is_dead_lettered_not_processed<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let msg = Script {
        fail: Some("permanent".into()),
        ..Script::default()
    }
    .message("m-p");
    let reason = DeadLetterReason::Permanent;
    assert_eq!(
        p.process(&msg, Some(1)).await.unwrap(),
        Outcome::DeadLettered { reason }
    );
    assert_eq!(
        p.process(&msg, Some(2)).await.unwrap(),
        Outcome::AlreadyDeadLettered
    );
    assert_eq!(handler.calls(), 1);
    assert_eq!(ledger_state(&db).await, (0, 0));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-p' AND reason = 'permanent' AND error LIKE '%scripted permanent failure%'").await,
        1
    );
    // A payload that does not decode is permanent too, never a panic.
    let garbage = inboxed_core::Envelope::new(
        inboxed_core::MessageId::new("m-g").unwrap(),
        b"{not json".to_vec(),
    );
    assert_eq!(
        p.process(&garbage, Some(1)).await.unwrap(),
        Outcome::DeadLettered { reason }
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        2
    );
    db.finish().await;
}

/// Transient failures are requeued (nothing committed) until `max_attempts`, then
/// dead-lettered; with the broker's count and with the durable counter.
pub async fn transient_failure_is_retried_then_dead_lettered<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default().max_attempts(3));
    let msg = Script {
        fail: Some("transient".into()),
        ..Script::default()
    }
    .message("m-t");
    for n in 1..=2 {
        let err = p.process(&msg, Some(n)).await.unwrap_err();
        assert!(
            err.is_transient() && matches!(err, Error::Handler { attempt, .. } if attempt == n),
            "{err:?}"
        );
    }
    let exhausted = Outcome::DeadLettered {
        reason: DeadLetterReason::AttemptsExhausted,
    };
    assert_eq!(p.process(&msg, Some(3)).await.unwrap(), exhausted);
    assert_eq!(handler.calls(), 3);

    let msg = Script {
        fail: Some("transient".into()),
        ..Script::default()
    }
    .message("m-d");
    assert!(p.process(&msg, None).await.is_err());
    assert!(p.process(&msg, None).await.is_err());
    assert_eq!(
        db.scalar("SELECT CAST(attempts AS BIGINT) FROM inboxed_attempts WHERE message_id = 'm-d'")
            .await,
        2
    );
    assert_eq!(p.process(&msg, None).await.unwrap(), exhausted);
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_attempts").await, 0);
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'attempts_exhausted' AND attempts = 3").await, 2);
    assert_eq!(ledger_state(&db).await, (0, 0));
    db.finish().await;
}

/// A handler that wrote and then failed, panicked or overran its deadline leaves nothing:
/// no ledger row, no processed row. The next delivery applies the effect once.
pub async fn handler_rollback_leaves_no_partial_state<B: Backend>(_test: &str) {
    let db = B::create().await;
    let config = ProcessorConfig::default().handler_timeout(Duration::from_millis(200));
    let (p, _) = processor(&db, config);
    for (n, script) in [
        Script {
            fail: Some("transient".into()),
            ..Script::default()
        },
        Script {
            fail: Some("panic".into()),
            ..Script::default()
        },
        Script {
            sleep_ms: 2_000,
            ..Script::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        let err = p
            .process(&script.message("m-h"), Some(1))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "case {n}: {err:?}");
        assert_eq!(
            ledger_state(&db).await,
            (0, 0),
            "case {n} left a partial write"
        );
        assert_eq!(
            db.scalar("SELECT count(*) FROM inboxed_processed_messages")
                .await,
            0
        );
    }
    assert_eq!(
        p.process(&credit("m-h", 4), Some(4)).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(ledger_state(&db).await, (1, 4));
    db.finish().await;
}

/// The same key with a different payload is reported as a conflict and dead-lettered by
/// default (the effect stays applied once); under `TreatAsDuplicate` it is only counted.
pub async fn payload_conflict_is_reported<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default());
    let first = credit("m-x", 10);
    let second = credit("m-x", 99);
    assert_eq!(
        p.process(&first, Some(1)).await.unwrap(),
        Outcome::Processed
    );
    let outcome = p.process(&second, Some(1)).await.unwrap();
    let Outcome::Conflict {
        stored,
        received,
        dead_lettered: true,
    } = outcome
    else {
        panic!("expected a dead-lettered conflict, got {outcome:?}");
    };
    // What was kept (the whole hash or its fingerprint) is the first payload's, not the second's.
    assert!(stored.matches(&first.hash()) && !stored.matches(&second.hash()));
    assert_eq!(received, second.hash());
    assert_eq!(handler.calls(), 1);
    assert_eq!(ledger_state(&db).await, (1, 10));
    assert_eq!(db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE reason = 'conflict' AND message_id = 'm-x'").await, 1);
    // The original payload is still an ordinary duplicate.
    assert_eq!(
        p.process(&first, Some(2)).await.unwrap(),
        Outcome::Duplicate
    );

    let lenient = ProcessorConfig::default().conflict_policy(ConflictPolicy::TreatAsDuplicate);
    let p = Processor::with_config(db.store.clone(), ledger(), Ledger::<B>::default(), lenient);
    let outcome = p.process(&credit("m-x", 77), Some(1)).await.unwrap();
    assert!(matches!(
        outcome,
        Outcome::Conflict {
            dead_lettered: false,
            ..
        }
    ));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        1
    );
    assert_eq!(ledger_state(&db).await, (1, 10));
    db.finish().await;
}

/// Under SERIALIZABLE, concurrent read-modify-write handlers on one balance lose
/// serialization checks; the processor retries them in process and the balance is exact.
/// SQLite writers serialize at `BEGIN IMMEDIATE`, so no failure can occur there: the case still
/// runs and checks the balance, and that no retry was needed.
pub async fn serializable_conflicts_are_retried<B: Backend>(_test: &str) {
    let db = B::create().await;
    // Redeliveries below stand in for the broker; allow enough of them that contention alone
    // never exhausts the attempts.
    let config = ProcessorConfig::default()
        .isolation(Isolation::Serializable)
        .max_attempts(50);
    let (p, handler) = processor(&db, config);
    // 8 workers, 5 messages each, all crediting one balance: the hottest row there is.
    let n = 40;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w * 5)..(w * 5 + 5) {
                let msg = Script {
                    rmw: true,
                    amount: i + 1,
                    ..Script::default()
                }
                .message(&format!("m-s{i}"));
                // Past its in-process retries a delivery comes back transient; the broker then
                // redelivers it, which this loop stands in for.
                let mut delivery = 1;
                loop {
                    match p.process(&msg, Some(delivery)).await {
                        Ok(outcome) => break assert_eq!(outcome, Outcome::Processed),
                        Err(e) if e.is_transient() && delivery < 50 => delivery += 1,
                        Err(e) => panic!("{e:?}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let expected = n * (n + 1) / 2;
    assert_eq!(
        db.scalar("SELECT balance FROM accounts WHERE id = 'a'")
            .await,
        expected
    );
    let calls = i64::from(handler.calls());
    if B::SERIAL_WRITERS {
        assert_eq!(calls, n, "serial writers never need a retry");
    } else {
        assert!(
            calls > n,
            "expected serialization failures to be retried ({calls} calls for {n} messages)"
        );
    }
    db.finish().await;
}

/// An operator's retry reprocesses a dead letter from its stored payload (a failed retry
/// leaves it in place); a discard removes it so that the next delivery is processed as new.
pub async fn dead_letter_retry_and_discard<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default().max_attempts(1));
    let id = |s: &str| inboxed_core::MessageId::new(s).unwrap();
    assert!(p.retry_dead_letter(&id("m-none")).await.unwrap().is_none());

    // Fails once (a dependency down), and with max_attempts 1 is dead-lettered at once.
    let flaky = Script {
        amount: 8,
        fail_first: 1,
        ..Script::default()
    }
    .message("m-f");
    let exhausted = Outcome::DeadLettered {
        reason: DeadLetterReason::AttemptsExhausted,
    };
    assert_eq!(p.process(&flaky, Some(1)).await.unwrap(), exhausted);
    assert_eq!(
        p.retry_dead_letter(&id("m-f")).await.unwrap(),
        Some(Outcome::Processed)
    );
    assert_eq!(handler.calls(), 2);
    assert_eq!(ledger_state(&db).await, (1, 8));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-f'")
            .await,
        0
    );
    assert_eq!(
        p.process(&flaky, Some(2)).await.unwrap(),
        Outcome::Duplicate
    );

    // Still failing: the retry returns the error and the dead letter stays as it was.
    let broken = Script {
        fail: Some("permanent".into()),
        ..Script::default()
    }
    .message("m-d");
    assert!(matches!(
        p.process(&broken, Some(1)).await.unwrap(),
        Outcome::DeadLettered { .. }
    ));
    assert!(p.retry_dead_letter(&id("m-d")).await.is_err());
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'm-d' AND reason = 'permanent'").await,
        1
    );
    assert_eq!(ledger_state(&db).await, (1, 8));

    // Discarded: the next delivery of the key is processed as new.
    assert!(p.discard_dead_letter(&id("m-d")).await.unwrap());
    assert!(!p.discard_dead_letter(&id("m-d")).await.unwrap());
    assert_eq!(
        p.process(&credit("m-d", 2), Some(1)).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(ledger_state(&db).await, (2, 10));
    db.finish().await;
}

/// A handler that swallows a failed statement and returns `Ok`. On PostgreSQL the failure
/// aborted the transaction, and COMMIT would silently roll back while reporting success: the
/// processor must notice, and nothing may be acked. SQLite aborts only the failed statement, so
/// there the rest of the handler's work commits.
pub async fn swallowed_statement_error_is_not_acked<B: Backend>(_test: &str) {
    let db = B::create().await;
    let (p, _) = processor(&db, ProcessorConfig::default());
    let msg = Script {
        amount: 6,
        swallow: true,
        ..Script::default()
    }
    .message("m-w");
    let result = p.process(&msg, Some(1)).await;
    if B::FAILED_STATEMENT_ABORTS_TRANSACTION {
        let err = result.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        assert!(
            inboxed_core::error::error_chain(&err).contains("propagate database errors"),
            "{err:?}"
        );
        assert_eq!(ledger_state(&db).await, (0, 0));
        assert_eq!(
            db.scalar("SELECT count(*) FROM inboxed_processed_messages")
                .await,
            0
        );
    } else {
        assert_eq!(result.unwrap(), Outcome::Processed);
        assert_eq!(ledger_state(&db).await, (1, 6));
    }
    db.finish().await;
}

/// A database that can lose acknowledged commits is refused with an error naming the
/// setting; the explicit override runs anyway.
pub async fn non_durable_commit_setting_is_refused<B: Backend>(_test: &str) {
    let db = B::create().await;
    let store = B::make_non_durable(&db).await;
    let p = Processor::new(store.clone(), ledger(), Ledger::<B>::default());
    let err = p.process(&credit("m-n", 1), Some(1)).await.unwrap_err();
    assert!(
        matches!(err, Error::Store(StoreError::NonDurable { .. })),
        "{err:?}"
    );
    assert!(!err.is_transient());
    assert!(err.to_string().contains("synchronous"), "{err}");
    assert_eq!(ledger_state(&db).await, (0, 0));
    let config = ProcessorConfig::default().allow_non_durable_commits(true);
    let p = Processor::with_config(store, ledger(), Ledger::<B>::default(), config);
    assert_eq!(
        p.process(&credit("m-n", 1), Some(1)).await.unwrap(),
        Outcome::Processed
    );
    assert_eq!(ledger_state(&db).await, (1, 1));
    db.finish().await;
}
