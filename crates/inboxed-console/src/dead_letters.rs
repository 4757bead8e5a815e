//! `/dead-letters`: the newest dead letters, filtered by consumer, reason, message type,
//! error text, message id, age and payload (text, or a value at a JSON path), at most [`ConsoleConfig::page_rows`](crate::ConsoleConfig::page_rows) of them,
//! with the actions on all that match; `/dead-letters/{id}`: one in full, with its own.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use inboxed_core::observe::SEARCH_WINDOW;
use maud::{Markup, html};

use crate::access::Viewer;
use crate::forms::{Filters as _, LetterFilters, query};
use crate::layout::{ago, failure, found, page, payload, unavailable};
use crate::{Console, ConsoleStore};

pub(crate) async fn list<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<LetterFilters>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let limit = console.config.list_limit();
    let filter = match filters.filter(limit) {
        Ok(filter) => filter,
        Err(e) => return failure(&console.config, &viewer, StatusCode::BAD_REQUEST, &e),
    };
    let letters = match console.store.dead_letters(&filter).await {
        Ok(letters) => letters,
        Err(e) => return unavailable(&console.config, &viewer, "the dead letters", &e),
    };
    let body = html! {
        form method="get" action={ (prefix) "/dead-letters" } {
            input name="consumer" placeholder="consumer" value=(filters.consumer);
            input name="reason" placeholder="reason" value=(filters.reason);
            input name="type" placeholder="message type" value=(filters.message_type);
            input name="error" placeholder="error contains" value=(filters.error);
            input name="message_id" placeholder="message id" value=(filters.message_id);
            input name="within" placeholder="failed within (2h)" value=(filters.within);
            input name="payload" placeholder="payload contains" value=(filters.payload);
            input name="json" placeholder="json path=value (order.id=42)" value=(filters.json);
            button type="submit" { "Filter" }
        }
        p.summary {
            (letters.len()) " shown, newest first"
            @if letters.len() as u64 == u64::from(limit) {
                " (the newest " (limit) " that match: narrow the filter to see older ones)"
            }
            "; searched within the newest " (SEARCH_WINDOW) " dead letters"
            "."
        }
        @if !letters.is_empty() {
            (act_links(prefix, &viewer, &filters, "all that match"))
        }
        div.scroll { table {
            thead { tr {
                th { "Id" } th { "Consumer" } th { "Message id" } th { "Type" } th { "Reason" }
                th { "Attempts" } th { "Last failed" } th { "Error" }
            } }
            tbody { @for d in &letters { tr {
                td { a href={ (prefix) "/dead-letters/" (d.id) } { (d.id) } }
                td { (d.consumer) }
                td { (d.message_id.as_deref().unwrap_or("(none)")) }
                td { (d.message_type.as_deref().unwrap_or("")) }
                td { (d.reason) }
                td { (d.attempts) }
                td { (ago(d.last_failed)) }
                td.wrap { (d.error) }
            } } }
        } }
    };
    page(&console.config, &viewer, "Dead letters", false, body).into_response()
}

/// The links to the confirmations of a retry and a discard of what `filters` select.
fn act_links(prefix: &str, viewer: &Viewer, filters: &LetterFilters, what: &str) -> Markup {
    crate::actions::act_links(
        prefix,
        viewer,
        "/dead-letters/act",
        &filters.query_string(),
        &format!("Retry {what} into the inbox…"),
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
    let letter = match found(
        &console.config,
        &viewer,
        "dead letter",
        id,
        console.store.dead_letter(id).await,
    ) {
        Ok(letter) => letter,
        Err(page) => return *page,
    };
    let this = LetterFilters {
        id: Some(id),
        ..LetterFilters::default()
    };
    let body = html! {
        (act_links(prefix, &viewer, &this, "this one"))
        dl {
            dt { "Consumer" } dd {
                a href={ (prefix) "/dead-letters?consumer=" (query(&letter.consumer)) } {
                    (letter.consumer)
                }
            }
            dt { "Message id" } dd { (letter.message_id.as_deref().unwrap_or("(none)")) }
            dt { "Type" } dd { (letter.message_type.as_deref().unwrap_or("")) }
            dt { "Correlation id" } dd { (letter.correlation_id.as_deref().unwrap_or("")) }
            dt { "Reason" } dd { (letter.reason) }
            dt { "Attempts" } dd { (letter.attempts) }
            dt { "First failed" } dd { (ago(letter.first_failed)) }
            dt { "Last failed" } dd { (ago(letter.last_failed)) }
            dt { "Payload" } dd { (letter.payload.len()) " bytes" }
        }
        h2 { "Error" }
        pre { (letter.error) }
        h2 { "Payload" }
        (payload(config, &viewer, &letter.payload))
    };
    page(
        &console.config,
        &viewer,
        &format!("Dead letter {id}"),
        false,
        body,
    )
    .into_response()
}
