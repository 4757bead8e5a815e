//! `/rows`: the newest store-then-process rows, filtered by consumer, status, aggregate,
//! message id, age and payload text, searched within the newest
//! [`SEARCH_WINDOW`](inboxed_core::observe::SEARCH_WINDOW) ids (a message id with its consumer
//! is found anywhere); `/rows/{id}`: one in full, with its replay and its aggregate's release.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use inboxed_core::observe::SEARCH_WINDOW;
use maud::{Markup, html};

use crate::access::{Role, Viewer};
use crate::forms::{Filters as _, RowFilters, query};
use crate::layout::{ago, failure, found, page, payload, unavailable};
use crate::{Console, ConsoleStore};

pub(crate) async fn list<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<RowFilters>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let limit = console.config.list_limit();
    let filter = match filters.filter(limit) {
        Ok(filter) => filter,
        Err(e) => return failure(&console.config, &viewer, StatusCode::BAD_REQUEST, &e),
    };
    let rows = match console.store.rows(&filter).await {
        Ok(rows) => rows,
        Err(e) => return unavailable(&console.config, &viewer, "the inbox rows", &e),
    };
    let body = html! {
        form method="get" action={ (prefix) "/rows" } {
            input name="consumer" placeholder="consumer" value=(filters.consumer);
            select name="status" {
                @for s in ["", "pending", "processing", "done", "dead"] {
                    option value=(s) selected[filters.status == s] {
                        @if s.is_empty() { "any status" } @else { (s) }
                    }
                }
            }
            input name="aggregate" placeholder="aggregate" value=(filters.aggregate);
            input name="message_id" placeholder="message id" value=(filters.message_id);
            input name="within" placeholder="received within (2h)" value=(filters.within);
            input name="payload" placeholder="payload contains" value=(filters.payload);
            input name="json" placeholder="json path=value (order.id=42)" value=(filters.json);
            button type="submit" { "Filter" }
        }
        p.summary {
            (rows.len()) " shown, newest first"
            @if rows.len() as u64 == u64::from(limit) { " (the newest " (limit) " that match)" }
            @if !filter.is_keyed() { "; searched within the newest " (SEARCH_WINDOW) " rows" }
            "."
        }
        @if filters.status == "dead" && !filters.consumer.trim().is_empty() && !rows.is_empty() {
            (replay_link(prefix, &viewer, &filters, "all dead rows that match"))
        }
        div.scroll { table {
            thead { tr {
                th { "Id" } th { "Consumer" } th { "Message id" } th { "Aggregate" } th { "Status" }
                th { "Attempts" } th { "Received" } th { "Last error" }
            } }
            tbody { @for r in &rows { tr {
                td { a href={ (prefix) "/rows/" (r.id) } { (r.id) } }
                td { (r.consumer) }
                td { (r.message_id) }
                td { (r.aggregate_id.as_deref().unwrap_or("")) }
                td class=[(r.status == "dead").then_some("warn")] { (r.status) }
                td { (r.attempts) }
                td { (ago(r.received)) }
                td.wrap { (r.last_error.as_deref().unwrap_or("")) }
            } } }
        } }
    };
    page(&console.config, &viewer, "Rows", false, body).into_response()
}

/// The link to the confirmation of a replay of what `filters` select; for operators only.
fn replay_link(prefix: &str, viewer: &Viewer, filters: &RowFilters, what: &str) -> Markup {
    if viewer.role < Role::Operator {
        return html! { p.note { "Read-only: replaying needs the operator role." } };
    }
    html! {
        div.actions {
            a href={ (prefix) "/rows/replay?" (filters.query_string()) } { "Replay " (what) "…" }
        }
    }
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
        "row",
        id,
        console.store.row(id).await,
    ) {
        Ok(row) => row,
        Err(page) => return *page,
    };
    let this = RowFilters {
        consumer: row.consumer.clone(),
        id: Some(id),
        ..RowFilters::default()
    };
    let aggregate = row.aggregate_id.as_ref().map(|a| RowFilters {
        consumer: row.consumer.clone(),
        aggregate: a.clone(),
        ..RowFilters::default()
    });
    let body = html! {
        @if row.status == "dead" {
            (replay_link(prefix, &viewer, &this, "this row"))
            @if let Some(aggregate) = &aggregate {
                @if viewer.role >= Role::Operator {
                    div.actions {
                        a href={ (prefix) "/rows/replay?" (aggregate.query_string()) } {
                            "Release aggregate " (aggregate.aggregate) " (replay its dead rows)…"
                        }
                    }
                }
            }
        }
        dl {
            dt { "Consumer" } dd {
                a href={ (prefix) "/rows?consumer=" (query(&row.consumer)) } { (row.consumer) }
            }
            dt { "Message id" } dd { (row.message_id) }
            dt { "Aggregate" } dd {
                @if let Some(a) = &row.aggregate_id {
                    a href={ (prefix) "/rows?consumer=" (query(&row.consumer)) "&aggregate=" (query(a)) } { (a) }
                }
            }
            dt { "Type" } dd { (row.message_type.as_deref().unwrap_or("")) }
            dt { "Correlation id" } dd { (row.correlation_id.as_deref().unwrap_or("")) }
            dt { "Status" } dd.status { (row.status) }
            dt { "Attempts" } dd { (row.attempts) }
            dt { "Received" } dd { (ago(row.received)) }
            dt { "Available" } dd { (ago(row.available)) }
            dt { "Lease expires" } dd { (ago(row.lease_expires)) }
            dt { "Claimed by" } dd { (row.claimed_by.as_deref().unwrap_or("")) }
            dt { "Done" } dd { (ago(row.done)) }
            dt { "Payload" } dd { (row.payload_bytes) " bytes" }
        }
        @if let Some(e) = &row.last_error {
            h2 { "Last error" }
            pre { (e) }
        }
        h2 { "Payload" }
        (payload(config, &viewer, &row.payload))
    };
    page(
        &console.config,
        &viewer,
        &format!("Row {id}"),
        row.status != "done",
        body,
    )
    .into_response()
}
