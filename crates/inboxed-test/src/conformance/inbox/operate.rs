//! An operator's work on the inbox tables, as the console and the CLI do it: dead letters
//! retried into the inbox or discarded under a filter (a dry run changing nothing, each change
//! audited), and the rows and the audit trail listed.

use std::time::{Duration, SystemTime};

use inboxed_core::observe::{
    DeadLetterFilter, Kept, LetterActParams, LetterAction, ObserveStore, RowFilter,
};
use inboxed_core::{EnvelopeError, Outcome, ProcessorConfig};

use super::{drain, inbox, worker};
use crate::backend::{Backend, TestDb};
use crate::conformance::{ledger_state, processor};
use crate::handler::{Script, credit};

const LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters";
const ROWS: &str = "SELECT count(*) FROM inboxed_inbox_messages";
const AUDITS: &str = "SELECT count(*) FROM inboxed_redrive_audit";
const PARK_M3: &str = "UPDATE inboxed_inbox_messages SET status = 'dead' \
                       WHERE message_id = 'm-3' RETURNING CAST(1 AS BIGINT)";

fn act<'a>(
    filter: &'a DeadLetterFilter<'a>,
    action: LetterAction,
    apply: bool,
) -> LetterActParams<'a> {
    LetterActParams {
        filter,
        ids: None,
        action,
        actor: "ops@example",
        reason: "handler fixed",
        apply,
    }
}

