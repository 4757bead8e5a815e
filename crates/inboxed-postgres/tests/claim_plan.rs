//! A claim reads its batch, not the backlog: the server's plan for `claim_batch.sql` finds the
//! candidates with one scan of the claim index, in the index's order, stopped at the limit,
//! with no join and no sort, under both of the server's plan modes (the custom plans of a
//! connection's first executions, the generic plan it keeps after them).
//!
//! A claim that joined its clock from a one-row CTE left the planner a choice of join order
//! on its estimates, and one of them (the clock outside, the index scan inside: a nested loop
//! keeps only its outer side's order) sorted every available pending row on each claim. A
//! drain of 100,000 rows took that plan midway: 0.56 s per claim at 53,000 pending rows, and
//! 16 workers drained at half the rate of one. The test pins the shape that leaves no such
//! choice, since which join order the planner takes depends on statistics a test cannot
//! reproduce reliably.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use sqlx::{Connection, Row};

use inboxed_core::inbox::Inbox;
use inboxed_core::{ConsumerName, Envelope, MessageId};
use inboxed_test::{Backend, Pg};

const BACKLOG: usize = 5_000;
const LIMIT: i64 = 50;

/// The lines of the candidates' part of the plan.
fn candidates(plan: &str) -> Vec<&str> {
    plan.lines()
        .skip_while(|l| !l.contains("CTE candidates"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect()
}

/// The `rows=` of a plan line's actual figures.
fn actual_rows(line: &str) -> i64 {
    let actual = &line[line.find("(actual").expect("an analyzed line")..];
    let rows = &actual[actual.find("rows=").unwrap() + 5..];
    rows[..rows.find(' ').unwrap()].parse().unwrap()
}

#[tokio::test]
async fn a_claim_reads_its_batch_not_the_backlog() {
    let db = Pg::create().await;
    let consumer = ConsumerName::new("ledger").unwrap();
    let inbox = Inbox::new(db.store.clone(), consumer.clone()).notify(false);
    let messages: Vec<Envelope> = (0..BACKLOG)
        .map(|i| Envelope::new(MessageId::new(format!("m-{i}")).unwrap(), b"{}".to_vec()))
        .collect();
    for chunk in messages.chunks(500) {
        inbox.store_many(chunk).await.unwrap();
    }
    let claim = db
        .store
        .namespace()
        .render(include_str!("../sql/claim_batch.sql"));
    let mut conn = sqlx::PgConnection::connect(&db.locator).await.unwrap();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let mut tx = conn.begin().await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET LOCAL plan_cache_mode = {mode}; \
             PREPARE claim(text, text, bytea, int, int8, int8, bool, bool) AS {claim}"
        )))
        .execute(&mut *tx)
        .await
        .unwrap();
        let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE) \
             EXECUTE claim('ledger', 'w', '\\x00'::bytea, {LIMIT}, 30000, NULL, false, false)"
        )))
        .fetch_all(&mut *tx)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
        let plan = plan.join("\n");
        let part = candidates(&plan);
        assert!(
            !part.is_empty(),
            "{mode}: no candidates in the plan:\n{plan}"
        );
        let joins_or_sorts: Vec<&&str> = part
            .iter()
            .filter(|l| l.contains("Sort") || l.contains("Nested Loop") || l.contains("Join"))
            .collect();
        assert!(
            joins_or_sorts.is_empty(),
            "{mode}: the candidates are joined or sorted: {joins_or_sorts:?}\n{plan}"
        );
        let scan = part
            .iter()
            .find(|l| l.contains("Index Scan using inboxed_inbox_messages_claim_idx"))
            .unwrap_or_else(|| {
                panic!("{mode}: the candidates do not scan the claim index:\n{plan}")
            });
        let read = actual_rows(scan);
        assert!(
            read <= 2 * LIMIT,
            "{mode}: the claim read {read} candidate rows for a batch of {LIMIT}:\n{plan}"
        );
        tx.rollback().await.unwrap();
        sqlx::raw_sql("DEALLOCATE claim")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    db.finish().await;
}
