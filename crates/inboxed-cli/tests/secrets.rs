//! Passwords in URLs never appear in what the CLI prints: every command that takes a URL is run
//! with one holding a password (on success and on failure, at debug logging), and everything
//! it wrote (standard output and error, `--help`, the pages `serve` answers) is searched for it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use inboxed_test::{Backend, Pg};

const SECRET: &str = "s3cr3t-Pa55w0rd";

/// What a case is called, its arguments, and its environment.
type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// `url` with the password [`SECRET`] for its user.
fn with_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://postgres:{SECRET}@{rest}")
}

/// Runs `inboxed ARGS` (environment `env`) for at most `limit`, then stops it: everything it
/// printed, on both streams.
async fn output(args: &[&str], env: &[(&str, &str)], limit: Duration) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inboxed"))
        .args(args)
        .envs(env.iter().copied())
        .env("INBOXED_LOG", "debug")
        // An unreachable database fails after a second of retries, not the default ten.
        .env("INBOXED_CONNECT_TIMEOUT", "1s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run inboxed");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    // Appended to across the limit: a daemon that waits for its broker is still running then.
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let read = async {
        let _ = tokio::join!(out.read_to_end(&mut o), err.read_to_end(&mut e));
    };
    if tokio::time::timeout(limit, read).await.is_err() {
        child.kill().await.unwrap();
        let _ = out.read_to_end(&mut o).await;
        let _ = err.read_to_end(&mut e).await;
    }
    let _ = child.wait().await;
    format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    )
}

fn assert_hidden(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET),
        "{what} printed the password:\n{text}"
    );
}

#[tokio::test]
async fn passwords_in_urls_never_reach_any_output() {
    let db = Pg::create().await;
    let url = with_password(&db.locator);
    let unreachable = format!("postgres://postgres:{SECRET}@127.0.0.1:1/none");
    let short = Duration::from_secs(15);
    let amqp = format!("amqp://guest:{SECRET}@127.0.0.1:5672/%2f");
    let redis = format!("redis://:{SECRET}@127.0.0.1:6379");
    let cases: Vec<Case<'_>> = vec![
        ("migrate", vec!["migrate", "--database-url", &url], vec![]),
        (
            "migrate, unreachable",
            vec!["migrate", "--database-url", &unreachable],
            vec![],
        ),
        ("stats", vec!["stats", "--database-url", &url], vec![]),
        (
            "stats --json",
            vec!["stats", "--json", "--database-url", &url],
            vec![],
        ),
        (
            "stats, unreachable",
            vec!["stats", "--database-url", &unreachable],
            vec![],
        ),
        (
            "dead-letters list",
            vec!["dead-letters", "list", "--database-url", &url],
            vec![],
        ),
        (
            "relay, refused by RabbitMQ",
            vec![
                "relay",
                "--from",
                &amqp,
                "--queue",
                "q",
                "--to",
                &url,
                "--consumer",
                "c",
            ],
            vec![],
        ),
        (
            "relay, refused by Redis",
            vec![
                "relay",
                "--from",
                &redis,
                "--stream",
                "s",
                "--to",
                &url,
                "--consumer",
                "c",
            ],
            vec![],
        ),
        (
            "relay, unreachable database",
            vec![
                "relay",
                "--from",
                &amqp,
                "--queue",
                "q",
                "--to",
                &unreachable,
                "--consumer",
                "c",
            ],
            vec![],
        ),
        (
            "relay --help with the URLs in the environment",
            vec!["relay", "--help"],
            vec![
                ("INBOXED_RELAY_FROM", amqp.as_str()),
                ("INBOXED_RELAY_TO", url.as_str()),
            ],
        ),
        (
            "relay with the URLs in the environment",
            vec!["relay", "--queue", "q", "--consumer", "c"],
            vec![
                ("INBOXED_RELAY_FROM", amqp.as_str()),
                ("INBOXED_RELAY_TO", url.as_str()),
            ],
        ),
    ];
    // All at once: the relays refused by their broker wait for it until the limit.
    let runs = cases.iter().map(|(_, args, env)| output(args, env, short));
    let texts = futures_util::future::join_all(runs).await;
    for ((what, _, _), text) in cases.iter().zip(texts) {
        assert!(!text.is_empty(), "{what} printed nothing");
        assert_hidden(what, &text);
    }

    // A running `serve`: its log, and the pages it answers.
    let port = inboxed_test::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let serving = tokio::spawn({
        let (url, listen) = (url.clone(), listen.clone());
        async move {
            let args = [
                "serve",
                "--database-url",
                &url,
                "--listen",
                &listen,
                "--interval",
                "1s",
            ];
            output(&args, &[], Duration::from_secs(4)).await
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    for page in ["/", "/metrics", "/health"] {
        let (_, body) = common::http_get(&listen, page).await;
        assert_hidden(&format!("serve's {page}"), &body);
    }
    assert_hidden("serve", &serving.await.unwrap());
    db.finish().await;
}