/// Three messages dead-lettered while the handler was broken, and a keyless delivery; the
/// inbox already holds m-3's key with another payload, and m-2 itself. A dry run says what a
/// retry would do and changes nothing; the retry (after the fix) stores m-1 into the inbox,
/// where workers process it (and m-2's row) once, keeps the keyless letter, m-3 and m-2 with
/// their reasons (deleting m-2's letter would hide a row that may be dead), and is audited; a
/// second retry finds nothing to do and writes no record; a discard by reason removes the
/// keyless letter, audited too.
pub async fn dead_letters_are_retried_into_the_inbox_and_discarded<B: Backend>(_test: &str) {
    let db: TestDb<B> = B::create().await;
    let (p, handler) = processor(&db, ProcessorConfig::default().max_attempts(1));
    handler
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for (i, id) in ["m-1", "m-2", "m-3"].iter().enumerate() {
        let msg = Script {
            amount: 10 * (i as i64 + 1),
            fail_while_broken: true,
            ..Script::default()
        }
        .message(id);
        assert!(matches!(
            p.process(&msg, None).await.unwrap(),
            Outcome::DeadLettered { .. }
        ));
    }
    let inbox = inbox(&db);
    inbox
        .dead_letter_invalid(b"{}", &EnvelopeError::MissingId)
        .await
        .unwrap();
    inbox.store(&credit("m-3", 99)).await.unwrap();
    assert_eq!(db.scalar(PARK_M3).await, 1);
    // m-2 as it was sent reached the inbox too (a relay stored it after all).
    let m2 = Script {
        amount: 20,
        fail_while_broken: true,
        ..Script::default()
    }
    .message("m-2");
    inbox.store(&m2).await.unwrap();
    assert_eq!(db.scalar(LETTERS).await, 4);

    let mine = DeadLetterFilter {
        consumer: Some("ledger"),
        limit: 100,
        ..DeadLetterFilter::default()
    };
    let dry = db
        .store
        .act_on_dead_letters(&act(&mine, LetterAction::Retry, false))
        .await
        .unwrap();
    assert_eq!(dry.selected.len(), 4, "{dry:?}");
    assert_eq!(dry.acted.len(), 3, "{dry:?}");
    assert!(matches!(dry.kept[..], [(_, Kept::NoMessageId)]), "{dry:?}");
    assert_eq!(
        (
            db.scalar(LETTERS).await,
            db.scalar(ROWS).await,
            db.scalar(AUDITS).await
        ),
        (4, 2, 0),
        "a dry run changes nothing"
    );

    handler
        .broken
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let retried = db
        .store
        .act_on_dead_letters(&act(&mine, LetterAction::Retry, true))
        .await
        .unwrap();
    assert_eq!(retried.acted.len(), 1, "{retried:?}");
    assert!(retried.rows.iter().all(|(_, row)| row.is_some()));
    let mut kept: Vec<_> = retried.kept.iter().map(|(_, k)| k.clone()).collect();
    kept.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        kept,
        [
            Kept::AlreadyInInbox,
            Kept::InboxHoldsAnother,
            Kept::NoMessageId
        ]
    );
    assert_eq!(
        (
            db.scalar(LETTERS).await,
            db.scalar(ROWS).await,
            db.scalar(AUDITS).await
        ),
        (3, 3, 1)
    );
    let again = db
        .store
        .act_on_dead_letters(&act(&mine, LetterAction::Retry, true))
        .await
        .unwrap();
    assert!(again.acted.is_empty(), "{again:?}");
    assert_eq!(db.scalar(AUDITS).await, 1, "nothing done, nothing audited");

    let w = worker(&db, inboxed_core::inbox::WorkerConfig::default(), &handler);
    drain(&db, &[w]).await;
    assert_eq!(
        ledger_state(&db).await,
        (2, 30),
        "m-1 (retried) and m-2 (stored before) processed once"
    );

    let invalid = DeadLetterFilter {
        reason: Some("invalid_message"),
        limit: 100,
        ..DeadLetterFilter::default()
    };
    let discarded = db
        .store
        .act_on_dead_letters(&act(&invalid, LetterAction::Discard, true))
        .await
        .unwrap();
    assert_eq!(discarded.acted.len(), 1, "{discarded:?}");
    assert_eq!(db.scalar(LETTERS).await, 2, "m-2's and m-3's letters stay");

    // The list's window: the newest id only reaches m-3's letter; without it, both.
    let listed = |f: DeadLetterFilter<'static>| {
        let store = db.store.clone();
        async move {
            store
                .list_dead_letters(&f)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.message_id.unwrap_or_default())
                .collect::<Vec<_>>()
        }
    };
    let windowed = DeadLetterFilter {
        limit: 10,
        window: Some(1),
        ..DeadLetterFilter::default()
    };
    assert_eq!(listed(windowed).await, ["m-3"]);
    assert_eq!(
        listed(DeadLetterFilter {
            message_id: Some("m-2"),
            window: None,
            ..windowed
        })
        .await,
        ["m-2"]
    );
    assert_eq!(
        listed(DeadLetterFilter {
            window: None,
            ..windowed
        })
        .await
        .len(),
        2
    );

    // By payload: text, and a value at a JSON path; an action selects by them too.
    assert_eq!(
        listed(DeadLetterFilter {
            window: None,
            payload_contains: Some(br#""amount":20"#),
            ..windowed
        })
        .await,
        ["m-2"]
    );
    let thirty = DeadLetterFilter {
        payload_json: Some(("amount", "30")),
        ..windowed
    };
    assert_eq!(listed(thirty).await, ["m-3"]);
    let dry = db
        .store
        .act_on_dead_letters(&act(&thirty, LetterAction::Discard, false))
        .await
        .unwrap();
    assert_eq!(dry.selected.len(), 1, "{dry:?}");
    assert_eq!(
        listed(DeadLetterFilter {
            payload_json: Some(("account.name", "a")),
            ..windowed
        })
        .await,
        Vec::<String>::new(),
        "a path that is not there matches nothing"
    );

    let trail = db.store.audit_trail(Some("ledger"), 10).await.unwrap();
    assert_eq!(
        trail
            .iter()
            .map(|a| (a.action.as_str(), a.rows))
            .collect::<Vec<_>>(),
        [("letter discard", 1), ("letter retry", 1)],
        "{trail:?}"
    );
    assert_eq!(trail[1].actor, "ops@example");
    assert_eq!(trail[1].reason, "handler fixed");
    assert_eq!(trail[1].selector, "consumer=\"ledger\"");
    assert_eq!(trail[0].selector, "reason=\"invalid_message\"");
    assert!(trail[0].at.is_some());
}

