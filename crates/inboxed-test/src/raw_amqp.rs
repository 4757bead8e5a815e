//! A producer outside Rust for the wire-level tests: `scripts/raw_amqp_producer.py` writes AMQP
//! frames byte by byte, so a test can put on a real RabbitMQ what no Rust client would send.
//! Byte strings travel to it as hex.

use std::fmt::Write as _;

use lapin::uri::AMQPUri;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// `bytes` in hex, as the producer takes them.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Publishes `messages` (each as the script's header describes) to the broker at `url` with
/// publisher confirms; all are confirmed when it returns.
///
/// # Panics
/// When the broker refuses one, or python3 is missing.
pub async fn produce(url: &str, messages: Vec<Value>) {
    let status = try_produce(url, messages).await;
    assert!(status.success(), "the raw producer failed: {status}");
}

/// Runs the raw producer on `messages`: it fails when the broker refuses one.
///
/// # Panics
/// When `url` is no AMQP URI, or python3 is missing.
pub async fn try_produce(url: &str, messages: Vec<Value>) -> std::process::ExitStatus {
    let uri: AMQPUri = url.parse().expect("an AMQP URI");
    let spec = json!({
        "host": uri.authority.host,
        "port": uri.authority.port,
        "user": uri.authority.userinfo.username,
        "password": uri.authority.userinfo.password,
        "vhost": uri.vhost,
        "messages": messages,
    });
    run_script("raw_amqp_producer.py", &spec).await
}

/// Runs `scripts/<name>` with python3, `spec` on its standard input; its exit status.
///
/// # Panics
/// When python3 is missing.
pub(crate) async fn run_script(name: &str, spec: &Value) -> std::process::ExitStatus {
    let script = format!("{}/scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs the raw producer");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(spec.to_string().as_bytes())
        .await
        .expect("spec written");
    drop(stdin);
    child.wait().await.expect("the producer ends")
}
