//! Bad input at the wire, through a real Redis: the broker's own tool (`redis-cli`, given raw
//! bytes as its arguments and on standard input) adds entries that no Rust client decodes into
//! a `String` map (field names that are not UTF-8, a field given twice) and bad keys (not
//! UTF-8, NUL, empty, past 512 bytes) beside valid entries and a 10 MiB body. The consumer, at
//! prefetch 32 and concurrency 32, must keep running: every valid entry applied once (ledger
//! count and sum), every bad one dead-lettered with its field named, nothing left pending.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use inboxed_redis::{RedisConfig, RedisSource};
use inboxed_test::wire::{assert_dead_letters, dead_letter_payload_len, drain_and_check_ledger};
use inboxed_test::{Backend, Pg};

fn redis_url() -> String {
    std::env::var("INBOXED_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// `redis-cli -u URL [-x] ARGS…`, each argument its raw bytes; with `stdin`, `-x` makes it the
/// last argument (a value past what one command-line argument may hold).
fn redis_cli(args: &[&[u8]], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut cmd = Command::new("redis-cli");
    cmd.arg("-u").arg(redis_url());
    if stdin.is_some() {
        cmd.arg("-x");
    }
    cmd.args(args.iter().map(|a| OsStr::from_bytes(a)));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli (Debian's redis-tools) is installed with redis-server");
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redis-cli {out:?}");
    assert!(
        !out.stdout.starts_with(b"ERR"),
        "redis-cli: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    out.stdout
}

fn credit(amount: i64) -> Vec<u8> {
    format!(r#"{{"amount": {amount}}}"#).into_bytes()
}

#[tokio::test]
async fn no_bytes_a_producer_can_send_stall_the_stream() {
    let db = Pg::create().await;
    let stream = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    let s = stream.as_bytes();
    let add = |fields: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"XADD", s, b"*"];
        args.extend_from_slice(fields);
        redis_cli(&args, None);
    };
    let big_amount = credit(1_000_000);
    // Each bad entry and the words its dead letter's error must hold.
    let bad: Vec<(Vec<&[u8]>, &str)> = vec![
        (
            vec![b"message_id", b"m-\xff", b"payload", &big_amount],
            "Redis message_id field is not valid UTF-8 (bytes m-\\xff)",
        ),
        (
            vec![b"message_id", b"", b"payload", &big_amount],
            "no message id",
        ),
        (vec![b"payload", &big_amount], "no message id"),
        (
            vec![b"message_id", &[b'k'; 513], b"payload", &big_amount],
            "513 bytes",
        ),
        (
            vec![
                b"message_id",
                b"twice-1",
                b"message_id",
                b"twice-2",
                b"payload",
                &big_amount,
            ],
            "field message_id appears 2 times",
        ),
        (
            vec![b"message_id", b"no-payload"],
            "expected value at line 1 column 1",
        ),
    ];
    let (mut rows, mut sum) = (0_i64, 0_i64);
    let mut bad_entries = bad.iter();
    for i in 0..300_i64 {
        if i % 25 == 0
            && let Some((fields, _)) = bad_entries.next()
        {
            add(fields);
        }
        let id = format!("w-{i}");
        let amount = credit(i + 1);
        // A field name that is not UTF-8 beside a valid key: an entry like any other.
        let odd: &[u8] = if i % 7 == 0 {
            b"x-\xfe\xff"
        } else {
            b"x-plain"
        };
        add(&[
            b"message_id",
            id.as_bytes(),
            odd,
            b"\xff\xfe",
            b"payload",
            &amount,
        ]);
        if i % 10 == 0 {
            add(&[b"message_id", id.as_bytes(), b"payload", &amount]);
        }
        rows += 1;
        sum += i + 1;
    }
    for (fields, _) in bad_entries {
        add(fields);
    }
    // NUL cannot travel in a command-line argument: `-x` sends it as the last one.
    redis_cli(
        &[b"XADD", s, b"*", b"payload", &big_amount, b"message_id"],
        Some(b"m\x00nul"),
    );
    // A 10 MiB body that is not JSON, under a valid key: the handler's own permanent error.
    let garbage = b"\xff\x00garbag".repeat(1_310_720);
    redis_cli(
        &[b"XADD", s, b"*", b"message_id", b"big-body", b"payload"],
        Some(&garbage),
    );

    let mut config = RedisConfig::new(redis_url(), stream.as_str(), "ledger");
    config.block = Duration::from_millis(200);
    let source = RedisSource::connect(config).await.unwrap();
    let dead = i64::try_from(bad.len()).unwrap() + 2;
    drain_and_check_ledger(&db, source, (rows, sum), dead).await;
    let expect: Vec<&str> = bad
        .iter()
        .map(|(_, e)| *e)
        .chain(["NUL byte at offset 1"])
        .collect();
    assert_dead_letters(&db, usize::try_from(dead).unwrap(), &expect).await;
    let big = dead_letter_payload_len(&db, "big-body").await;
    assert_eq!(
        big,
        10 * 1024 * 1024,
        "the 10 MiB body is kept byte for byte"
    );
    let pending = redis_cli(&[b"XPENDING", s, b"ledger"], None);
    assert!(
        pending.starts_with(b"0\n"),
        "entries left pending: {}",
        String::from_utf8_lossy(&pending)
    );
    redis_cli(&[b"DEL", s], None);
    db.finish().await;
}

/// A field at the server's maximum bulk length (a server of the test's own with
/// `proto-max-bulk-len 1mb`, the least Redis allows; the default, 512 MB, is the same check at
/// a size a test machine cannot spare) that is not JSON is dead-lettered with every byte kept;
/// one byte more is refused by the server at `XADD`, and the entry after it is applied.
#[tokio::test]
async fn a_field_at_the_servers_maximum_is_kept_and_one_past_it_is_refused() {
    const MAX: usize = 1024 * 1024;
    let server = inboxed_test::tls::TlsServer::redis_plain(&["--proto-max-bulk-len", "1mb"]);
    let url = format!("redis://127.0.0.1:{}", server.port);
    let db = Pg::create().await;
    let client = redis::Client::open(url.as_str()).unwrap();
    let xadd = |id: &str, payload: Vec<u8>| {
        let mut cmd = redis::cmd("XADD");
        cmd.arg("orders")
            .arg("*")
            .arg("message_id")
            .arg(id)
            .arg("payload")
            .arg(payload);
        cmd
    };
    let mut past = client.get_multiplexed_async_connection().await.unwrap();
    let refused: redis::RedisResult<String> = xadd("past-max", vec![0xff; MAX + 1])
        .query_async(&mut past)
        .await;
    assert!(
        refused.is_err(),
        "the server refuses a field past its maximum"
    );
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: String = xadd("at-max", vec![0xff; MAX])
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: String = xadd("after-max", br#"{"amount": 5}"#.to_vec())
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut config = RedisConfig::new(url.as_str(), "orders", "ledger");
    config.block = Duration::from_millis(200);
    let source = RedisSource::connect(config).await.unwrap();
    drain_and_check_ledger(&db, source, (1, 5), 1).await;
    assert_eq!(
        dead_letter_payload_len(&db, "at-max").await,
        i64::try_from(MAX).unwrap(),
        "the 1 MiB field is kept byte for byte"
    );
    db.finish().await;
}
