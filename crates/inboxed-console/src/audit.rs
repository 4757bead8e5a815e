//! `/audit`: who replayed, re-drove, retried or discarded what, when and why, newest first:
//! the records every change of the console and of the CLI writes in its own transaction.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;

use crate::access::Viewer;
use crate::forms::given;
use crate::layout::{ago, page, unavailable};
use crate::{Console, ConsoleStore};

#[derive(Debug, Default, Deserialize)]
pub(crate) struct AuditFilters {
    #[serde(default)]
    consumer: String,
}

pub(crate) async fn list<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<AuditFilters>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let limit = console.config.list_limit();
    let trail = match console
        .store
        .audit_trail(given(&filters.consumer), limit)
        .await
    {
        Ok(trail) => trail,
        Err(e) => return unavailable(&console.config, &viewer, "the audit trail", &e),
    };
    let body = html! {
        form method="get" action={ (prefix) "/audit" } {
            input name="consumer" placeholder="consumer" value=(filters.consumer);
            button type="submit" { "Filter" }
        }
        p.summary { (trail.len()) " shown, newest first." }
        div.scroll { table {
            thead { tr {
                th { "When" } th { "Who" } th { "Action" } th { "Consumer" } th { "Rows" }
                th { "Why" } th { "Filter" } th { "Ids" }
            } }
            tbody { @for a in &trail { tr {
                td { (ago(a.at)) }
                td { (a.actor) }
                td { (a.action) }
                td { (a.consumer) }
                td { (a.rows) @if a.done_rows > 0 { " (" (a.done_rows) " done)" } }
                td.wrap { (a.reason) }
                td.wrap { (a.selector) }
                td.wrap { (a.ids) }
            } } }
        } }
    };
    page(&console.config, &viewer, "Audit trail", true, body).into_response()
}
