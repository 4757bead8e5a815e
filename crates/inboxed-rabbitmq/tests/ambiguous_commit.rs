//! The ambiguous commit: the consumer's `COMMIT` reaches PostgreSQL, which commits, but the
//! answer never comes back (a proxy between them cuts the connection once the commit is
//! through). The consumer sees a broken connection: it must not ack, and the broker's
//! redelivery must settle as a duplicate, the handler not run again. And the same broken
//! connection when the `COMMIT` never reached the server (rolled back), where an ack would lose
//! the message. In the middle of 4,000 RabbitMQ messages, the first attempt of eight messages
//! has its commit cut after the server has it, and of eight others before: the ledger audit
//! finds each message once (an ack on the broken connection would leave the second eight out),
//! the first eight were handled once (their redeliveries duplicates), the second eight twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::QueueDeleteOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, Postgres};

use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Processor};
use inboxed_postgres::PgStore;
use inboxed_rabbitmq::{RabbitConfig, RabbitSource};
use inboxed_test::amqp::url as amqp_url;
use inboxed_test::amqp::{publish_keyed, queue};
use inboxed_test::commit_cut::{CUT_AFTER, CUT_BEFORE, CommitCut};
use inboxed_test::restart::{MESSAGES, audit_processing, store_on};
use inboxed_test::throwaway::ThrowawayPg;
use inboxed_test::{Ledger, Pg};

/// Messages whose first commit is cut after the server has it: their redelivery is a duplicate.
const LANDED: std::ops::Range<i64> = 2000..2008;
/// Messages whose first commit is cut before the server has it: rolled back, handled again.
const DROPPED: std::ops::Range<i64> = 3000..3008;

/// The ledger's handler, counting each message's runs that returned `Ok` (its transaction
/// then went on to commit), and marking the first run of the messages above for the proxy.
#[derive(Clone, Default)]
struct Marking {
    ledger: Ledger<Pg>,
    runs: Arc<Mutex<HashMap<String, u32>>>,
}

impl Handler<Postgres> for Marking {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.ledger.handle(msg, conn).await?;
        let id = msg.id().as_str().to_owned();
        let first = {
            let mut runs = self.runs.lock().unwrap();
            let n = runs.entry(id.clone()).or_default();
            *n += 1;
            *n == 1
        };
        let number: i64 = id.trim_start_matches("p-").parse().unwrap_or(-1);
        let marker = if LANDED.contains(&number) {
            Some(CUT_AFTER)
        } else if DROPPED.contains(&number) {
            Some(CUT_BEFORE)
        } else {
            None
        };
        if let (true, Some(marker)) = (first, marker) {
            // A simple query, so that its text is on the wire every time.
            sqlx::raw_sql(marker).execute(&mut *conn).await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_commit_whose_answer_is_lost_is_not_acked_and_its_redelivery_is_a_duplicate() {
    let pg = ThrowawayPg::start();
    // The tables, made directly; the consumer's pool goes through the proxy.
    let _direct = store_on(&pg).await;
    let cut = CommitCut::start(&format!("127.0.0.1:{}", pg.port())).await;
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            cut.port()
        ))
        .await
        .unwrap();
    let handler = Marking::default();
    let runs = Arc::clone(&handler.runs);
    let processor = Processor::new(
        PgStore::new(pool),
        ConsumerName::new("ledger").unwrap(),
        handler,
    );

    let (channel, name) = queue(&amqp_url()).await;
    publish_keyed(&channel, &name, "p", 0..MESSAGES).await;
    let source = RabbitSource::connect(RabbitConfig::new(amqp_url(), &name).prefetch(64))
        .await
        .unwrap();
    let (before, ()) = audit_processing(&pg.url(), processor, source, || async {}).await;

    let runs = runs.lock().unwrap().clone();
    let of = |ids: std::ops::Range<i64>| -> Vec<u32> {
        ids.map(|i| runs.get(&format!("p-{i}")).copied().unwrap_or(0))
            .collect()
    };
    assert_eq!(
        (cut.cut(), cut.lost()),
        (8, 8),
        "every marked commit was cut: {} seen",
        cut.seen()
    );
    assert_eq!(
        of(LANDED),
        [1; 8],
        "a commit that reached the server is not redone: its redelivery is a duplicate"
    );
    assert_eq!(
        of(DROPPED),
        [2; 8],
        "a commit that never reached the server is redone on the redelivery"
    );
    eprintln!(
        "ambiguous commits: 8 cut after the server had them, 8 before; {before} rows before \
         the first; {} commits seen",
        cut.seen()
    );
    channel
        .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}
