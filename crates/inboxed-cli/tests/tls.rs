//! TLS to PostgreSQL with `sslmode=verify-full`, against a cluster of the test's own whose
//! certificate (for `localhost`) a CA made by the test signs: the library's store applies a
//! message once over TLS (the server says the session is encrypted), the binary migrates and
//! reads through the same URL, and an untrusted CA, the system's roots alone and a host name the
//! certificate does not carry are refused with errors that name the certificate's fault.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use sqlx::postgres::PgPoolOptions;

use inboxed_core::{ConsumerName, Outcome, Processor};
use inboxed_postgres::PgStore;
use inboxed_test::backend::LEDGER;
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::tls::TestCa;
use inboxed_test::{Ledger, Pg, credit};

use crate::common;

/// Runs the binary: its exit code and both its streams.
fn inboxed(args: &[&str]) -> (i32, String) {
    common::inboxed_with(&[], args)
}

#[tokio::test]
async fn postgres_verify_full_applies_once_and_refuses_what_it_must() {
    let ca = TestCa::new();
    let pg = ThrowawayPg::start_tls(&ca);
    let verify =
        |root: &std::path::Path| format!("sslmode=verify-full&sslrootcert={}", root.display());
    let url = pg.url_at("localhost", &verify(&ca.ca_file()));

    let (code, out) = inboxed(&["migrate", "--database-url", &url]);
    assert_eq!(code, 0, "{out}");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    let encrypted: bool =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(encrypted, "the session is encrypted");
    sqlx::raw_sql(LEDGER).execute(&pool).await.unwrap();
    let store = PgStore::new(pool.clone());
    let processor = Processor::new(
        store,
        ConsumerName::new("ledger").unwrap(),
        Ledger::<Pg>::default(),
    );
    let message = credit("tls-1", 5);
    assert!(matches!(
        processor.process(&message, None).await.unwrap(),
        Outcome::Processed
    ));
    assert!(matches!(
        processor.process(&message, None).await.unwrap(),
        Outcome::Duplicate
    ));
    let (rows, sum): (i64, i64) =
        sqlx::query_as("SELECT count(*), CAST(coalesce(sum(amount), 0) AS BIGINT) FROM ledger")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((rows, sum), (1, 5), "applied once over TLS");
    let (code, out) = inboxed(&["stats", "--database-url", &url]);
    assert_eq!(code, 0, "{out}");

    for (case, url, expect) in [
        (
            "an untrusted CA",
            pg.url_at("localhost", &verify(&ca.wrong_ca_file())),
            "UnknownIssuer",
        ),
        (
            "the system's roots alone",
            pg.url_at("localhost", "sslmode=verify-full"),
            "UnknownIssuer",
        ),
        (
            "a host name the certificate does not carry",
            pg.url_at("127.0.0.1", &verify(&ca.ca_file())),
            "not valid for name",
        ),
    ] {
        let (code, out) = inboxed(&["stats", "--database-url", &url]);
        assert_ne!(code, 0, "{case}: {out}");
        assert!(out.contains(expect), "{case}: {out}");
        let err = PgPoolOptions::new().connect(&url).await.unwrap_err();
        assert!(err.to_string().contains(expect), "{case}: {err}");
    }
    pool.close().await;
}
