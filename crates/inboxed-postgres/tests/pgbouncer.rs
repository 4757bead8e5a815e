//! The processor behind a transaction-pooling PgBouncer (1.18 here, which does not track
//! prepared statements), with the statement cache off as docs/operations.md says. The test
//! starts its own pgbouncer in front of the test database; scripts/test.sh installs it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::{Child, Command};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::Barrier;

use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, Outcome, Processor, ProcessorConfig,
};
use inboxed_postgres::PgStore;
use inboxed_test::hooks::{HookPoint, Hooked};
use inboxed_test::{Backend, Pg, Script, credit};

/// A ledger handler written as docs/operations.md asks behind such a proxy: every statement
/// unnamed.
#[derive(Clone)]
struct Unnamed;

impl Handler<sqlx::Postgres> for Unnamed {
    async fn handle(
        &self,
        msg: &Envelope,
        conn: &mut sqlx::PgConnection,
    ) -> Result<(), HandlerError> {
        let script: Script =
            serde_json::from_slice(msg.payload()).map_err(HandlerError::permanent)?;
        sqlx::query("INSERT INTO ledger (message_id, account, amount) VALUES ($1, $2, $3)")
            .persistent(false)
            .bind(msg.id().as_str())
            .bind(&script.account)
            .bind(script.amount)
            .execute(&mut *conn)
            .await?;
        tokio::time::sleep(Duration::from_millis(script.sleep_ms)).await;
        match script.fail {
            Some(_) => Err(HandlerError::permanent("scripted permanent failure")),
            None => Ok(()),
        }
    }
}

struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_bouncer() -> Bouncer {
    let server = PgConnectOptions::from_str(&inboxed_test::admin_url()).expect("DATABASE_URL");
    let dir = tempfile::tempdir().unwrap();
    let port = 20_000 + fastrand::u16(..20_000);
    let ini = dir.path().join("pgbouncer.ini");
    std::fs::write(
        &ini,
        format!(
            "[databases]\n* = host={} port={} user={}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
             listen_port = {port}\nauth_type = any\npool_mode = transaction\nunix_socket_dir =\n\
             default_pool_size = 4\nmax_client_conn = 200\n\
             ignore_startup_parameters = extra_float_digits,options\nlogfile = {}\n",
            server.get_host(),
            server.get_port(),
            server.get_username(),
            dir.path().join("pgbouncer.log").display(),
        ),
    )
    .unwrap();
    // pgbouncer refuses to run as root; -u drops to an unprivileged user.
    let mut cmd = Command::new("pgbouncer");
    if Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
    {
        let _ = Command::new("chmod")
            .args(["-R", "a+rwx"])
            .arg(dir.path())
            .status();
        cmd.args(["-u", "postgres"]);
    }
    let child = cmd.arg(&ini).spawn().unwrap_or_else(|e| {
        panic!("pgbouncer is required for this test and could not start ({e}); scripts/test.sh installs it")
    });
    Bouncer {
        child,
        port,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processor_works_behind_transaction_pooling_pgbouncer() {
    let db = Pg::create().await;
    let bouncer = start_bouncer();
    let name = db
        .store
        .pool()
        .connect_options()
        .get_database()
        .unwrap()
        .to_owned();
    let url = format!("postgres://postgres@127.0.0.1:{}/{name}", bouncer.port);
    // Without prepared-statement tracking in the proxy, a named statement prepared on one server
    // connection is unknown (or already taken) on the next: the store and the handler both
    // issue unnamed statements only.
    let options = PgConnectOptions::from_str(&url).unwrap();
    let mut pool = None;
    for _ in 0..50 {
        if let Ok(p) = PgPoolOptions::new()
            .max_connections(8)
            .connect_with(options.clone())
            .await
        {
            pool = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let store = PgStore::new(pool.expect("connect through pgbouncer")).persistent_statements(false);
    let consumer = ConsumerName::new("ledger").unwrap();
    let handler = Unnamed;
    let p = Processor::with_config(
        store.clone(),
        consumer.clone(),
        handler.clone(),
        ProcessorConfig::default(),
    );

    // Sequential duplicates, with the broker's count and with the durable counter (autocommit).
    for (id, count) in [("b-1", Some(1)), ("b-2", None)] {
        assert_eq!(
            p.process(&credit(id, 5), count).await.unwrap(),
            Outcome::Processed
        );
        assert_eq!(
            p.process(&credit(id, 5), count).await.unwrap(),
            Outcome::Duplicate
        );
    }
    // A dead letter, written in its own transaction.
    let poison = Script {
        fail: Some("permanent".into()),
        ..Script::default()
    }
    .message("b-p");
    assert!(matches!(
        p.process(&poison, Some(1)).await.unwrap(),
        Outcome::DeadLettered { .. }
    ));

    // Concurrent duplicates at a barrier, and 200 messages from 8 tasks over 4 server connections.
    let barrier = Arc::new(Barrier::new(2));
    let slow = Script {
        amount: 7,
        sleep_ms: 200,
        ..Script::default()
    }
    .message("b-c");
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let hooked = Hooked::new(store.clone(), barrier.clone(), HookPoint::BeforeClaim);
        let p = Processor::new(hooked, consumer.clone(), handler.clone());
        let msg = slow.clone();
        tasks.push(tokio::spawn(async move {
            p.process(&msg, Some(1)).await.unwrap()
        }));
    }
    for w in 0..8 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let id = format!("b-s{w}-{i}");
                p.process(&credit(&id, 1), Some(1)).await.unwrap();
            }
            Outcome::Processed
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == Outcome::Duplicate)
            .count(),
        1
    );
    assert_eq!(db.scalar("SELECT count(*) FROM ledger").await, 203);
    assert_eq!(
        db.scalar("SELECT CAST(sum(amount) AS BIGINT) FROM ledger")
            .await,
        5 + 5 + 7 + 200
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_dead_letters").await,
        1
    );
    drop(store);
    drop(p);
    drop(bouncer);
    db.finish().await;
}
