//! `/`: every consumer's backlog, the dead letters by consumer and reason, the outbox's
//! backlog. Read through the partial indexes of rows not done, so the page costs what the
//! backlog is, not what the tables hold.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::access::Viewer;
use crate::forms::query;
use crate::layout::{ago, page, unavailable};
use crate::{Console, ConsoleStore};

pub(crate) async fn show<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let seen = match console.store.observe().await {
        Ok(seen) => seen,
        Err(e) => return unavailable(prefix, &viewer, "the inbox tables", &e),
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
    page(prefix, &viewer, "Overview", true, body).into_response()
}
