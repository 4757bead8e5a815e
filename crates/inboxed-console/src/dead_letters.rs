//! `/dead-letters`: the newest dead letters, filtered by consumer, reason, message type and
//! error text, at most [`ConsoleConfig::page_rows`](crate::ConsoleConfig::page_rows) of them;
//! `/dead-letters/{id}`: one in full.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use inboxed_core::observe::DeadLetterFilter;
use maud::{Markup, html};
use serde::Deserialize;

use crate::layout::{ago, failure, page, unavailable};
use crate::overview::query;
use crate::{Console, ConsoleConfig, ConsoleStore};

/// The most rows a list reads, whatever the configuration says.
const MOST_ROWS: u32 = 1000;

/// The list's filters, from the query string; an empty field filters nothing.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    consumer: String,
    #[serde(default)]
    reason: String,
    #[serde(default, rename = "type")]
    message_type: String,
    #[serde(default)]
    error: String,
}

/// `Some(s)` unless `s` is blank.
fn given(s: &str) -> Option<&str> {
    let s = s.trim();
    (!s.is_empty()).then_some(s)
}

pub(crate) async fn list<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Query(filters): Query<Filters>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let limit = console.config.page_rows.clamp(1, MOST_ROWS);
    let filter = DeadLetterFilter {
        consumer: given(&filters.consumer),
        reason: given(&filters.reason),
        message_type: given(&filters.message_type),
        error_contains: given(&filters.error),
        limit,
        ..DeadLetterFilter::default()
    };
    let letters = match console.store.dead_letters(&filter).await {
        Ok(letters) => letters,
        Err(e) => return unavailable(prefix, "the dead letters", &e),
    };
    let body = html! {
        form method="get" action={ (prefix) "/dead-letters" } {
            input name="consumer" placeholder="consumer" value=(filters.consumer);
            input name="reason" placeholder="reason" value=(filters.reason);
            input name="type" placeholder="message type" value=(filters.message_type);
            input name="error" placeholder="error contains" value=(filters.error);
            button type="submit" { "Filter" }
        }
        p {
            (letters.len()) " shown, newest first"
            @if letters.len() as u64 == u64::from(limit) {
                " (the newest " (limit) " that match: narrow the filter to see older ones)"
            }
            "."
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
    page(prefix, "Dead letters", body).into_response()
}

pub(crate) async fn one<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Path(id): Path<i64>,
) -> Response {
    let config = &console.config;
    let prefix = config.prefix.as_str();
    let letter = match console.store.dead_letter(id).await {
        Ok(Some(letter)) => letter,
        Ok(None) => {
            return failure(
                prefix,
                StatusCode::NOT_FOUND,
                &format!("no dead letter {id}"),
            )
            .into_response();
        }
        Err(e) => return unavailable(prefix, "the dead letter", &e),
    };
    let body = html! {
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
        (payload(config, &letter.payload))
    };
    page(prefix, &format!("Dead letter {id}"), body).into_response()
}

/// The payload as JSON when it parses, hex otherwise, cut at the configured size; or why it is
/// not shown.
fn payload(config: &ConsoleConfig, bytes: &[u8]) -> Markup {
    if !config.show_payloads {
        return html! { p { "Hidden (the console's show_payloads is off)." } };
    }
    if bytes.is_empty() {
        return html! { p { "None kept (empty, or redacted)." } };
    }
    let shown = &bytes[..bytes.len().min(config.payload_bytes)];
    let cut = shown.len() < bytes.len();
    let text = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(json) if !cut => serde_json::to_string_pretty(&json).unwrap_or_default(),
        _ => hex(shown),
    };
    html! {
        pre { (text) }
        @if cut { p { "The first " (shown.len()) " of " (bytes.len()) " bytes." } }
    }
}

/// `bytes` as hex, 32 to a line.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(if i % 32 == 0 { '\n' } else { ' ' });
        }
        let _ = write!(out, "{b:02x}");
    }
    out
}
