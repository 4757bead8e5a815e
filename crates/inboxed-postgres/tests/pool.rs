//! The pool `PgStore::connect` builds (`PgStore::pool_options`): a connection that sat idle a
//! second or more is checked as the pool hands it out; one in steady use is not.

use std::time::Duration;

use inboxed_core::{ConsumerName, Outcome, Processor};
use inboxed_postgres::PgStore;
use inboxed_test::conformance::ledger_state;
use inboxed_test::handler::{Ledger, credit};
use inboxed_test::{Backend, Pg};
use sqlx::Connection;

/// Every session of the pool ended by the server while idle (a restart, an idle timeout, an
/// operator's `pg_terminate_backend`): a second later, the next message goes through on a new
/// connection. Handed out unchecked, the dead connection failed the call.
#[tokio::test]
async fn a_connection_ended_while_idle_is_replaced_before_it_is_used() {
    let db = Pg::create().await;
    let store = PgStore::connect(&db.locator, 2).await.unwrap();
    let consumer = ConsumerName::new("ledger").unwrap();
    let processor = Processor::new(store.clone(), consumer, Ledger::<Pg>::default());
    processor.ensure_ready().await.unwrap();
    let first = processor.process(&credit("m-1", 5), Some(1)).await;
    assert_eq!(first.unwrap(), Outcome::Processed);
    let mut admin = sqlx::PgConnection::connect(&db.locator).await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(ended.contains(&true), "no session of the pool was ended");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let second = processor.process(&credit("m-2", 7), Some(1)).await;
    assert_eq!(second.unwrap(), Outcome::Processed);
    assert_eq!(ledger_state(&db).await, (2, 12));
    store.pool().close().await;
    db.finish().await;
}
