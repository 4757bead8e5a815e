//! `/`: every consumer's backlog, the kill switches open, its processed keys (how many, their growth and age, the
//! table's size, and the dedup hit rate where a process's counters are at hand), the dead
//! letters by consumer and reason, the outbox's backlog. Read through the partial indexes of
//! rows not done and the planner's statistics, so the page costs what the backlog is, not what
//! the tables hold.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use inboxed_core::ConsumerName;
use inboxed_core::retention::store::ProcessedStats;
use maud::{Markup, html};

use crate::access::Viewer;
use crate::forms::query;
use crate::layout::{ago, bytes, page, unavailable, until};
use crate::{Console, ConsoleStore, DedupRate};

pub(crate) async fn show<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let seen = match console.store.observe().await {
        Ok(seen) => seen,
        Err(e) => return unavailable(&console.config, &viewer, "the inbox tables", &e),
    };
    let mut names: BTreeSet<&str> = seen.backlog.iter().map(|b| b.consumer.as_str()).collect();
    names.extend(seen.dead_letters.iter().map(|d| d.consumer.as_str()));
    names.extend(console.config.consumers.iter().map(String::as_str));
    let mut processed = Vec::new();
    for name in names {
        let stats = match ConsumerName::new(name) {
            Ok(consumer) => console
                .store
                .processed(&consumer)
                .await
                .map_err(|e| inboxed_core::error_chain(&*e)),
            Err(e) => Err(e.to_string()),
        };
        processed.push((name, stats));
    }
    let dedup = console.store.dedup_rates().await;
    let body = html! {
        h2 { "Store-then-process backlog" }
        @if seen.backlog.is_empty() {
            p { "No consumer has rows waiting." }
        } @else {
            div.scroll { table {
                thead { tr {
                    th { "Consumer" } th { "Pending" } th { "Processing" } th { "Dead" }
                    th { "Oldest pending" } th { "Expired leases" } th { "Parked aggregates" }
                } }
                tbody { @for b in &seen.backlog { tr {
                    td { a href={ (prefix) "/rows?consumer=" (query(&b.consumer)) } { (b.consumer) } }
                    td { (b.pending) }
                    td { (b.processing) }
                    td {
                        a href={ (prefix) "/rows?consumer=" (query(&b.consumer)) "&status=dead" } {
                            (b.dead)
                        }
                    }
                    td { (ago(b.oldest_pending)) }
                    td class=[(b.expired_leases > 0).then_some("warn")] { (b.expired_leases) }
                    td class=[(b.parked_aggregates > 0).then_some("warn")] { (b.parked_aggregates) }
                } } }
            } }
        }
        h2 { "Kill switches" }
        @if seen.switches.is_empty() {
            p { "None open: every consumer takes deliveries." }
        } @else {
            p { "Paused: most recent deliveries of these consumers failed transiently (a \
                 dependency is down); they take no new deliveries until a probe succeeds, and \
                 charge no attempts meanwhile." }
            div.scroll { table {
                thead { tr {
                    th { "Consumer" } th { "Open in" } th { "Since" } th { "Next probe" }
                    th { "Last heard" }
                } }
                tbody { @for k in &seen.switches { tr.warn {
                    td { (k.consumer) }
                    td { (k.open) @if k.open == 1 { " process" } @else { " processes" } }
                    td { (ago(k.opened_at)) }
                    td { (until(k.next_probe)) }
                    td { (ago(k.seen_at)) }
                } } }
            } }
        }
        (processed_keys(&processed, &dedup))
        h2 { "Dead letters" }
        @if seen.dead_letters.is_empty() {
            p { "None." }
        } @else {
            div.scroll { table {
                thead { tr { th { "Consumer" } th { "Reason" } th { "Count" } th { "Newest" } } }
                tbody { @for d in &seen.dead_letters { tr {
                    td { (d.consumer) }
                    td {
                        a href={ (prefix) "/dead-letters?consumer=" (query(&d.consumer))
                                 "&reason=" (query(&d.reason)) } { (d.reason) }
                    }
                    td { (d.count) }
                    td { (ago(d.newest)) }
                } } }
            } }
        }
        h2 { "Outbox" }
        @if seen.outbox.is_empty() {
            p { "Nothing unsent." }
        } @else {
            div.scroll { table {
                thead { tr {
                    th { "Destination" } th { "Unsent" } th { "Sending" } th { "Dead" }
                    th { "Oldest unsent" }
                } }
                tbody { @for o in &seen.outbox { tr {
                    td { a href={ (prefix) "/outbox?destination=" (query(&o.destination)) } {
                        (o.destination)
                    } }
                    td { (o.pending) }
                    td { (o.sending) }
                    td class=[(o.dead > 0).then_some("warn")] {
                        @if o.dead > 0 {
                            a href={ (prefix) "/outbox?status=dead&destination="
                                     (query(&o.destination)) } { (o.dead) }
                        } @else { (o.dead) }
                    }
                    td { (ago(o.oldest_unsent)) }
                } } }
            } }
        }
    };
    page(&console.config, &viewer, "Overview", true, body).into_response()
}

/// The processed keys of each consumer, with its dedup hit rate where it is known.
fn processed_keys(
    processed: &[(&str, Result<ProcessedStats, String>)],
    dedup: &Result<Option<Vec<DedupRate>>, inboxed_core::BoxError>,
) -> Markup {
    let rates: BTreeMap<&str, &DedupRate> = match dedup {
        Ok(Some(rates)) => rates.iter().map(|r| (r.consumer.as_str(), r)).collect(),
        _ => BTreeMap::new(),
    };
    html! {
        h2 { "Processed keys" }
        @if processed.is_empty() {
            p { "No consumer found (none has rows or dead letters, and none is configured)." }
        } @else {
            div.scroll { table {
                thead { tr {
                    th { "Consumer" } th { "Keys (estimated)" } th { "Last minute" }
                    th { "Oldest key" } th { "Table and indexes" } th { "Dedup hit rate" }
                } }
                tbody { @for (name, stats) in processed { tr {
                    td { (name) }
                    @match stats {
                        Ok(s) => {
                            td { (s.estimated_rows.map_or("-".to_owned(), |n| n.to_string())) }
                            td { (s.last_minute) }
                            td { (ago(s.oldest)) }
                            td { (bytes(s.table_bytes + s.index_bytes)) }
                        }
                        Err(e) => { td.failure colspan="4" { "unreadable: " (e) } }
                    }
                    td { @match rates.get(name).and_then(|r| r.rate().map(|x| (x, r))) {
                        Some((rate, r)) => {
                            (format!("{:.1}%", rate * 100.0)) " ("
                            (r.duplicates) " of " (r.settled) ")"
                        }
                        None => "-",
                    } }
                } } }
            } }
            p.note { @match dedup {
                Ok(Some(_)) => "Dedup hit rate: the duplicates a process's counters settled, of \
                    all it settled, since it started.",
                Ok(None) => "Dedup hit rate: not known here. Only a process's counters know it \
                    (a duplicate writes nothing to the database): inboxed serve --metrics-url \
                    reads them from a consumer's Prometheus endpoint.",
                Err(e) => { "Dedup hit rate: the counters could not be read: "
                    (inboxed_core::error_chain(&**e)) }
            } }
        }
    }
}
