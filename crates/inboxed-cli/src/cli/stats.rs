//! `inboxed stats`: the store-then-process backlog, the open kill switches and the dead letters of
//! every consumer, and the processed keys (count, growth, oldest age, table size) of the
//! consumers named or seen.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use inboxed_core::ConsumerName;
use inboxed_core::observe::Observation;
use inboxed_core::retention::store::ProcessedStats;

use super::AnyStore;
use super::database::DbArgs;
use super::duration::{age as human_age, parse_duration};
use super::scrape::dedup_rates;
use super::tenant;
use inboxed_console::DedupRate;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Consumers whose processed keys to report; by default those with rows in the inbox or
    /// dead letters. Repeat for several.
    #[arg(long = "consumer")]
    consumers: Vec<String>,
    /// One JSON object instead of tables, for scripts.
    #[arg(long)]
    json: bool,
    /// Report again every this long (e.g. 5s) until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    watch: Option<Duration>,
    /// A process's Prometheus endpoint (http://host:port/metrics: the service's exporter, or
    /// `inboxed relay --metrics-addr`), to add the dedup hit rate, which only its counters know
    /// (a duplicate writes nothing to the database).
    #[arg(long, value_name = "URL")]
    metrics_url: Option<String>,
    /// A tenant's database, `NAME=URL`, where each tenant has its own
    /// (`inboxed_core::Tenants`): the report is made for each, under its name, in place of
    /// `--database-url`'s. Repeat for several; the schema and prefix settings apply to all.
    #[arg(long = "tenant", value_name = "NAME=URL", value_parser = tenant::parse)]
    tenants: Vec<tenant::Tenant>,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let named = args
        .consumers
        .iter()
        .map(|c| ConsumerName::new(c.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    // One unnamed database, or each tenant's under its name.
    let mut stores = Vec::new();
    for (name, db) in tenant::databases(&args.db, &args.tenants)? {
        let store = db.connect_existing(2).await;
        let store = store.map_err(|e| tenant::of(name.as_deref(), e))?;
        stores.push((name, store));
    }
    let clear = args.watch.is_some() && !args.json && std::io::stdout().is_terminal();
    loop {
        let mut reports = Vec::new();
        for (tenant, store) in &stores {
            let report = Report::read(store, &named, args.metrics_url.as_deref()).await;
            let report = report.map_err(|e| tenant::of(tenant.as_deref(), e))?;
            reports.push((tenant.as_deref(), report));
        }
        if clear {
            write!(out, "\x1b[2J\x1b[H")?;
        }
        match (args.json, reports.as_slice()) {
            (true, [(None, report)]) => writeln!(out, "{}", report.json())?,
            (true, _) => {
                let tenants: serde_json::Map<String, Value> = reports
                    .iter()
                    .map(|(name, r)| (name.unwrap_or_default().to_owned(), r.json()))
                    .collect();
                writeln!(out, "{}", json!({ "tenants": tenants }))?;
            }
            (false, _) => {
                for (name, report) in &reports {
                    if let Some(name) = name {
                        writeln!(out, "== tenant {name}")?;
                    }
                    report.write(out)?;
                }
            }
        }
        out.flush()?;
        let Some(every) = args.watch else {
            return Ok(ExitCode::SUCCESS);
        };
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

struct Report {
    at: SystemTime,
    seen: Observation,
    processed: Vec<(ConsumerName, ProcessedStats)>,
    /// From `--metrics-url`, when given.
    dedup: Option<Vec<DedupRate>>,
}

impl Report {
    async fn read(
        store: &AnyStore,
        named: &[ConsumerName],
        metrics_url: Option<&str>,
    ) -> anyhow::Result<Self> {
        let dedup = match metrics_url {
            Some(url) => Some(dedup_rates(url).await?),
            None => None,
        };
        let seen = store.observe().await?;
        let mut consumers: BTreeSet<String> = named.iter().map(|c| c.as_str().to_owned()).collect();
        if named.is_empty() {
            consumers.extend(seen.backlog.iter().map(|b| b.consumer.clone()));
            consumers.extend(seen.dead_letters.iter().map(|d| d.consumer.clone()));
        }
        let mut processed = Vec::new();
        for name in consumers {
            let consumer = ConsumerName::new(name)?;
            let stats = store.processed_stats(&consumer).await?;
            processed.push((consumer, stats));
        }
        Ok(Self {
            at: SystemTime::now(),
            seen,
            processed,
            dedup,
        })
    }

    fn age(&self, t: Option<SystemTime>) -> Option<Duration> {
        t.and_then(|t| self.at.duration_since(t).ok())
            .map(|d| Duration::from_secs(d.as_secs()))
    }

    /// Whole seconds from the report's time to `t`, negative when `t` has passed.
    fn until(&self, t: Option<SystemTime>) -> Option<i64> {
        let t = t?;
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        Some(match t.duration_since(self.at) {
            Ok(ahead) => secs(ahead),
            Err(behind) => -secs(behind.duration()),
        })
    }

    fn json(&self) -> Value {
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs());
        json!({
            "backlog": self.seen.backlog.iter().map(|b| json!({
                "consumer": b.consumer, "pending": b.pending, "processing": b.processing,
                "dead": b.dead, "expired_leases": b.expired_leases,
                "oldest_pending_age_seconds": secs(self.age(b.oldest_pending)),
                "next_lease_expiry_in_seconds": self.until(b.next_lease_expiry),
                "parked_aggregates": b.parked_aggregates,
            })).collect::<Vec<_>>(),
            "kill_switches": self.seen.switches.iter().map(|k| json!({
                "consumer": k.consumer, "open": k.open,
                "open_for_seconds": secs(self.age(k.opened_at)),
                "next_probe_in_seconds": self.until(k.next_probe),
                "last_heard_seconds_ago": secs(self.age(k.seen_at)),
            })).collect::<Vec<_>>(),
            "dead_letters": self.seen.dead_letters.iter().map(|d| json!({
                "consumer": d.consumer, "reason": d.reason, "count": d.count,
                "newest_age_seconds": secs(self.age(d.newest)),
            })).collect::<Vec<_>>(),
            "outbox": self.seen.outbox.iter().map(|o| json!({
                "destination": o.destination, "pending": o.pending, "sending": o.sending,
                "dead": o.dead, "expired_leases": o.expired_leases,
                "oldest_unsent_age_seconds": secs(self.age(o.oldest_unsent)),
                "sent_last_minute": o.sent_last_minute,
            })).collect::<Vec<_>>(),
            "processed_keys": self.processed.iter().map(|(c, s)| json!({
                "consumer": c.as_str(), "estimated_keys": s.estimated_rows,
                "growth_per_hour": s.growth_per_hour(),
                "oldest_key_age_seconds": secs(self.age(s.oldest)),
                "table_bytes": s.table_bytes, "index_bytes": s.index_bytes,
            })).collect::<Vec<_>>(),
            "dedup_hit_rate": self.dedup.as_ref().map(|rates| rates.iter().map(|r| json!({
                "consumer": r.consumer, "counter": r.counter, "duplicates": r.duplicates,
                "settled": r.settled, "rate": r.rate(),
            })).collect::<Vec<_>>()),
        })
    }

    /// The consumers paused by a kill switch: how many processes' switches are open, since
    /// when, the next probe.
    fn write_switches(&self, out: &mut impl Write) -> std::io::Result<()> {
        let age = |t| self.age(t).map_or_else(|| "-".to_owned(), human_age);
        writeln!(out, "kill switches")?;
        if self.seen.switches.is_empty() {
            return writeln!(out, "  (none open)");
        }
        writeln!(
            out,
            "  {:<24} {:>5} {:>12} {:>12} {:>12}",
            "consumer", "open", "since", "next probe", "last heard"
        )?;
        for k in &self.seen.switches {
            let next = match self.until(k.next_probe) {
                Some(s) if s > 0 => {
                    format!("in {}", human_age(Duration::from_secs(s.unsigned_abs())))
                }
                Some(_) => "due".to_owned(),
                None => "-".to_owned(),
            };
            writeln!(
                out,
                "  {:<24} {:>5} {:>12} {:>12} {:>12}",
                k.consumer,
                k.open,
                format!("{} ago", age(k.opened_at)),
                next,
                format!("{} ago", age(k.seen_at)),
            )?;
        }
        Ok(())
    }

    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let age = |t| self.age(t).map_or_else(|| "-".to_owned(), human_age);
        writeln!(out, "store-then-process backlog")?;
        if self.seen.backlog.is_empty() {
            writeln!(out, "  (no rows waiting, in flight or dead)")?;
        } else {
            writeln!(
                out,
                "  {:<24} {:>9} {:>11} {:>7} {:>15} {:>15} {:>18} {:>7}",
                "consumer",
                "pending",
                "processing",
                "dead",
                "oldest pending",
                "expired leases",
                "next lease expiry",
                "parked"
            )?;
            for b in &self.seen.backlog {
                let expiry = match self.until(b.next_lease_expiry) {
                    None => "-".to_owned(),
                    Some(s) if s < 0 => {
                        format!("{} ago", human_age(Duration::from_secs(s.unsigned_abs())))
                    }
                    Some(s) => format!("in {}", human_age(Duration::from_secs(s.unsigned_abs()))),
                };
                writeln!(
                    out,
                    "  {:<24} {:>9} {:>11} {:>7} {:>15} {:>15} {:>18} {:>7}",
                    b.consumer,
                    b.pending,
                    b.processing,
                    b.dead,
                    age(b.oldest_pending),
                    b.expired_leases,
                    expiry,
                    b.parked_aggregates
                )?;
            }
        }
        self.write_switches(out)?;
        writeln!(out, "dead letters")?;
        if self.seen.dead_letters.is_empty() {
            writeln!(out, "  (none)")?;
        } else {
            writeln!(
                out,
                "  {:<24} {:<20} {:>7} {:>12}",
                "consumer", "reason", "count", "newest"
            )?;
            for d in &self.seen.dead_letters {
                let newest = format!("{} ago", age(d.newest));
                writeln!(
                    out,
                    "  {:<24} {:<20} {:>7} {:>12}",
                    d.consumer, d.reason, d.count, newest
                )?;
            }
        }
        writeln!(out, "outbox")?;
        if self.seen.outbox.is_empty() {
            writeln!(out, "  (nothing unsent, dead, or sent in the last minute)")?;
        } else {
            writeln!(
                out,
                "  {:<24} {:>9} {:>8} {:>7} {:>14} {:>15} {:>12}",
                "destination",
                "pending",
                "sending",
                "dead",
                "oldest unsent",
                "expired leases",
                "sent/minute"
            )?;
            for o in &self.seen.outbox {
                writeln!(
                    out,
                    "  {:<24} {:>9} {:>8} {:>7} {:>14} {:>15} {:>12}",
                    o.destination,
                    o.pending,
                    o.sending,
                    o.dead,
                    age(o.oldest_unsent),
                    o.expired_leases,
                    o.sent_last_minute
                )?;
            }
        }
        for (consumer, s) in &self.processed {
            let rows = s.estimated_rows.map_or_else(
                || "unknown (not analyzed yet)".to_owned(),
                |n| n.to_string(),
            );
            writeln!(out, "processed keys of `{consumer}`")?;
            writeln!(out, "  estimated keys     {rows}")?;
            let growth = s.growth_per_hour();
            writeln!(
                out,
                "  growth             {growth} keys/hour (last minute's rate)"
            )?;
            writeln!(out, "  oldest key age     {}", age(s.oldest))?;
            writeln!(
                out,
                "  table bytes        {} (all consumers)",
                s.table_bytes
            )?;
            writeln!(
                out,
                "  index bytes        {} (all consumers)",
                s.index_bytes
            )?;
        }
        let Some(rates) = &self.dedup else {
            return writeln!(
                out,
                "dedup hit rate: only counters know it (a duplicate writes nothing to the \
                 database): pass --metrics-url with a process's Prometheus endpoint"
            );
        };
        writeln!(
            out,
            "dedup hit rate (counters of the process at --metrics-url, since it started)"
        )?;
        if rates.is_empty() {
            return writeln!(
                out,
                "  (no inboxed_messages_total or inboxed_receipts_total there: they live in the \
                 process that consumes, a service's exporter or `inboxed relay --metrics-addr`, \
                 not in `inboxed serve`)"
            );
        }
        writeln!(
            out,
            "  {:<24} {:<24} {:>12} {:>12} {:>8}",
            "consumer", "counter", "duplicates", "settled", "rate"
        )?;
        for r in rates {
            let rate = r
                .rate()
                .map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0));
            writeln!(
                out,
                "  {:<24} {:<24} {:>12} {:>12} {:>8}",
                r.consumer, r.counter, r.duplicates, r.settled, rate
            )?;
        }
        Ok(())
    }
}
