//! What the CLI's process tests share.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` on `addr` over plain HTTP/1.0: the status code and the body.
pub(crate) async fn http_get(addr: &str, path: &str) -> (u16, String) {
    http_request(addr, "GET", path).await
}

/// One HTTP/1.0 request of `method` for `path`, without a body: the status and the body.
pub(crate) async fn http_request(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// Runs the `inboxed` binary: its exit code and its standard output.
pub(crate) fn inboxed(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(args)
        .output()
        .expect("run inboxed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

/// Runs the `inboxed` binary with `env` added: its exit code and its standard output, then its
/// standard error.
pub(crate) fn inboxed_with(env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run inboxed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

pub(crate) use inboxed_test::amqp::url as amqp_url;

/// SIGTERM, then the exit status and what the relay printed.
pub(crate) async fn terminate(child: tokio::process::Child) -> (bool, String) {
    let (_, code, out) = stop(child, std::time::Duration::from_secs(30)).await;
    (code == Some(0), out)
}

/// SIGTERM, then how long `child` took to exit (at most `limit`), its exit code and what it
/// printed.
pub(crate) async fn stop(
    mut child: tokio::process::Child,
    limit: std::time::Duration,
) -> (std::time::Duration, Option<i32>, String) {
    let sent = std::time::Instant::now();
    let pid = child.id().unwrap().to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = tokio::time::timeout(limit, child.wait())
        .await
        .unwrap_or_else(|_| panic!("exits within {limit:?} of SIGTERM"))
        .unwrap();
    let took = sent.elapsed();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    (took, status.code(), out)
}

/// Starts `inboxed serve` on `database_url` with `args` added (`--listen` among them); returns
/// the process, killed when dropped, and the `host:port` it printed it serves on.
pub(crate) async fn spawn_serve(
    database_url: &str,
    args: &[&str],
) -> (tokio::process::Child, String) {
    spawn_serve_with(&[&["--database-url", database_url], args].concat()).await
}

/// Starts `inboxed serve` with `args` (`--listen` among them); returns the process, killed
/// when dropped, and the `host:port` it printed it serves on.
pub(crate) async fn spawn_serve_with(args: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .arg("serve")
        .args(args)
        .env("INBOXED_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start inboxed serve");
    let stdout = child.stdout.take().expect("serve's stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("serve prints its address")
        .expect("serve's stdout")
        .expect("a line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("an address")
        .to_owned();
    (child, addr)
}

/// Scrapes `inboxed serve`'s `/metrics` at `addr` until every line in `want` is there (its
/// gauges refresh every second in the tests).
pub(crate) async fn scrape_until(addr: &str, want: &[&str]) -> String {
    let mut body = String::new();
    for _ in 0..100 {
        body = http_get(addr, "/metrics").await.1;
        if want.iter().all(|w| body.lines().any(|l| l == *w)) {
            return body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("not all of {want:?} in:\n{body}");
}
