//! The operators' actions: retry or discard dead letters, replay rows (a re-drive for done
//! ones), release a parked aggregate (replay its dead rows). Each is a GET that shows what it
//! will touch, counted by the library's own dry run, and a POST that does it: from an operator
//! only, with the form's CSRF token, a reason for the audit record, and only if the selection
//! still counts what was confirmed (otherwise the confirmation is shown again with the new
//! count). The change and its audit record (who, when, why, the filter) commit together.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Replayed, Selector};
use inboxed_core::observe::{
    LetterActParams, LetterAction, LettersActed, MOST_LETTERS_ACTED, RowFilter,
};
use maud::{Markup, html};
use serde::Deserialize;

use crate::access::{Role, Viewer, cross_site};
use crate::forms::{LetterFilters, RowFilters, given};
use crate::layout::{failure, page, unavailable};
use crate::{Console, ConsoleStore};

/// The fields of a confirmation's form besides the filters.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Confirmed {
    #[serde(default)]
    action: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    expected: Option<usize>,
    /// Why, for the audit record (not `reason`: that is a dead-letter filter).
    #[serde(default)]
    why: String,
}

/// Refuses a viewer who may not act, or a POST without its form's token.
fn refused<S>(
    console: &Console<S>,
    viewer: &Viewer,
    post: Option<(&HeaderMap, &Confirmed)>,
) -> Option<Response> {
    let prefix = console.config.prefix.as_str();
    if viewer.role < Role::Operator {
        return Some(failure(
            prefix,
            viewer,
            StatusCode::FORBIDDEN,
            "Refused: this user is read-only; acting needs the operator role.",
        ));
    }
    let (headers, form) = post?;
    if cross_site(headers) || !console.csrf.verify(viewer, &form.csrf) {
        return Some(failure(
            prefix,
            viewer,
            StatusCode::FORBIDDEN,
            "Refused: the form's token is missing or stale (or the request came from another \
             site). Open the confirmation again.",
        ));
    }
    None
}

fn letter_action(name: &str) -> Option<LetterAction> {
    match name {
        "retry" => Some(LetterAction::Retry),
        "discard" => Some(LetterAction::Discard),
        _ => None,
    }
}

/// The dry run or the change of `action` on what `filters` select, at most `limit` letters.
async fn on_letters<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &LetterFilters,
    action: LetterAction,
    reason: &str,
    limit: u32,
    apply: bool,
) -> Result<LettersActed, inboxed_core::BoxError> {
    let filter = filters.filter(limit);
    let ids = filters.id.map(|id| [id]);
    let params = LetterActParams {
        filter: &filter,
        ids: ids.as_ref().map(|i| &i[..]),
        action,
        actor: &viewer.name,
        reason,
        apply,
    };
    console.store.act_on_dead_letters(&params).await
}

pub(crate) async fn confirm_letters<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<LetterFilters>,
    Query(form): Query<Confirmed>,
) -> Response {
    if let Some(refusal) = refused(&console, &viewer, None) {
        return refusal;
    }
    letters_confirmation(&console, &viewer, &filters, &form.action, None).await
}

async fn letters_confirmation<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &LetterFilters,
    action_name: &str,
    changed: Option<usize>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let Some(action) = letter_action(action_name) else {
        return failure(prefix, viewer, StatusCode::BAD_REQUEST, "no such action");
    };
    let dry = match on_letters(
        console,
        viewer,
        filters,
        action,
        "",
        MOST_LETTERS_ACTED,
        false,
    )
    .await
    {
        Ok(dry) => dry,
        Err(e) => return unavailable(prefix, viewer, "the dead letters", &e),
    };
    let (verb, effect) = match action {
        LetterAction::Retry => (
            "Retry",
            "stored into their consumer's store-then-process inbox as pending (its workers \
             process them again) and deleted from the dead letters",
        ),
        _ => ("Discard", "deleted for good: they will never be processed"),
    };
    let n = dry.selected.len();
    let body = html! {
        div.confirm {
            (changed_note(changed, n))
            p { "Selected: " (filters.describe()) "." }
            p.count {
                strong { (n) } " dead letter(s) match"
                @if n as u64 == u64::from(MOST_LETTERS_ACTED) {
                    " (the most one action touches: run it again for the rest)"
                }
                "."
            }
            @if n > 0 {
                p { strong { (dry.acted.len()) } " will be " (effect) "." }
                (kept_list(&dry))
                @if !dry.acted.is_empty() {
                    form method="post" action={ (prefix) "/dead-letters/act" } {
                        (filters.hidden())
                        input type="hidden" name="action" value=(action_name);
                        input type="hidden" name="expected" value=(n);
                        input type="hidden" name="csrf" value=(console.csrf.token(viewer));
                        label { "Why (kept in the audit trail)"
                            textarea name="why" required {} }
                        button.danger type="submit" { (verb) " " (dry.acted.len()) " dead letter(s)" }
                    }
                }
            }
        }
    };
    let title = format!("{verb} dead letters");
    (shown(changed), page(prefix, viewer, &title, false, body)).into_response()
}

