//! A NATS producer outside Rust for the wire-level tests: `scripts/raw_nats_producer.py` writes
//! the protocol byte by byte, so a test can publish into JetStream header blocks that no Rust
//! client would send.

use serde_json::{Value, json};

use crate::raw_amqp::run_script;

/// A header block of `NATS/1.0` and `lines` (each `name: value` as raw bytes), in hex, as the
/// producer takes it.
#[must_use]
pub fn header_block(lines: &[&[u8]]) -> String {
    let mut block = b"NATS/1.0\r\n".to_vec();
    for line in lines {
        block.extend_from_slice(line);
        block.extend_from_slice(b"\r\n");
    }
    block.extend_from_slice(b"\r\n");
    crate::raw_amqp::hex(&block)
}

/// Publishes `messages` (each as the script's header describes) to the server at `url`
/// (`nats://host:port`), each acked by JetStream when it returns.
///
/// # Panics
/// When JetStream refuses one, or python3 is missing.
pub async fn produce(url: &str, messages: Vec<Value>) {
    let address = url.trim_start_matches("nats://");
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "4222"));
    let spec =
        json!({"host": host, "port": port.parse::<u16>().expect("a port"), "messages": messages});
    let status = run_script("raw_nats_producer.py", &spec).await;
    assert!(status.success(), "the raw NATS producer failed: {status}");
}

/// As [`produce`], over TLS to `127.0.0.1:port`, trusting `ca_file` and checking the name
/// `localhost`.
///
/// # Panics
/// As [`produce`], or when the handshake fails.
pub async fn produce_tls(port: u16, ca_file: &std::path::Path, messages: Vec<Value>) {
    let spec = json!({"host": "127.0.0.1", "port": port, "messages": messages,
                      "tls": {"cafile": ca_file, "server_name": "localhost"}});
    let status = run_script("raw_nats_producer.py", &spec).await;
    assert!(
        status.success(),
        "the raw NATS producer (TLS) failed: {status}"
    );
}
