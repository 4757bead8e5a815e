//! Resetting the demo tables, and the closing report: every figure read back from the
//! database, compared with what the producer's messages imply.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use super::broker::Stats;
use super::{Mode, Plan};
use crate::cli::AnyStore;

pub(super) async fn reset(store: &AnyStore, accounts: usize, opening: i64) -> anyhow::Result<()> {
    store
        .execute_script(super::ledger::reset_sql(
            accounts,
            opening,
            store.demo_keys(),
            store.backend() == "mysql",
        ))
        .await
}

pub(super) struct Report {
    lines: Vec<(String, String)>,
    exact: bool,
}

impl Report {
    pub(super) async fn gather(
        store: &AnyStore,
        plan: &Plan,
        stats: Stats,
        outcomes: BTreeMap<&'static str, u64>,
        elapsed: Duration,
        mode: Mode,
    ) -> anyhow::Result<Self> {
        let balances: BTreeMap<String, i64> = store
            .pairs("SELECT id, balance FROM inboxed_demo_accounts ORDER BY id")
            .await?
            .into_iter()
            .collect();
        let ledger_rows = store
            .scalar("SELECT count(*) FROM inboxed_demo_ledger")
            .await?;
        let distinct = store
            .scalar("SELECT count(DISTINCT message_id) FROM inboxed_demo_ledger")
            .await?;
        // Processed and dead: keys and dead letters directly; rows of the inbox table when
        // stored first.
        let (processed, dead) = match mode {
            Mode::Direct => (
                store
                    .scalar(&format!("SELECT count(*) {}", store.demo_keys()))
                    .await?,
                store
                    .scalar("SELECT count(*) FROM inboxed_dead_letters WHERE consumer_name = 'demo' AND message_id IS NOT NULL")
                    .await?,
            ),
            Mode::StoreThenProcess => (
                store
                    .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'demo' AND status = 'done'")
                    .await?,
                store
                    .scalar("SELECT count(*) FROM inboxed_inbox_messages WHERE consumer_name = 'demo' AND status = 'dead'")
                    .await?,
            ),
        };
        // Without a key there is no dedup: each delivery of a keyless message is its own row.
        let keyless = store
            .scalar("SELECT count(*) FROM inboxed_dead_letters WHERE consumer_name = 'demo' AND message_id IS NULL")
            .await?;
        let wrong: Vec<String> = plan
            .expected
            .iter()
            .filter(|(id, want)| balances.get(*id) != Some(want))
            .map(|(id, want)| format!("{id}: expected {want}, found {:?}", balances.get(id)))
            .collect();
        let valid = i64::try_from(plan.valid).unwrap_or(i64::MAX);
        let poison = i64::try_from(plan.poison).unwrap_or(i64::MAX);
        let exact = wrong.is_empty()
            && ledger_rows == valid
            && distinct == valid
            && processed == valid
            && dead == poison
            && keyless >= i64::try_from(plan.keyless).unwrap_or(i64::MAX);
        let get = |k: &str| outcomes.get(k).copied().unwrap_or(0);
        let messages: (String, String) = (
            "messages".into(),
            format!(
                "{} created, {} sent twice by producer retries (same id)",
                plan.valid + plan.poison,
                plan.retries
            ),
        );
        if mode == Mode::StoreThenProcess {
            let lines = vec![
                messages,
                (
                    "deliveries".into(),
                    format!("{} in {:.2} s", stats.deliveries, elapsed.as_secs_f64()),
                ),
                (
                    "injected faults".into(),
                    format!(
                        "{} receipts crashed at random points, {} acks lost after the row committed, {} concurrent redeliveries",
                        stats.crashes, stats.lost_acks, stats.concurrent
                    ),
                ),
                (
                    "stored".into(),
                    format!(
                        "{} rows stored and acked; {} redeliveries found their row already stored",
                        get("stored"),
                        get("duplicate")
                    ),
                ),
                (
                    "processed".into(),
                    format!(
                        "{processed} rows done by workers, {dead} poison rows dead (expected {}), {keyless} keyless deliveries dead-lettered at receipt",
                        plan.poison
                    ),
                ),
                (
                    "ledger".into(),
                    format!("{ledger_rows} entries for {valid} valid messages"),
                ),
            ];
            return Ok(Self::finish(lines, &wrong, plan, exact));
        }
        let secs = elapsed.as_secs_f64().max(1e-9);
        let lines = vec![
            messages,
            (
                "deliveries".into(),
                format!(
                    "{} in {:.2} s ({:.0}/s)",
                    stats.deliveries,
                    secs,
                    stats.deliveries as f64 / secs
                ),
            ),
            (
                "injected faults".into(),
                format!(
                    "{} crashes at random points, {} acks lost after commit, {} concurrent redeliveries",
                    stats.crashes, stats.lost_acks, stats.concurrent
                ),
            ),
            (
                "processed".into(),
                format!(
                    "{} acked after commit, {} more committed by deliveries that then crashed before their ack",
                    get("processed"),
                    u64::try_from(ledger_rows)
                        .unwrap_or(0)
                        .saturating_sub(get("processed"))
                ),
            ),
            (
                "duplicates".into(),
                format!(
                    "{} suppressed without running the handler",
                    get("duplicate")
                ),
            ),
            (
                "dead-lettered".into(),
                format!(
                    "{dead} poison messages (expected {}), {keyless} keyless deliveries of {} keyless messages; \
                 {} later deliveries of dead letters settled without running the handler",
                    plan.poison,
                    plan.keyless,
                    get("already_dead_lettered")
                ),
            ),
            (
                "requeued".into(),
                format!(
                    "{} deliveries (nothing committed, delivered again)",
                    get("requeued")
                ),
            ),
            (
                "ledger".into(),
                format!(
                    "{ledger_rows} entries for {valid} valid messages; {processed} processed rows"
                ),
            ),
        ];
        Ok(Self::finish(lines, &wrong, plan, exact))
    }

    fn finish(
        mut lines: Vec<(String, String)>,
        wrong: &[String],
        plan: &Plan,
        exact: bool,
    ) -> Self {
        if wrong.is_empty() {
            lines.push((
                "balances".into(),
                format!(
                    "all {} accounts exactly as the messages imply",
                    plan.expected.len()
                ),
            ));
        } else {
            lines.push((
                "balances".into(),
                format!("{} WRONG: {}", wrong.len(), wrong.join("; ")),
            ));
        }
        Self { lines, exact }
    }

    pub(super) fn exact(&self) -> bool {
        self.exact
    }

    pub(super) fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        for (k, v) in &self.lines {
            writeln!(out, "  {k:<16} {v}")?;
        }
        let verdict = if self.exact {
            "EXACT: every effect applied once"
        } else {
            "NOT EXACT"
        };
        writeln!(out, "result: {verdict}")
    }
}
