//! The engine's own mechanisms: multi-statement scripts, migrators taking turns, a dead letter
//! and a claim of one key each waiting for the other in flight, and a transaction left open on
//! a pooled connection.

use super::*;

#[tokio::test]
async fn a_script_runs_its_statements_in_order_with_numbered_arguments_reused() {
    let db = TestDb::new().await;
    db.store
        .pool()
        .execute(
            "CREATE TABLE rows_ (id BIGINT PRIMARY KEY, owner VARBINARY(16) NULL, \
             amount BIGINT NOT NULL) ENGINE = InnoDB",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.store
        .pool()
        .execute("INSERT INTO rows_ (id, amount) VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The shape of a claim: stamp up to $2 rows with the token $1 under SKIP LOCKED, then read
    // the rows bearing it; $1 is used twice, $3 before $2.
    let sql: Arc<str> = Arc::from(
        "-- $1 token, $2 limit, $3 least amount\n\
         UPDATE rows_ SET owner = $1\n\
         WHERE id IN (SELECT id FROM (SELECT id FROM rows_ WHERE owner IS NULL AND amount >= $3\n\
                      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) AS c);\n\
         SELECT id, amount FROM rows_ WHERE owner = $1 ORDER BY id",
    );
    let mut conn = db.conn().await;
    let rows = db
        .store
        .script(&sql)
        .bytes(b"token-a")
        .int(2)
        .int(20)
        .fetch_all(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
        .collect();
    assert_eq!(got, vec![(2, 20), (3, 30)]);
    // A second claim skips the stamped rows and takes what is left.
    let changed = db
        .store
        .script(&sql)
        .bytes(b"token-b")
        .int(5)
        .int(0)
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        changed, 0,
        "the last statement is a SELECT: it changes nothing"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM rows_ WHERE owner = 'token-b'")
            .await,
        2
    );
    drop(conn);
    db.finish().await;
}

/// Two migrators on a fresh database: one applies the migrations, the other waits on the
/// named lock and finds them applied; the lock is free afterwards (a pooled connection that
/// kept it would stall every later migrator), and a third run applies nothing.
#[tokio::test]
async fn migrators_take_turns_and_leave_the_lock_free() {
    let db = TestDb::new().await;
    let other = MySqlStore::connect(&format!("{}/{}", server_url(), db.name), 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Bounded: a migrator that kept the lock on its pooled connection makes the other wait
    // for a year.
    let both = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(db.store.migrate(), other.migrate())
    });
    let (a, b) = both
        .await
        .unwrap_or_else(|_| panic!("a migrator waits on the other's lock"));
    let mut runs = [
        a.unwrap_or_else(|e| panic!("{e}")),
        b.unwrap_or_else(|e| panic!("{e}")),
    ];
    runs.sort();
    let every: Vec<i64> = crate::queries::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(runs, [vec![], every.clone()]);
    let free: i64 =
        sqlx::query_scalar("SELECT IS_FREE_LOCK(CONCAT('inboxed.migrate.', ?, '.inboxed_'))")
            .bind(&db.name)
            .fetch_one(&mut *db.conn().await)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(free, 1, "a migrator kept the named lock");
    assert_eq!(
        db.store.migrate().await.unwrap_or_else(|e| panic!("{e}")),
        Vec::<i64>::new()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_migrations").await,
        i64::try_from(every.len()).unwrap_or(i64::MAX),
        "one record of each migration"
    );
    other.pool().close().await;
    db.finish().await;
}

/// MySQL commits each DDL statement on its own: a migration cut short after some of its
/// statements is applied again from its start. Every migration must survive that; here each
/// runs a second time over its own result (migration 3's `ALTER` is guarded: unguarded, it
/// failed on the column it had added).
#[tokio::test]
async fn every_migration_applies_again_over_its_own_result() {
    let db = TestDb::new().await;
    let all = db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.len(), crate::queries::MIGRATIONS.len());
    sqlx::query("DELETE FROM inboxed_migrations")
        .execute(db.store.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.store.migrate().await.unwrap_or_else(|e| panic!("{e}")),
        all
    );
    db.finish().await;
}

