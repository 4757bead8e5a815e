//! Retry dead letters into their consumers' inbox, or discard them: one, or all that match the
//! list's filter, through [`ObserveStore::act_on_dead_letters`](inboxed_core::observe::ObserveStore::act_on_dead_letters).

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use inboxed_core::observe::{LetterActParams, LetterAction, LettersActed, MOST_LETTERS_ACTED};
use maud::{Markup, html};

use super::{Confirmed, changed_note, form_tail, posted, refused, shown};
use crate::access::Viewer;
use crate::forms::{Filters as _, LetterFilters};
use crate::layout::{failure, page, unavailable};
use crate::{Console, ConsoleStore};

/// The most letters one retry from the console stores into the inbox. A retry takes about
/// three statements a letter in one transaction (10,000 took 11.6 s against PostgreSQL here,
/// debug build), and a request that passes `inboxed serve`'s 10 s deadline is cancelled and
/// rolled back; 2,000 took 2.6 s. A discard is one statement: it keeps the library's 10,000.
const MOST_RETRIED: u32 = 2_000;

/// The most letters one `action` touches.
fn most(action: LetterAction) -> u32 {
    if action == LetterAction::Retry {
        MOST_RETRIED
    } else {
        MOST_LETTERS_ACTED
    }
}

fn letter_action(name: &str) -> Option<LetterAction> {
    match name {
        "retry" => Some(LetterAction::Retry),
        "discard" => Some(LetterAction::Discard),
        _ => None,
    }
}

/// The dry run or the change of `action` on what `filters` select (and, when given, only the
/// `pinned` letters), at most `limit` letters.
async fn on_letters<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &LetterFilters,
    pinned: Option<&[i64]>,
    action: LetterAction,
    reason: &str,
    apply: bool,
) -> Result<LettersActed, inboxed_core::BoxError> {
    let limit = pinned.map_or(most(action), |p| {
        u32::try_from(p.len()).unwrap_or(MOST_LETTERS_ACTED)
    });
    let filter = filters.filter(limit)?;
    let one = filters.id.map(|id| [id]);
    let params = LetterActParams {
        filter: &filter,
        ids: pinned.or(one.as_ref().map(|i| &i[..])),
        action,
        actor: &viewer.name,
        reason,
        apply,
    };
    console.store.act_on_dead_letters(&params).await
}

pub(crate) async fn confirm<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<LetterFilters>,
    Query(form): Query<Confirmed>,
) -> Response {
    if let Some(refusal) = refused(&console, &viewer, None) {
        return refusal;
    }
    confirmation(&console, &viewer, &filters, &form.action, None).await
}

async fn confirmation<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &LetterFilters,
    action_name: &str,
    changed: Option<usize>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let Some(action) = letter_action(action_name) else {
        return failure(
            &console.config,
            viewer,
            StatusCode::BAD_REQUEST,
            "no such action",
        );
    };
    let dry = match on_letters(console, viewer, filters, None, action, "", false).await {
        Ok(dry) => dry,
        Err(e) => return unavailable(&console.config, viewer, "the dead letters", &e),
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
            (changed_note(changed))
            p { "Selected: " (filters.describe()) "." }
            p.count {
                strong { (n) } " dead letter(s) match"
                @if n as u64 == u64::from(most(action)) {
                    " (the most one action touches: run it again for the rest)"
                }
                "."
            }
            @if n > 0 {
                p { strong { (dry.acted.len()) } " will be " (effect) "." }
                @if action == LetterAction::Retry {
                    p.note { "For consumers that run store-then-process workers. A letter of a \
                        consumer whose processor reads a broker goes back to that broker with \
                        `inboxed dead-letters retry --to-broker`; retried here, it would wait \
                        for workers that never come." }
                }
                (kept_list(&dry))
                @if !dry.acted.is_empty() {
                    form method="post" action={ (prefix) "/dead-letters/act" } {
                        (filters.hidden())
                        input type="hidden" name="action" value=(action_name);
                        (form_tail(&console.csrf.token(viewer), &dry.selected,
                            &format!("{verb} {} dead letter(s)", dry.acted.len())))
                    }
                }
            }
        }
    };
    let title = format!("{verb} dead letters");
    (
        shown(changed),
        page(&console.config, viewer, &title, false, body),
    )
        .into_response()
}

fn kept_list(acted: &LettersActed) -> Markup {
    html! {
        @if !acted.kept.is_empty() {
            p { strong { (acted.kept.len()) } " will be kept:" }
            ul.kept { @for (id, why) in &acted.kept { li { "dead letter " (id) ": " (why) } } }
        }
    }
}

pub(crate) async fn act<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    RawForm(body): RawForm,
) -> Response {
    let (filters, form, ids): (LetterFilters, _, _) =
        match posted(&console, &viewer, &headers, &body) {
            Ok(posted) => posted,
            Err(refusal) => return *refusal,
        };
    let prefix = console.config.prefix.as_str();
    let Some(action) = letter_action(&form.action) else {
        return failure(
            &console.config,
            &viewer,
            StatusCode::BAD_REQUEST,
            "no such action",
        );
    };
    let still = match on_letters(&console, &viewer, &filters, Some(&ids), action, "", false).await {
        Ok(still) => still.selected.len(),
        Err(e) => return unavailable(&console.config, &viewer, "the dead letters", &e),
    };
    if still != ids.len() {
        return confirmation(&console, &viewer, &filters, &form.action, Some(still)).await;
    }
    let why = form.why.trim();
    let done = match on_letters(&console, &viewer, &filters, Some(&ids), action, why, true).await {
        Ok(done) => done,
        Err(e) => return unavailable(&console.config, &viewer, "the dead letters", &e),
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
            } } }
        }
        (kept_list(&done))
        p { a href={ (prefix) "/dead-letters" } { "Back to the dead letters" } }
    };
    page(
        &console.config,
        &viewer,
        &format!("{verb} dead letters"),
        false,
        body,
    )
    .into_response()
}
