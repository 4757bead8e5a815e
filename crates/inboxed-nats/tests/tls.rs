//! TLS to a NATS server of the test's own (`nats-server --tls`, a certificate for `localhost`
//! signed by a CA the test makes). Through `tls://localhost` and the CA, the source consumes
//! with the screen still in front of async-nats: valid messages are applied once and one whose
//! header async-nats could not read is dead-lettered naming the field. An untrusted CA, a host
//! name the certificate does not carry, and a CA file holding no certificate are refused at
//! connect with errors that say so.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use async_nats::jetstream;
use serde_json::json;

use inboxed_core::error_chain;
use inboxed_nats::{NatsConfig, NatsError, NatsSource};
use inboxed_test::raw_amqp::hex;
use inboxed_test::raw_nats::{header_block, produce_tls};
use inboxed_test::tls::{TestCa, TlsServer};
use inboxed_test::wire::{assert_dead_letters, drain_and_check_ledger};
use inboxed_test::{Backend, Pg};

async fn connect_error(config: NatsConfig) -> String {
    match NatsSource::connect(config).await {
        Ok(_) => panic!("connected where TLS must refuse"),
        Err(e) => error_chain(&e),
    }
}

#[tokio::test]
async fn consumes_through_tls_with_the_screen_and_refuses_what_it_must() {
    let ca = TestCa::new();
    let server = TlsServer::nats(&ca);
    let url = format!("tls://localhost:{}", server.port);
    let db = Pg::create().await;
    let (stream, subject) = ("TLS", "inboxed.tls");
    {
        let client = async_nats::ConnectOptions::new()
            .add_root_certificates(ca.ca_file())
            .connect(&url)
            .await
            .unwrap();
        inboxed_test::nats::create_stream(&jetstream::new(client), stream, subject).await;
    }
    let mut messages = Vec::new();
    for i in 1..=50_i64 {
        let id = format!("Nats-Msg-Id: t-{i}");
        messages.push(
            json!({"subject": subject, "headers": header_block(&[id.as_bytes()]),
                             "body": hex(format!(r#"{{"amount": {i}}}"#).as_bytes())}),
        );
        if i == 25 {
            messages.push(json!({"subject": subject,
                "headers": header_block(&[b"Nats-Msg-Id: bad", b"X-Info: \xff"]),
                "body": hex(br#"{"amount": 1000000}"#)}));
        }
    }
    produce_tls(server.port, &ca.ca_file(), messages).await;

    let config = NatsConfig::new(url.as_str(), stream, "ledger")
        .ack_wait(Duration::from_secs(5))
        .tls_ca_file(ca.ca_file());
    let source = NatsSource::connect(config).await.unwrap();
    drain_and_check_ledger(&db, source, (50, 50 * 51 / 2), 1).await;
    assert_dead_letters(&db, 1, &["header X-Info: not valid UTF-8"]).await;

    // A CA that did not sign the server's certificate.
    let wrong = NatsConfig::new(url.as_str(), stream, "ledger").tls_ca_file(ca.wrong_ca_file());
    let err = connect_error(wrong).await;
    assert!(err.contains("UnknownIssuer"), "{err}");
    // The system's roots alone, to a server that requires TLS behind a nats:// URL.
    let plain = format!("nats://localhost:{}", server.port);
    let err = connect_error(NatsConfig::new(plain, stream, "ledger")).await;
    assert!(err.contains("UnknownIssuer"), "{err}");
    // The right CA, and a host name the certificate does not carry.
    let ip = NatsConfig::new(format!("tls://127.0.0.1:{}", server.port), stream, "ledger")
        .tls_ca_file(ca.ca_file());
    let err = connect_error(ip).await;
    assert!(
        err.contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    // A CA file that holds a key instead.
    let key = NatsConfig::new(url.as_str(), stream, "ledger").tls_ca_file(ca.key_file());
    let err = NatsSource::connect(key).await.unwrap_err();
    assert!(matches!(err, NatsError::CaFile(_)), "{err}");
    assert!(error_chain(&err).contains("no PEM certificate"), "{err}");
    db.finish().await;
}
