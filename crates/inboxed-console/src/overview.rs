//! `/`: every consumer's backlog, the dead letters by consumer and reason, the outbox's
//! backlog. Read through the partial indexes of rows not done, so the page costs what the
//! backlog is, not what the tables hold.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::layout::{ago, page, unavailable};
use crate::{Console, ConsoleStore};

pub(crate) async fn show<S: ConsoleStore>(State(console): State<Arc<Console<S>>>) -> Response {
    let prefix = console.config.prefix.as_str();
    let seen = match console.store.observe().await {
        Ok(seen) => seen,
        Err(e) => return unavailable(prefix, "the inbox tables", &e),
    };
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
                    td { (b.consumer) }
                    td { (b.pending) }
                    td { (b.processing) }
                    td { (b.dead) }
                    td { (ago(b.oldest_pending)) }
                    td class=[(b.expired_leases > 0).then_some("warn")] { (b.expired_leases) }
                    td { (b.parked_aggregates) }
                } } }
            } }
        }
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
                    td { (o.destination) }
                    td { (o.pending) }
                    td { (o.sending) }
                    td class=[(o.dead > 0).then_some("warn")] { (o.dead) }
                    td { (ago(o.oldest_unsent)) }
                } } }
            } }
        }
    };
    page(prefix, "Overview", body).into_response()
}

/// `value` escaped for a query string (maud escapes it again for the attribute).
pub(crate) fn query(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
