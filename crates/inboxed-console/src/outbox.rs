//! `/outbox`: the newest outbox rows, filtered by status, destination, ordering key, message
//! id, age and payload, searched within the newest
//! [`SEARCH_WINDOW`](inboxed_core::observe::SEARCH_WINDOW) ids (a message id is found
//! anywhere), with the retry and discard of the dead ones; `/outbox/{id}`: one in full.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use inboxed_core::observe::SEARCH_WINDOW;
use inboxed_core::outbox::OutboxStatus;
use maud::{Markup, html};

use crate::access::Viewer;
use crate::forms::{Filters as _, OutboxFilters, query};
use crate::layout::{ago, failure, found, page, payload, unavailable};
use crate::{Console, ConsoleStore};

pub(crate) async fn list<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<OutboxFilters>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let limit = console.config.list_limit();
    let browse = match filters.browse(limit) {
        Ok(browse) => browse,
        Err(e) => return failure(&console.config, &viewer, StatusCode::BAD_REQUEST, &e),
    };
    let rows = match console.store.outbox(&browse).await {
        Ok(rows) => rows,
        Err(e) => return unavailable(&console.config, &viewer, "the outbox", &e),
    };
    let body = html! {
        form method="get" action={ (prefix) "/outbox" } {
            select name="status" {
                @for s in ["", "pending", "sending", "sent", "dead"] {
                    option value=(s) selected[filters.status == s] {
                        @if s.is_empty() { "any status" } @else { (s) }
                    }
                }
            }
            input name="destination" placeholder="destination" value=(filters.destination);
            input name="key" placeholder="ordering key" value=(filters.key);
            input name="message_id" placeholder="message id" value=(filters.message_id);
            input name="within" placeholder="written within (2h)" value=(filters.within);
            input name="payload" placeholder="payload contains" value=(filters.payload);
            input name="json" placeholder="json path=value (order.id=42)" value=(filters.json);
            button type="submit" { "Filter" }
        }
        p.summary {
            (rows.len()) " shown, newest first"
            @if rows.len() as u64 == u64::from(limit) { " (the newest " (limit) " that match)" }
            @if browse.message_id.is_none() {
                "; searched within the newest " (SEARCH_WINDOW) " rows"
            } @else {
                "; a message id names one row: the other fields are not applied"
            }
            "."
        }
        @if filters.status == "dead" && rows.iter().any(|r| r.status == OutboxStatus::Dead) {
            @if filters.actionable() {
                (act_links(prefix, &viewer, &filters, "all dead rows that match"))
            } @else {
                p.note { "Retry and discard select by destination, ordering key and message id:
                    clear the age and payload fields to act on all that match, or act on one
                    row from its page." }
            }
        }
        div.scroll { table {
            thead { tr {
                th { "Id" } th { "Destination" } th { "Message id" } th { "Ordering key" }
                th { "Status" } th { "Attempts" } th { "Written" } th { "Last error" }
            } }
            tbody { @for r in &rows { tr {
                td { a href={ (prefix) "/outbox/" (r.id) } { (r.id) } }
                td { (r.destination) }
                td { (r.message_id) }
                td { (r.ordering_key.as_deref().unwrap_or("")) }
                td class=[(r.status == OutboxStatus::Dead).then_some("warn")] { (r.status) }
                td { (r.attempts) }
                td { (ago(r.created_at)) }
                td.wrap { (r.last_error.as_deref().unwrap_or("")) }
            } } }
        } }
    };
    page(&console.config, &viewer, "Outbox", false, body).into_response()
}

/// The links to the confirmations of a retry and a discard of what `filters` select.
fn act_links(prefix: &str, viewer: &Viewer, filters: &OutboxFilters, what: &str) -> Markup {
    crate::actions::act_links(
        prefix,
        viewer,
        "/outbox/act",
        &filters.query_string(),
        &format!("Retry {what} (publish again)…"),
        &format!("Discard {what}…"),
    )
}

pub(crate) async fn one<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<i64>,
) -> Response {
    let config = &console.config;
    let prefix = config.prefix.as_str();
    let row = match found(
        &console.config,
        &viewer,
        "outbox row",
        id,
        console.store.outbox_row(id).await,
    ) {
        Ok(row) => row,
        Err(page) => return *page,
    };
    let this = OutboxFilters {
        id: Some(id),
        ..OutboxFilters::default()
    };
    let body = html! {
        @if row.status == OutboxStatus::Dead {
            (act_links(prefix, &viewer, &this, "this row"))
        }
        dl {
            dt { "Destination" } dd {
                a href={ (prefix) "/outbox?destination=" (query(&row.destination)) } {
                    (row.destination)
                }
            }
            dt { "Message id" } dd { (row.message_id) }
            dt { "Ordering key" } dd {
                @if let Some(k) = &row.ordering_key {
                    a href={ (prefix) "/outbox?key=" (query(k)) } { (k) }
                }
            }
            dt { "Type" } dd { (row.message_type.as_deref().unwrap_or("")) }
            dt { "Correlation id" } dd { (row.correlation_id.as_deref().unwrap_or("")) }
            dt { "Caused by" } dd {
                @if let (Some(c), Some(m)) = (&row.caused_by_consumer, &row.caused_by_message_id) {
                    a href={ (prefix) "/rows?consumer=" (query(c)) "&message_id=" (query(m)) } {
                        (c) " / " (m)
                    }
                }
            }
            dt { "Status" } dd.status { (row.status) }
            dt { "Attempts" } dd { (row.attempts) }
            dt { "Written" } dd { (ago(row.created_at)) }
            dt { "Available" } dd { (ago(row.available_at)) }
            dt { "Sent" } dd { (ago(row.sent_at)) }
            dt { "Claimed by" } dd { (row.claimed_by.as_deref().unwrap_or("")) }
            dt { "Payload" } dd { (row.payload_bytes) " bytes" }
        }
        @if !row.headers.is_empty() {
            h2 { "Headers" }
            dl { @for (k, v) in &row.headers { dt { (k) } dd { (v) } } }
        }
        @if let Some(e) = &row.last_error {
            h2 { "Last error" }
            pre { (e) }
        }
        h2 { "Payload" }
        (payload(config, &viewer, &row.payload))
    };
    let unfinished = matches!(row.status, OutboxStatus::Pending | OutboxStatus::Sending);
    page(
        &console.config,
        &viewer,
        &format!("Outbox row {id}"),
        unfinished,
        body,
    )
    .into_response()
}