/// Five rows, one dead, one of an aggregate, one whose payload holds "needle": each filter
/// finds what it names, newest first; a window of the newest two ids does not reach the dead
/// row; a row loads in full; a replay appears in the audit trail.
pub async fn rows_and_the_audit_trail_are_listed<B: Backend>(_test: &str) {
    let db: TestDb<B> = B::create().await;
    let before = SystemTime::now() - Duration::from_secs(5);
    let inbox = inbox(&db);
    for (id, account) in [
        ("r-1", "a"),
        ("r-2", "a"),
        ("r-3", "a"),
        ("r-4", "a"),
        ("r-5", "needle"),
    ] {
        let mut msg = Script {
            account: account.to_owned(),
            ..Script::default()
        }
        .message(id)
        .with_correlation_id(format!("corr-{id}"));
        if id == "r-4" {
            msg = msg.with_aggregate("acct-9");
        }
        inbox.store(&msg).await.unwrap();
    }
    db.scalar(
        "UPDATE inboxed_inbox_messages SET status = 'dead' \
         WHERE message_id = 'r-2' RETURNING CAST(1 AS BIGINT)",
    )
    .await;
    let all = RowFilter {
        consumer: Some("ledger"),
        ..RowFilter::default()
    };
    assert_eq!(
        listed_ids(&db, all).await,
        ["r-5", "r-4", "r-3", "r-2", "r-1"]
    );
    let dead = RowFilter {
        status: Some("dead"),
        ..all
    };
    assert_eq!(listed_ids(&db, dead).await, ["r-2"]);
    assert_eq!(
        listed_ids(&db, RowFilter { window: 2, ..dead }).await,
        Vec::<String>::new(),
        "the window of the newest two ids does not reach r-2"
    );
    assert_eq!(
        listed_ids(
            &db,
            RowFilter {
                message_id: Some("r-3"),
                window: 1,
                ..all
            }
        )
        .await,
        ["r-3"],
        "a consumer's message id is a key: found outside the window"
    );
    assert_eq!(
        listed_ids(
            &db,
            RowFilter {
                aggregate_id: Some("acct-9"),
                ..all
            }
        )
        .await,
        ["r-4"]
    );
    assert_eq!(
        listed_ids(
            &db,
            RowFilter {
                payload_contains: Some(b"needle"),
                ..all
            }
        )
        .await,
        ["r-5"]
    );
    assert_eq!(
        listed_ids(
            &db,
            RowFilter {
                received_from: Some(before),
                limit: 2,
                ..all
            }
        )
        .await,
        ["r-5", "r-4"]
    );
    assert!(
        listed_ids(
            &db,
            RowFilter {
                received_before: Some(before),
                ..all
            }
        )
        .await
        .is_empty()
    );
    // By JSON path: payloads that are not JSON (or not UTF-8) never match and fail nothing.
    for (id, payload) in [
        ("r-6", b"\xff\x00 not json".to_vec()),
        ("r-7", b"{broken".to_vec()),
        ("r-8", br#"{"order":{"id":42,"paid":true}}"#.to_vec()),
    ] {
        let msg = inboxed_core::Envelope::new(inboxed_core::MessageId::new(id).unwrap(), payload);
        inbox.store(&msg).await.unwrap();
    }
    let json = |path: &'static str, value: &'static str| RowFilter {
        payload_json: Some((path, value)),
        ..all
    };
    assert_eq!(listed_ids(&db, json("account", "needle")).await, ["r-5"]);
    assert_eq!(listed_ids(&db, json("amount", "1")).await.len(), 5);
    assert_eq!(listed_ids(&db, json("order.id", "42")).await, ["r-8"]);
    assert_eq!(
        listed_ids(&db, json("order.paid", "true")).await,
        ["r-8"],
        "a boolean reads as true or false on every engine"
    );
    assert!(listed_ids(&db, json("order.id", "43")).await.is_empty());
    assert_eq!(
        listed_ids(
            &db,
            RowFilter {
                message_id: Some("r-8"),
                ..json("order.id", "42")
            }
        )
        .await,
        ["r-8"],
        "through the key lookup too"
    );

    let listed = db.store.list_rows(&dead).await.unwrap();
    assert!(listed[0].payload.is_empty() && listed[0].payload_bytes > 0);
    let full = db.store.row_by_id(listed[0].id).await.unwrap().unwrap();
    assert_eq!(full.status, "dead");
    assert_eq!(full.correlation_id.as_deref(), Some("corr-r-2"));
    assert_eq!(
        u64::try_from(full.payload.len()).unwrap(),
        full.payload_bytes
    );
    assert!(full.received.is_some());
    assert!(db.store.row_by_id(-1).await.unwrap().is_none());

    let replayed = inbox
        .replay(
            &inboxed_core::inbox::Selector::ids(vec![full.id]),
            false,
            "ops",
            "fixed",
        )
        .await
        .unwrap();
    assert_eq!(replayed.ids, [full.id]);
    let trail = db.store.audit_trail(None, 10).await.unwrap();
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(
        (trail[0].action.as_str(), trail[0].consumer.as_str()),
        ("replay", "ledger")
    );
    assert!(trail[0].ids.contains(&full.id.to_string()));
    assert_eq!(trail[0].selector, format!("ids=[{}]", full.id));
    assert!(
        db.store
            .audit_trail(Some("someone-else"), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The message ids `f` lists, in order.
async fn listed_ids<B: Backend>(db: &TestDb<B>, f: RowFilter<'_>) -> Vec<String> {
    db.store
        .list_rows(&f)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.message_id)
        .collect()
}
