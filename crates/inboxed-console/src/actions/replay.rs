//! Replay rows: a consumer's dead rows back to pending (and done ones, from a filter on status
//! `done`: a re-drive, which applies their effect again); one row, the dead rows of an
//! aggregate (which releases it), or all that match; through the library's
//! [`Inbox::replay`](inboxed_core::inbox::Inbox::replay), as `inboxed replay` does.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Replayed, Selector};
use inboxed_core::observe::RowFilter;
use maud::html;

use super::{MOST_ACTED, changed_note, form_tail, posted, refused, shown};
use crate::access::Viewer;
use crate::forms::{Filters as _, RowFilters, given};
use crate::layout::{failure, page, unavailable};
use crate::{Console, ConsoleStore};

/// The replay a row filter asks for: whose rows, which (only the `pinned` ones when given),
/// and whether done rows too (a re-drive, from a filter on status `done`).
async fn selection<S: ConsoleStore>(
    console: &Console<S>,
    filters: &RowFilters,
    pinned: Option<Vec<i64>>,
) -> Result<(ConsumerName, Selector, bool), String> {
    let consumer = ConsumerName::new(filters.consumer.trim().to_owned())
        .map_err(|e| format!("a replay needs its consumer: {e}"))?;
    let include_done = filters.status.trim() == "done";
    let mut selector = Selector::all();
    selector.aggregate_id = given(&filters.aggregate).map(str::to_owned);
    selector.received_from = filters.received_from()?;
    if let Some(pinned) = pinned {
        selector.ids = Some(pinned);
    } else if let Some(id) = filters.id {
        selector.ids = Some(vec![id]);
    } else if [&filters.message_id, &filters.payload, &filters.json]
        .iter()
        .any(|f| given(f).is_some())
    {
        // What the selector cannot say, the list finds: the matching rows' ids.
        let limit = u32::try_from(MOST_ACTED + 1).unwrap_or(u32::MAX);
        let mut f: RowFilter<'_> = filters.filter(limit)?;
        f.status = Some(if include_done { "done" } else { "dead" });
        let rows = console.store.rows(&f).await.map_err(|e| e.to_string())?;
        selector.ids = Some(rows.iter().map(|r| r.id).collect());
    }
    Ok((consumer, selector, include_done))
}

/// What a replay of `filters` (of the `pinned` rows only, when given) would reset.
async fn preview<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &RowFilters,
    pinned: Option<Vec<i64>>,
) -> Result<(ConsumerName, Selector, bool, Replayed), Response> {
    let (consumer, selector, include_done) = selection(console, filters, pinned)
        .await
        .map_err(|e| failure(&console.config, viewer, StatusCode::BAD_REQUEST, &e))?;
    let found = console
        .store
        .replay(&consumer, &selector, include_done, "", "", false)
        .await
        .map_err(|e| unavailable(&console.config, viewer, "the rows", &e))?;
    Ok((consumer, selector, include_done, found))
}

pub(crate) async fn confirm<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<RowFilters>,
) -> Response {
    if let Some(refusal) = refused(&console, &viewer, None) {
        return refusal;
    }
    confirmation(&console, &viewer, &filters, None).await
}

async fn confirmation<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &RowFilters,
    changed: Option<usize>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let (consumer, _, include_done, found) = match preview(console, viewer, filters, None).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let n = found.ids.len();
    let body = html! {
        div.confirm {
            (changed_note(changed))
            p { "Consumer " strong { (consumer) } "; "
                @if let Some(id) = filters.id { "row " (id) } @else { "the rows the filter selects" } "." }
            p.count { strong { (n) } " row(s) will be set pending again"
                @if found.done_rows > 0 { ", " strong { (found.done_rows) } " of them done: "
                    span.warn { "their effect is applied a second time (a re-drive)" } }
                "." }
            @if !filters.aggregate.trim().is_empty() {
                p.note { "Releases aggregate " (filters.aggregate)
                    ": ordered workers hold its later rows until its dead rows are done." }
            }
            @if n > MOST_ACTED {
                p.warn { "One action replays " (MOST_ACTED) " rows at most: narrow the filter \
                    (an aggregate, an age)." }
            } @else if n > 0 {
                form method="post" action={ (prefix) "/rows/replay" } {
                    (filters.hidden())
                    (form_tail(&console.csrf.token(viewer), &found.ids,
                        &format!("{} {n} row(s)", if include_done { "Re-drive" } else { "Replay" })))
                }
            }
        }
    };
    (
        shown(changed),
        page(&console.config, viewer, "Replay rows", false, body),
    )
        .into_response()
}

pub(crate) async fn replay<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    RawForm(body): RawForm,
) -> Response {
    let (filters, form, ids): (RowFilters, _, _) = match posted(&console, &viewer, &headers, &body)
    {
        Ok(posted) => posted,
        Err(refusal) => return *refusal,
    };
    let prefix = console.config.prefix.as_str();
    let confirmed = ids.len();
    let (consumer, selector, include_done, still) =
        match preview(&console, &viewer, &filters, Some(ids)).await {
            Ok(p) => p,
            Err(r) => return r,
        };
    if still.ids.len() != confirmed {
        return confirmation(&console, &viewer, &filters, Some(still.ids.len())).await;
    }
    let done = match console
        .store
        .replay(
            &consumer,
            &selector,
            include_done,
            &viewer.name,
            form.why.trim(),
            true,
        )
        .await
    {
        Ok(done) => done,
        Err(e) => return unavailable(&console.config, &viewer, "the rows", &e),
    };
    let body = html! {
        p.done { "Set " strong { (done.ids.len()) } " row(s) of " (consumer) " pending again"
            @if done.done_rows > 0 { " (" (done.done_rows) " of them done)" }
            ", recorded in the " a href={ (prefix) "/audit" } { "audit trail" } " as " (viewer.name) "." }
        ul { @for id in &done.ids { li { a href={ (prefix) "/rows/" (id) } { "row " (id) } } } }
    };
    page(&console.config, &viewer, "Replayed rows", false, body).into_response()
}