fn kept_list(acted: &LettersActed) -> Markup {
    html! {
        @if !acted.kept.is_empty() {
            p { strong { (acted.kept.len()) } " will be kept:" }
            ul.kept { @for (id, why) in &acted.kept { li { "dead letter " (id) ": " (why) } } }
        }
    }
}

/// A POSTed confirmation: its filters and its own fields (the form read twice), or the
/// refusal of a viewer who may not act or a form without its token.
fn posted<S, F: serde::de::DeserializeOwned + Default>(
    console: &Console<S>,
    viewer: &Viewer,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(F, Confirmed), Box<Response>> {
    let filters = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let form: Confirmed = serde_urlencoded::from_bytes(body).unwrap_or_default();
    match refused(console, viewer, Some((headers, &form))) {
        Some(refusal) => Err(Box::new(refusal)),
        None => Ok((filters, form)),
    }
}

/// A confirmation's status: 409 when shown again because the selection changed.
fn shown(changed: Option<usize>) -> StatusCode {
    if changed.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    }
}

/// The warning of a confirmation shown again.
fn changed_note(changed: Option<usize>, now: usize) -> Markup {
    html! {
        @if let Some(before) = changed {
            p.warn { "The selection changed since it was confirmed (" (before)
                " then, " (now) " now): confirm again." }
        }
    }
}

pub(crate) async fn act_on_letters<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    RawForm(body): RawForm,
) -> Response {
    let (filters, form): (LetterFilters, Confirmed) =
        match posted(&console, &viewer, &headers, &body) {
            Ok(posted) => posted,
            Err(refusal) => return *refusal,
        };
    let prefix = console.config.prefix.as_str();
    let (Some(action), Some(expected), Some(reason)) =
        (letter_action(&form.action), form.expected, given(&form.why))
    else {
        return failure(
            prefix,
            &viewer,
            StatusCode::BAD_REQUEST,
            "an action, the count confirmed and a reason are needed",
        );
    };
    let limit = u32::try_from(expected).unwrap_or(MOST_LETTERS_ACTED);
    let now = match on_letters(
        &console,
        &viewer,
        &filters,
        action,
        "",
        MOST_LETTERS_ACTED,
        false,
    )
    .await
    {
        Ok(now) => now.selected.len(),
        Err(e) => return unavailable(prefix, &viewer, "the dead letters", &e),
    };
    if now != expected {
        return letters_confirmation(&console, &viewer, &filters, &form.action, Some(expected))
            .await;
    }
    let done = match on_letters(&console, &viewer, &filters, action, reason, limit, true).await {
        Ok(done) => done,
        Err(e) => return unavailable(prefix, &viewer, "the dead letters", &e),
    };
    let verb = if action == LetterAction::Retry {
        "Retried"
    } else {
        "Discarded"
    };
    let body = html! {
        p.done { (verb) " " strong { (done.acted.len()) } " dead letter(s), recorded in the "
            a href={ (prefix) "/audit" } { "audit trail" } " as " (viewer.name) "." }
        @if !done.rows.is_empty() {
            ul { @for (letter, row) in &done.rows { li {
                "dead letter " (letter) " → "
                @if let Some(row) = row { a href={ (prefix) "/rows/" (row) } { "row " (row) } }
                @else { "the row it was retried into before" }
            } } }
        }
        (kept_list(&done))
        p { a href={ (prefix) "/dead-letters" } { "Back to the dead letters" } }
    };
    page(
        prefix,
        &viewer,
        &format!("{verb} dead letters"),
        false,
        body,
    )
    .into_response()
}

