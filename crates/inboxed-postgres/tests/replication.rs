//! The durability check on a primary with a streaming standby (two clusters of the test's own):
//! an asynchronous standby can lose commits the consumers acknowledged if it is promoted, and
//! the check says so at start; a synchronous one is not warned about, unless commits do not
//! wait for it (`synchronous_commit = local`). A warning, not a refusal: the processor still
//! starts.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use inboxed_core::{ConsumerName, Processor, Store};
use inboxed_postgres::PgStore;
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Ledger, Pg};

async fn warnings(store: &PgStore) -> Vec<String> {
    store.check_durability().await.unwrap().warnings
}

/// Waits until the primary sees `n` standbys in `state` (`async`, `sync`).
async fn wait_for(pool: &PgPool, n: i64, state: &str) {
    for _ in 0..200 {
        let seen: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_replication \
             WHERE state = 'streaming' AND sync_state = $1",
        )
        .bind(state)
        .fetch_one(pool)
        .await
        .unwrap();
        if seen == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {n} {state} standby(s) within 10 s");
}

/// Sets `setting` in postgresql.auto.conf and reloads (two statements: ALTER SYSTEM refuses a
/// transaction block, which a multi-statement query is).
async fn set(pool: &PgPool, setting: &str, value: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER SYSTEM SET {setting} = '{value}'"
    )))
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn asynchronous_standbys_are_warned_about_at_start() {
    let primary = ThrowawayPg::start();
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&primary.url())
        .await
        .unwrap();
    let store = PgStore::new(pool.clone());
    store.migrate().await.unwrap();
    assert_eq!(warnings(&store).await, Vec::<String>::new(), "no standby");

    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    wait_for(&pool, 1, "async").await;
    let found = warnings(&store).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("1 standby(s) replicate asynchronously"),
        "{found:?}"
    );
    // Still only a warning: the processor starts.
    Processor::new(
        store.clone(),
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    )
    .ensure_ready()
    .await
    .unwrap();

    // A URL naming the standby first and the primary second reaches the primary.
    let either = PgStore::connect(
        &format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres",
            standby.port(),
            primary.port()
        ),
        2,
    )
    .await
    .unwrap();
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(either.pool())
        .await
        .unwrap();
    assert!(!in_recovery, "the multi-host store is on the primary");

    set(&pool, "synchronous_standby_names", "replica_a").await;
    wait_for(&pool, 1, "sync").await;
    assert_eq!(warnings(&store).await, Vec::<String>::new(), "synchronous");

    set(&pool, "synchronous_commit", "local").await;
    // Each session takes the reloaded setting when it handles the signal: soon, not at once.
    let mut found = Vec::new();
    for _ in 0..100 {
        found = warnings(&store).await;
        if !found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        found
            .iter()
            .any(|w| w.contains("synchronous_commit = local")),
        "{found:?}"
    );
}

/// A write that reaches a standby is the server's state, not the message's fault: a store
/// whose one host is a standby fails each message as unavailable (requeued, retried) and
/// dead-letters nothing. The following pool goes further: it never connects to a standby, and
/// after it follows a promotion it hands out no connection to the old primary, though that one
/// is still up (split brain: fencing it is the failover manager's part).
#[tokio::test]
async fn no_write_goes_to_a_standby_or_an_old_primary() {
    use inboxed_core::StoreError;
    use inboxed_postgres::failover;
    use inboxed_test::Script;

    let primary = ThrowawayPg::start();
    let admin = inboxed_test::restart::store_on(&primary)
        .await
        .pool()
        .clone();
    let standby = ThrowawayPg::standby_of(&primary, "replica_a");
    wait_for(&admin, 1, "async").await;

    let on_standby = PgStore::connect(&standby.url(), 2).await.unwrap();
    let processor = Processor::new(
        on_standby,
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let envelope = Script {
        amount: 1,
        ..Script::default()
    }
    .message("s-1");
    let err = processor.process(&envelope, Some(1)).await.unwrap_err();
    assert!(
        err.is_transient(),
        "a write refused by a standby is retried: {err}"
    );
    let letters: i64 = sqlx::query_scalar("SELECT count(*) FROM inboxed_dead_letters")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(letters, 0, "nothing dead-lettered");

    // The standby first in the URL: the pool is on the primary, its connections warm.
    let (pool, follower) = failover::connect(
        &format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres",
            standby.port(),
            primary.port()
        ),
        PgPoolOptions::new().max_connections(4).min_connections(0),
        Duration::from_millis(100),
    )
    .await
    .unwrap();
    let ports = |pool: PgPool| async move {
        let mut held = Vec::new();
        let mut ports = Vec::new();
        for _ in 0..4 {
            let mut conn = pool.acquire().await.unwrap();
            let port: String = sqlx::query_scalar("SELECT current_setting('port')")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            ports.push(port.parse::<u16>().unwrap());
            held.push(conn);
        }
        ports
    };
    assert_eq!(ports(pool.clone()).await, [primary.port(); 4]);

    // A connection that lands on a standby (its host demoted between two probes) is refused
    // as a connection failure.
    // (The pool retries a failed connection until its acquire timeout.)
    let fresh = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(1));
    let (one, _kept) = failover::connect(
        &format!("postgres://postgres@127.0.0.1:{}/postgres", primary.port()),
        fresh,
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    one.set_connect_options(standby.url().parse().unwrap());
    let refused = one.acquire().await.unwrap_err();

    assert!(
        matches!(StoreError::from_sqlx(refused), StoreError::Unavailable(_)),
        "a standby is refused as unavailable"
    );

    // Split brain: the standby promoted while the old primary still runs. The follower moves
    // to the first primary in the URL's order, and no idle connection to the old one is
    // handed out again.
    standby.promote();
    for _ in 0..100 {
        if follower.primary() == format!("127.0.0.1:{}", standby.port()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(follower.primary(), format!("127.0.0.1:{}", standby.port()));
    assert_eq!(
        ports(pool.clone()).await,
        [standby.port(); 4],
        "every connection handed out after the move is to the new primary"
    );
}
