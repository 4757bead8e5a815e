//! The start-up check of what the inbox needs of a server that speaks PostgreSQL's protocol.
//! PostgreSQL passes. An engine whose advisory locks do not exclude (CockroachDB grants every
//! lock to every session) is played by PostgreSQL with a `pg_try_advisory_xact_lock` that always
//! answers true, first on the connections' search path: the processor refuses to start, naming
//! the capability.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use inboxed_core::{ConsumerName, Processor, Store, StoreError};
use inboxed_postgres::PgStore;
use inboxed_test::{Backend, Ledger, Pg};

#[tokio::test]
async fn a_server_whose_advisory_locks_do_not_exclude_is_refused_by_name() {
    let db = Pg::create().await;
    db.store
        .check_durability()
        .await
        .expect("PostgreSQL has what the inbox needs");

    sqlx::raw_sql(
        "CREATE SCHEMA lenient; \
         CREATE FUNCTION lenient.pg_try_advisory_xact_lock(bigint) RETURNS boolean \
         LANGUAGE sql AS 'SELECT true'",
    )
    .execute(db.store.pool())
    .await
    .unwrap();
    let options = PgConnectOptions::from_str(&db.locator)
        .unwrap()
        .options([("search_path", "lenient, pg_catalog, public")]);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .unwrap();
    let lenient = PgStore::new(pool);
    let err = lenient.check_durability().await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::ServerUnfit {
                setting: "advisory locks",
                ..
            }
        ),
        "{err}"
    );
    let refused = Processor::new(
        lenient,
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    )
    .ensure_ready()
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("advisory locks = not exclusive"),
        "the refusal names the capability: {refused}"
    );
    db.finish().await;
}

/// The same probe through tokio-postgres's store: PostgreSQL passes, the lenient locks are
/// refused by name.
#[cfg(feature = "tokio-postgres")]
#[tokio::test]
async fn tokio_postgres_refuses_advisory_locks_that_do_not_exclude() {
    use inboxed_postgres::tokio_pg::TokioPgStore;
    use inboxed_test::TokioPg;

    let db = TokioPg::create().await;
    db.store
        .check_durability()
        .await
        .expect("PostgreSQL has what the inbox needs");
    let client = db.store.pool().get().await.unwrap();
    client
        .batch_execute(
            "CREATE SCHEMA lenient; \
             CREATE FUNCTION lenient.pg_try_advisory_xact_lock(bigint) RETURNS boolean \
             LANGUAGE sql AS 'SELECT true'",
        )
        .await
        .unwrap();
    drop(client);
    let mut config: tokio_postgres::Config = db.locator.parse().unwrap();
    config.options("-c search_path=lenient,pg_catalog,public");
    let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .unwrap();
    let err = TokioPgStore::new(pool)
        .check_durability()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::ServerUnfit {
                setting: "advisory locks",
                ..
            }
        ),
        "{err}"
    );
    db.finish().await;
}