/// The replay a row filter asks for: whose rows, which, and whether done rows too (a
/// re-drive, from a filter on status `done`).
async fn selection<S: ConsoleStore>(
    console: &Console<S>,
    filters: &RowFilters,
) -> Result<(ConsumerName, Selector, bool), String> {
    let consumer = ConsumerName::new(filters.consumer.trim().to_owned())
        .map_err(|e| format!("a replay needs its consumer: {e}"))?;
    let include_done = filters.status.trim() == "done";
    let mut selector = Selector::all();
    selector.aggregate_id = given(&filters.aggregate).map(str::to_owned);
    selector.received_from = filters.received_from()?;
    if let Some(id) = filters.id {
        selector.ids = Some(vec![id]);
    } else if given(&filters.message_id).is_some() || given(&filters.payload).is_some() {
        // What the selector cannot say, the list finds: the matching rows' ids.
        let mut f: RowFilter<'_> = filters.filter(MOST_LETTERS_ACTED)?;
        f.status = Some(if include_done { "done" } else { "dead" });
        let rows = console.store.rows(&f).await.map_err(|e| e.to_string())?;
        selector.ids = Some(rows.iter().map(|r| r.id).collect());
    }
    Ok((consumer, selector, include_done))
}

pub(crate) async fn confirm_replay<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<RowFilters>,
) -> Response {
    if let Some(refusal) = refused(&console, &viewer, None) {
        return refusal;
    }
    replay_confirmation(&console, &viewer, &filters, None).await
}

async fn preview<S: ConsoleStore>(
    console: &Console<S>,
    filters: &RowFilters,
) -> Result<(ConsumerName, Selector, bool, Replayed), Response> {
    let (consumer, selector, include_done) = selection(console, filters)
        .await
        .map_err(|e| (StatusCode::BAD_REQUEST, e).into_response())?;
    let found = console
        .store
        .replay(&consumer, &selector, include_done, "", "", false)
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response())?;
    Ok((consumer, selector, include_done, found))
}

async fn replay_confirmation<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &RowFilters,
    changed: Option<usize>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let (consumer, _, include_done, found) = match preview(console, filters).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let n = found.ids.len();
    let body = html! {
        div.confirm {
            (changed_note(changed, n))
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
            @if n > 0 {
                form method="post" action={ (prefix) "/rows/replay" } {
                    (filters.hidden())
                    input type="hidden" name="expected" value=(n);
                    input type="hidden" name="csrf" value=(console.csrf.token(viewer));
                    label { "Why (kept in the audit trail)" textarea name="why" required {} }
                    button.danger type="submit" {
                        @if include_done { "Re-drive " } @else { "Replay " } (n) " row(s)"
                    }
                }
            }
        }
    };
    (
        shown(changed),
        page(prefix, viewer, "Replay rows", false, body),
    )
        .into_response()
}

pub(crate) async fn replay<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    RawForm(body): RawForm,
) -> Response {
    let (filters, form): (RowFilters, Confirmed) = match posted(&console, &viewer, &headers, &body)
    {
        Ok(posted) => posted,
        Err(refusal) => return *refusal,
    };
    let prefix = console.config.prefix.as_str();
    let (Some(expected), Some(reason)) = (form.expected, given(&form.why)) else {
        return failure(
            prefix,
            &viewer,
            StatusCode::BAD_REQUEST,
            "the count confirmed and a reason are needed",
        );
    };
    let (consumer, selector, include_done, found) = match preview(&console, &filters).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if found.ids.len() != expected {
        return replay_confirmation(&console, &viewer, &filters, Some(expected)).await;
    }
    let done = match console
        .store
        .replay(
            &consumer,
            &selector,
            include_done,
            &viewer.name,
            reason,
            true,
        )
        .await
    {
        Ok(done) => done,
        Err(e) => return unavailable(prefix, &viewer, "the rows", &e),
    };
    let body = html! {
        p.done { "Set " strong { (done.ids.len()) } " row(s) of " (consumer) " pending again"
            @if done.done_rows > 0 { " (" (done.done_rows) " of them done)" }
            ", recorded in the " a href={ (prefix) "/audit" } { "audit trail" } " as " (viewer.name) "." }
        ul { @for id in &done.ids { li { a href={ (prefix) "/rows/" (id) } { "row " (id) } } } }
    };
    page(prefix, &viewer, "Replayed rows", false, body).into_response()
}