/// A redelivery past `max_attempts` dead-letters its key while an earlier delivery's claim of
/// the same key is still uncommitted: the dead letter's guard waits for that claim and, once it
/// commits, finds the key processed. With a plain read the guard saw nothing, and the key ended
/// both processed and dead (`inboxed demo` reported a 41st dead letter for 40 poison messages).
#[tokio::test]
async fn a_dead_letter_waits_for_an_uncommitted_claim_of_its_key() {
    use inboxed_core::store::{
        BeginParams, Claim, ClaimParams, DeadLetterParams, DeadLettered, Store,
    };
    use inboxed_core::{ConsumerName, DeadLetterReason, Envelope, MessageId};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
    let id = MessageId::new("m-1").unwrap_or_else(|e| panic!("{e}"));
    let envelope = Envelope::new(id.clone(), b"{}".to_vec());
    let mut first = db
        .store
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let claim = db
        .store
        .claim(
            &mut first,
            &ClaimParams {
                consumer: &consumer,
                envelope: &envelope,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(claim, Claim::New);
    let store = db.store.clone();
    let (c, i) = (consumer.clone(), id.clone());
    let late = tokio::spawn(async move {
        store
            .dead_letter(&DeadLetterParams {
                consumer: &c,
                message_id: Some(&i),
                message_type: None,
                correlation_id: None,
                payload: b"{}",
                payload_hash: None,
                reason: DeadLetterReason::AttemptsExhausted,
                error: "5 deliveries failed",
                attempts: 5,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !late.is_finished(),
        "the dead letter did not wait for the claim"
    );
    first.commit().await.unwrap_or_else(|e| panic!("{e}"));
    let settled = late
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(settled, DeadLettered::AlreadyProcessed);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_dead_letters").await,
        0
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        1
    );
    db.finish().await;
}

/// The other order: a dead letter has written its row (uncommitted, not yet checked) when a
/// claim of the key runs. The claim's insert passes its plain guard, and its locking check
/// after the write waits for the dead letter, then undoes the claim: the key is dead, not
/// processed and dead. Without the check after the write, READ COMMITTED let both commit.
#[tokio::test]
async fn a_claim_beside_a_dead_letter_in_flight_is_undone() {
    use inboxed_core::store::Claim;
    use inboxed_core::{ConsumerName, Envelope, MessageId};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let mut letter = dead_letter_in_flight(&db, "billing", "m-2").await;
    let store = db.store.clone();
    let claim = tokio::spawn(async move {
        let consumer = ConsumerName::new("billing").unwrap_or_else(|e| panic!("{e}"));
        let id = MessageId::new("m-2").unwrap_or_else(|e| panic!("{e}"));
        let envelope = Envelope::new(id, b"{}".to_vec());
        claim_committed(&store, &consumer, &envelope).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claim.is_finished(),
        "the claim's check did not wait for the dead letter in flight"
    );
    letter
        .execute("COMMIT")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let claim = claim
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(claim, Claim::DeadLettered);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inboxed_processed_messages")
            .await,
        0
    );
    drop(letter);
    db.finish().await;
}

/// A connection can come back to the pool inside a transaction the client never registered (a
/// task cancelled while its BEGIN was on the wire). The store's next transaction on it starts,
/// and what the stray transaction held is rolled back, never committed.
#[tokio::test]
async fn a_transaction_left_open_on_a_pooled_connection_is_rolled_back_not_committed() {
    use inboxed_core::store::{BeginParams, Store};
    let db = TestDb::new().await;
    let one = MySqlStore::connect(&format!("{}/{}", server_url(), db.name), 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    {
        let mut conn = one.pool().acquire().await.unwrap_or_else(|e| panic!("{e}"));
        // Raw text, so that sqlx does not know a transaction is open.
        sqlx::raw_sql("BEGIN; INSERT INTO ledger VALUES ('stray', 1)")
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut tx = one
        .begin(&BeginParams::default())
        .await
        .unwrap_or_else(|e| panic!("the next transaction did not start: {e}"));
    sqlx::query("INSERT INTO ledger VALUES ('mine', 2)")
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger WHERE id = 'mine'")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger WHERE id = 'stray'")
            .await,
        0
    );
    one.pool().close().await;
    db.finish().await;
}

/// MySQL has no `SET LOCAL`: a store transaction's bounds are set on the session. A connection
/// back in the pool must carry none of them, or the application's next transaction on it runs
/// under a maintenance batch's bounds (here a 1 s idle timeout and a 0.3 s statement timeout,
/// after which the server ends the session or the statement).
#[tokio::test]
async fn a_connection_back_in_the_pool_carries_no_bounds_of_the_store() {
    use inboxed_core::store::{BeginParams, Store};
    let db = TestDb::new().await;
    let one = MySqlStore::connect(&format!("{}/{}", server_url(), db.name), 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let bounded = BeginParams::bounded(Duration::from_millis(300), Duration::from_secs(1));
    let tx = one.begin(&bounded).await.unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    // The pool holds one connection: this is the one the transaction ran on.
    let (wait, lock, statement): (i64, i64, f64) = sqlx::query_as(
        "SELECT @@SESSION.wait_timeout = @@GLOBAL.wait_timeout, \
         @@SESSION.innodb_lock_wait_timeout = @@GLOBAL.innodb_lock_wait_timeout, \
         @@SESSION.max_statement_time",
    )
    .fetch_one(one.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (wait, lock, statement),
        (1, 1, 0.0),
        "the store's bounds stayed on the pooled connection"
    );
    one.pool().close().await;
    db.finish().await;
}

/// The claim goes to the server as one text query with its arguments written in
/// (`--! one round trip`): ids whose characters mean something in SQL text, or that a
/// collation would fold, are each claimed once as themselves, and each is a duplicate the
/// second time. The hash and the type arrive intact too.
#[tokio::test]
async fn a_claim_in_one_round_trip_keeps_every_id_as_its_bytes() {
    use inboxed_core::store::Claim;
    use inboxed_core::{ConsumerName, Envelope, MessageId};
    let db = TestDb::new().await;
    db.store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
    let consumer = ConsumerName::new("billing:eu-1").unwrap_or_else(|e| panic!("{e}"));
    let claim = |id: &'static str| {
        let store = db.store.clone();
        let consumer = consumer.clone();
        async move {
            let id = MessageId::new(id).unwrap_or_else(|e| panic!("{e}"));
            let payload = id.as_str().as_bytes().to_vec();
            let envelope = Envelope::new(id, payload).with_type("t'ype");
            claim_committed(&store, &consumer, &envelope).await
        }
    };
    for first in [true, false] {
        for &id in AWKWARD_IDS {
            let got = claim(id).await.unwrap_or_else(|e| panic!("{id:?}: {e}"));
            let want = if first {
                Claim::New
            } else {
                let hash = inboxed_core::PayloadHash::of(id.as_bytes());
                Claim::Duplicate {
                    stored: Some(inboxed_core::StoredHash::Full(hash)),
                }
            };
            assert_eq!(got, want, "{id:?}");
        }
    }
    let rows = sqlx::query(
        "SELECT message_id, message_type, payload_hash FROM inboxed_processed_messages \
         WHERE consumer_name = 'billing:eu-1'",
    )
    .fetch_all(db.store.pool())
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut stored: Vec<String> = Vec::new();
    for r in &rows {
        let id: Vec<u8> = r.get(0);
        let id = String::from_utf8(id).unwrap_or_else(|e| panic!("{e}"));
        let hash: Vec<u8> = r.get(2);
        let env = Envelope::new(
            MessageId::new(&id).unwrap_or_else(|e| panic!("{e}")),
            id.as_bytes().to_vec(),
        );
        assert_eq!(hash, env.hash().as_bytes().to_vec(), "{id:?}");
        assert_eq!(r.get::<Option<String>, _>(1).as_deref(), Some("t'ype"));
        stored.push(id);
    }
    stored.sort();
    let mut want: Vec<String> = AWKWARD_IDS.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(stored, want);
    assert_eq!(db.count("SELECT COUNT(*) FROM ledger").await, 0);
    db.finish().await;
}
