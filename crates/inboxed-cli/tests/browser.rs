//! The console in a real browser: `inboxed demo` fills a SQLite database, `inboxed serve` shows
//! it, and `tests/browser/console.mjs` (Debian's Chromium driven by playwright-core) checks each
//! view at a desktop's and at a phone's width and takes their screenshots
//! (`target/console-screenshots/`, or `INBOXED_SCREENSHOTS`). Fails, never skips, without
//! Chromium, Node or playwright-core: scripts/test.sh installs them.

use tokio::process::Command;

#[tokio::test]
async fn the_console_works_in_a_browser_on_the_demo_database() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("demo.db").display());
    let demo = std::process::Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(["demo", "--database-url", &url])
        .output()
        .expect("run inboxed demo");
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stdout)
    );

    let (_serve, addr) = crate::common::spawn_serve(&url, &["--listen", "127.0.0.1:0"]).await;
    let base = format!("http://{addr}");

    let shots = std::env::var("INBOXED_SCREENSHOTS").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/console-screenshots"
        )
        .to_owned()
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/console.mjs");
    let out = Command::new("node")
        .args([script, &base, &shots])
        .output()
        .await
        .expect("node must be installed (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "the browser test failed (scripts/test.sh installs chromium and, in tests/browser, \
         playwright-core):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
