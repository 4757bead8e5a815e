//! The billing handler tested as a service of your own would test its handler, with
//! `inboxed-testkit` on a real PostgreSQL (`DATABASE_URL`, default the local server): every
//! check passes it, and a broken variant that reads the balance and writes it back is caught.

use std::time::Duration;

use inboxed::postgres::PgStore;
use inboxed::{Envelope, Handler, HandlerError, MessageId, ResultExt};
use inboxed_testkit::Kit;
use sqlx::{PgConnection, Postgres};

use super::test_db::{database, finish};
use super::{Billing, Charge};

/// The kit for `handler`: the reset puts both balances back to 10,000 cents, the probe reads
/// every balance.
fn kit<H: Handler<Postgres>>(store: &PgStore, handler: H) -> Kit<PgStore, H, Vec<(String, i64)>> {
    Kit::new(
        store.clone(),
        handler,
        |store: PgStore| async move {
            sqlx::raw_sql("UPDATE accounts SET balance = 10000; DELETE FROM charges")
                .execute(store.pool())
                .await
                .map(drop)
        },
        |store: PgStore| async move {
            sqlx::query_as("SELECT id, balance FROM accounts ORDER BY id")
                .fetch_all(store.pool())
                .await
        },
    )
}

/// A charge of `cents` to `account`.
fn charge(id: &str, account: &str, cents: i64) -> Envelope {
    let body = serde_json::json!({ "account": account, "cents": cents });
    Envelope::new(
        MessageId::new(id).expect("a valid id"),
        serde_json::to_vec(&body).expect("JSON"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_billing_handler_passes_every_check() {
    let (store, _) = database().await;
    let k = kit(&store, Billing);
    if let Err(report) = k.check_all(&charge("charge-1", "alice", 250)).await {
        panic!("{report}");
    }
    let charges: Vec<Envelope> = (0..4)
        .map(|i| charge(&format!("charge-c{i}"), "alice", 100))
        .collect();
    k.concurrent_messages(&charges)
        .await
        .unwrap_or_else(|f| panic!("{f}"));
    finish(store).await;
}

/// The billing handler as it is often first written: read the balance, compute, write it back,
/// then tell a slow service (here a sleep) while the transaction is still open.
struct ReadThenWrite;

impl Handler<Postgres> for ReadThenWrite {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        let charge: Charge = msg.json().permanent()?;
        let balance: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
            .bind(&charge.account)
            .fetch_one(&mut *conn)
            .await?;
        sqlx::query("UPDATE accounts SET balance = $1 WHERE id = $2")
            .bind(balance - charge.cents)
            .bind(&charge.account)
            .execute(&mut *conn)
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handler_that_reads_then_writes_the_balance_is_caught() {
    let (store, _) = database().await;
    let k = kit(&store, ReadThenWrite);
    // Alone, one message at a time, it looks right: every duplicate and crash check passes.
    if let Err(report) = k.check_all(&charge("charge-1", "alice", 250)).await {
        panic!("{report}");
    }
    let charges: Vec<Envelope> = (0..4)
        .map(|i| charge(&format!("charge-c{i}"), "alice", 100))
        .collect();
    let failure = k
        .concurrent_messages(&charges)
        .await
        .expect_err("concurrent charges lose each other's updates");
    println!("{failure}");
    assert_eq!(failure.check, "concurrent_messages");
    finish(store).await;
}
