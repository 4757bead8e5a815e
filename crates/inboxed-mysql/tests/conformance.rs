//! The guarantee suite on MySQL or MariaDB (`INBOXED_MYSQL_URL`, default the local MariaDB):
//! every part (the outbox's relay lock-held and under a lease), and `serializable_conflicts_are_retried` and
//! `custom_namespace_keeps_tables_apart` as on the other engines. Left out: `non_durable_commit_setting_is_refused` (MySQL's
//! durability settings are global; the refusal is tested on `inboxed_mysql::judge`) and
//! `batch_whose_commit_fails_isolates_the_culprit` (it makes a COMMIT fail with a deferred
//! foreign key, and InnoDB checks every foreign key at once: the handler fails instead, which
//! other cases cover).
inboxed_test::conformance_tests!(@dedup inboxed_test::My);
inboxed_test::conformance_tests!(@inbox inboxed_test::My);
inboxed_test::conformance_tests!(@retention inboxed_test::My);
inboxed_test::conformance_tests!(@outbox inboxed_test::My);
inboxed_test::conformance_tests!(@testkit inboxed_test::My);
inboxed_test::conformance_tests!(@cases inboxed_test::My;
    serializable_conflicts_are_retried,
    custom_namespace_keeps_tables_apart,
);

/// The processor's guarantee cases on the time-partitioned table (`MySqlStore::partitioned`).
mod partitioned {
    inboxed_test::conformance_tests!(inboxed_test::MyParted, dedup_only);
}

/// Every session of the pool killed by the server while idle (a restart, `wait_timeout`, an
/// operator's `KILL`): a second later, the next message goes through on a new connection.
/// Handed out unchecked, the dead connection failed the call.
#[tokio::test]
async fn a_connection_ended_while_idle_is_replaced_before_it_is_used() {
    use inboxed_core::{ConsumerName, Outcome, Processor};
    use inboxed_mysql::MySqlStore;
    use inboxed_test::conformance::ledger_state;
    use inboxed_test::handler::{Ledger, credit};
    use inboxed_test::{Backend, My};
    use sqlx::{AssertSqlSafe, Connection};

    let db = My::create().await;
    let store = MySqlStore::connect(&db.locator, 2).await.unwrap();
    let processor = Processor::new(
        store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<My>::default(),
    );
    processor.ensure_ready().await.unwrap();
    let first = processor.process(&credit("m-1", 5), Some(1)).await;
    assert_eq!(first.unwrap(), Outcome::Processed);
    let mut admin = sqlx::MySqlConnection::connect(&db.locator).await.unwrap();
    let sessions: Vec<i64> = sqlx::query_scalar(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() \
         AND ID <> CONNECTION_ID()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!sessions.is_empty(), "no session of the pool to kill");
    for id in sessions {
        sqlx::query(AssertSqlSafe(format!("KILL {id}")))
            .execute(&mut admin)
            .await
            .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let second = processor.process(&credit("m-2", 7), Some(1)).await;
    assert_eq!(second.unwrap(), Outcome::Processed);
    assert_eq!(ledger_state(&db).await, (2, 12));
    store.pool().close().await;
    db.finish().await;
}
