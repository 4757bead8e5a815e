//! TLS to a Redis server of the test's own (`redis-server --tls-port`, a certificate for
//! `localhost` signed by a CA the test makes): through `rediss://localhost` and the CA the
//! source consumes every entry once; an untrusted CA, a host name the certificate does not
//! carry, and a CA file holding no certificate are refused at connect with errors that say so
//! (the first two after the connection manager's retries, about 7 s each).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use redis::AsyncCommands;

use inboxed_core::error_chain;
use inboxed_redis::{RedisConfig, RedisError, RedisSource};
use inboxed_test::tls::{TestCa, TlsServer};
use inboxed_test::wire::drain_and_check_ledger;
use inboxed_test::{Backend, Pg};

async fn connect_error(config: RedisConfig) -> String {
    match RedisSource::connect(config).await {
        Ok(_) => panic!("connected where TLS must refuse"),
        Err(e) => error_chain(&e),
    }
}

#[tokio::test]
async fn consumes_through_tls_and_refuses_what_it_must() {
    let ca = TestCa::new();
    let server = TlsServer::redis(&ca);
    let url = format!("rediss://localhost:{}", server.port);
    let db = Pg::create().await;
    let mut conn = inboxed_redis::client(&url, Some(&ca.ca_file()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for i in 1..=50_i64 {
        let (id, body) = (format!("t-{i}"), format!(r#"{{"amount": {i}}}"#));
        let fields = [("message_id", id.as_bytes()), ("payload", body.as_bytes())];
        let _: String = conn.xadd("orders", "*", &fields).await.unwrap();
    }
    let mut config = RedisConfig::new(url.as_str(), "orders", "ledger").tls_ca_file(ca.ca_file());
    config.block = Duration::from_millis(200);
    let source = RedisSource::connect(config).await.unwrap();
    drain_and_check_ledger(&db, source, (50, 50 * 51 / 2), 0).await;

    let wrong = RedisConfig::new(url.as_str(), "orders", "ledger").tls_ca_file(ca.wrong_ca_file());
    let err = connect_error(wrong).await;
    assert!(err.contains("UnknownIssuer"), "{err}");
    let ip = format!("rediss://127.0.0.1:{}", server.port);
    let err =
        connect_error(RedisConfig::new(ip, "orders", "ledger").tls_ca_file(ca.ca_file())).await;
    assert!(
        err.contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    let key = RedisConfig::new(url.as_str(), "orders", "ledger").tls_ca_file(ca.key_file());
    let err = RedisSource::connect(key).await.unwrap_err();
    assert!(matches!(err, RedisError::CaFile(_)), "{err}");
    db.finish().await;
}
