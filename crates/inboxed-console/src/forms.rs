//! The filters of the lists, as query strings and form fields: one struct per list, so that a
//! list, its links, its confirmation and its action all read the same fields the same way
//! and "all that match" means what the operator saw listed.

use std::time::{Duration, SystemTime};

use inboxed_core::observe::{DeadLetterFilter, RowFilter, SEARCH_WINDOW};
use inboxed_core::outbox::{OutboxBrowse, OutboxFilter, OutboxStatus};
use maud::{Markup, html};
use serde::Deserialize;

/// `Some(s)` unless `s` is blank.
pub(crate) fn given(s: &str) -> Option<&str> {
    let s = s.trim();
    (!s.is_empty()).then_some(s)
}

/// `value` escaped for a query string (maud escapes it again for the attribute).
pub(crate) fn query(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// `name=value&…` of the fields given.
fn query_string(fields: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        if given(value).is_some() {
            out.append_pair(name, value.trim());
        }
    }
    out.finish()
}

/// `query_string` of the fields, and of `id` when given.
fn query_with_id(fields: &[(&str, &str)], id: Option<i64>) -> String {
    let q = query_string(fields);
    match id {
        Some(id) if q.is_empty() => format!("id={id}"),
        Some(id) => format!("{q}&id={id}"),
        None => q,
    }
}

/// Hidden inputs carrying the fields given, and `id` when given, into a form.
fn hidden(fields: &[(&str, &str)], id: Option<i64>) -> Markup {
    html! {
        @for (name, value) in fields {
            @if given(value).is_some() { input type="hidden" name=(name) value=(value.trim()); }
        }
        @if let Some(id) = id { input type="hidden" name="id" value=(id); }
    }
}

/// The dead-letter list's filters; an empty field filters nothing.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct LetterFilters {
    #[serde(default)]
    pub(crate) consumer: String,
    #[serde(default)]
    pub(crate) reason: String,
    #[serde(default, rename = "type")]
    pub(crate) message_type: String,
    #[serde(default)]
    pub(crate) error: String,
    #[serde(default)]
    pub(crate) message_id: String,
    /// Failed last within this long: `90s`, `15m`, `2h`, `7d`.
    #[serde(default)]
    pub(crate) within: String,
    /// Text the payload contains.
    #[serde(default)]
    pub(crate) payload: String,
    /// `path=value`: the payload is JSON with this value at this path.
    #[serde(default)]
    pub(crate) json: String,
    /// One letter only (its page's buttons).
    #[serde(default)]
    pub(crate) id: Option<i64>,
}

impl LetterFilters {
    /// The filter (searching the newest [`SEARCH_WINDOW`] ids), or what is wrong with
    /// `within`.
    pub(crate) fn filter(&self, limit: u32) -> Result<DeadLetterFilter<'_>, String> {
        Ok(DeadLetterFilter {
            consumer: given(&self.consumer),
            reason: given(&self.reason),
            message_type: given(&self.message_type),
            error_contains: given(&self.error),
            message_id: given(&self.message_id),
            since: since(&self.within)?,
            payload_contains: given(&self.payload).map(str::as_bytes),
            payload_json: json_path(&self.json)?,
            limit,
            window: Some(SEARCH_WINDOW),
        })
    }

    fn named(&self) -> [(&str, &str); 8] {
        [
            ("consumer", &self.consumer),
            ("reason", &self.reason),
            ("type", &self.message_type),
            ("error", &self.error),
            ("message_id", &self.message_id),
            ("within", &self.within),
            ("payload", &self.payload),
            ("json", &self.json),
        ]
    }

    /// In words, for a confirmation.
    pub(crate) fn describe(&self) -> String {
        if let Some(id) = self.id {
            return format!("dead letter {id}");
        }
        describe(&self.named(), "every dead letter")
    }
}

/// The row list's filters; an empty field filters nothing.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct RowFilters {
    #[serde(default)]
    pub(crate) consumer: String,
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) aggregate: String,
    #[serde(default)]
    pub(crate) message_id: String,
    /// Received within this long: `90s`, `15m`, `2h`, `7d`.
    #[serde(default)]
    pub(crate) within: String,
    /// Text the payload contains.
    #[serde(default)]
    pub(crate) payload: String,
    /// `path=value`: the payload is JSON with this value at this path (`order.id=42`).
    #[serde(default)]
    pub(crate) json: String,
    /// One row only (its page's buttons).
    #[serde(default)]
    pub(crate) id: Option<i64>,
}

impl RowFilters {
    /// The filter, or what is wrong with `within`.
    pub(crate) fn filter(&self, limit: u32) -> Result<RowFilter<'_>, String> {
        Ok(RowFilter {
            consumer: given(&self.consumer),
            status: given(&self.status),
            aggregate_id: given(&self.aggregate),
            message_id: given(&self.message_id),
            received_from: self.received_from()?,
            payload_contains: given(&self.payload).map(str::as_bytes),
            payload_json: json_path(&self.json)?,
            limit,
            ..RowFilter::default()
        })
    }

    pub(crate) fn received_from(&self) -> Result<Option<SystemTime>, String> {
        since(&self.within)
    }

    fn named(&self) -> [(&str, &str); 7] {
        [
            ("consumer", &self.consumer),
            ("status", &self.status),
            ("aggregate", &self.aggregate),
            ("message_id", &self.message_id),
            ("within", &self.within),
            ("payload", &self.payload),
            ("json", &self.json),
        ]
    }
}

/// The outbox list's filters; an empty field filters nothing.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct OutboxFilters {
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) destination: String,
    #[serde(default)]
    pub(crate) key: String,
    /// The id a row is published under: that row wherever it is, the other fields ignored.
    #[serde(default)]
    pub(crate) message_id: String,
    /// Written within this long: `90s`, `15m`, `2h`, `7d`.
    #[serde(default)]
    pub(crate) within: String,
    /// Text the payload contains.
    #[serde(default)]
    pub(crate) payload: String,
    /// `path=value`: the payload is JSON with this value at this path.
    #[serde(default)]
    pub(crate) json: String,
    /// One row only (its page's buttons).
    #[serde(default)]
    pub(crate) id: Option<i64>,
}

impl OutboxFilters {
    /// The search (within the newest [`SEARCH_WINDOW`] ids), or what is wrong with a field.
    pub(crate) fn browse(&self, limit: u32) -> Result<OutboxBrowse<'_>, String> {
        let status = given(&self.status)
            .map(str::parse::<OutboxStatus>)
            .transpose()
            .map_err(|e| e.to_string())?;
        let mut browse = OutboxBrowse::default();
        browse.status = status;
        browse.destination = given(&self.destination);
        browse.ordering_key = given(&self.key);
        browse.message_id = given(&self.message_id);
        browse.created_from = since(&self.within)?;
        browse.payload_contains = given(&self.payload).map(str::as_bytes);
        browse.payload_json = json_path(&self.json)?;
        browse.limit = limit;
        Ok(browse)
    }

    /// Whether the retry and discard of "all dead rows that match" can select what the list
    /// selects: they filter by destination, ordering key and message id only, so a search by
    /// age or payload acts on one row at a time instead.
    pub(crate) fn actionable(&self) -> bool {
        [&self.within, &self.payload, &self.json]
            .iter()
            .all(|f| given(f).is_none())
    }

    /// The dead rows a retry or discard selects: these fields, and only `pinned` when given
    /// (the ids a confirmation counted), or the one row of `id`.
    pub(crate) fn dead(&self, pinned: Option<&[i64]>) -> OutboxFilter {
        let mut filter = OutboxFilter::all();
        filter.destination = given(&self.destination).map(str::to_owned);
        filter.ordering_key = given(&self.key).map(str::to_owned);
        filter.message_id = given(&self.message_id).map(str::to_owned);
        filter.ids = match (pinned, self.id) {
            (Some(pinned), _) => pinned.to_vec(),
            (None, Some(id)) => vec![id],
            (None, None) => Vec::new(),
        };
        filter
    }

    fn named(&self) -> [(&str, &str); 7] {
        [
            ("status", &self.status),
            ("destination", &self.destination),
            ("key", &self.key),
            ("message_id", &self.message_id),
            ("within", &self.within),
            ("payload", &self.payload),
            ("json", &self.json),
        ]
    }

    /// In words, for a confirmation: the fields a retry or discard selects by.
    pub(crate) fn describe(&self) -> String {
        if let Some(id) = self.id {
            return format!("outbox row {id}");
        }
        describe(&self.named()[1..4], "every dead outbox row")
    }
}

/// A list's filters, as a query string and as a form's hidden fields: the same fields, read
/// back by the same struct, so that a link and a confirmation select what the list showed.
pub(crate) trait Filters {
    /// Each field's name in the query string, and its value (blank: not given).
    fn fields(&self) -> Vec<(&str, &str)>;

    /// The one row or letter of its page's buttons.
    fn id(&self) -> Option<i64>;

    fn query_string(&self) -> String {
        query_with_id(&self.fields(), self.id())
    }

    fn hidden(&self) -> Markup {
        hidden(&self.fields(), self.id())
    }
}

macro_rules! filters {
    ($($t:ty),*) => {$(
        impl Filters for $t {
            fn fields(&self) -> Vec<(&str, &str)> {
                self.named().to_vec()
            }

            fn id(&self) -> Option<i64> {
                self.id
            }
        }
    )*};
}

filters!(LetterFilters, RowFilters, OutboxFilters);

fn describe(fields: &[(&str, &str)], all: &str) -> String {
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|(name, value)| given(value).map(|v| format!("{name} = {v:?}")))
        .collect();
    if parts.is_empty() {
        all.to_owned()
    } else {
        parts.join(", ")
    }
}

/// `order.id=42` as its path and value; blank: none. Keys are what a JSON object's keys
/// usually are: letters, digits, `_` and `-`.
fn json_path(text: &str) -> Result<Option<(&str, &str)>, String> {
    let Some(text) = given(text) else {
        return Ok(None);
    };
    let bad = || {
        format!(
            "`json` takes path=value, the path's keys (letters, digits, _ and -) joined by \
             dots (order.id=42), not {text:?}"
        )
    };
    let (path, value) = text.split_once('=').ok_or_else(bad)?;
    let path = path.trim();
    let keys_ok = path.split('.').all(|k| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    });
    if !keys_ok {
        return Err(bad());
    }
    Ok(Some((path, value.trim())))
}

/// The time `within` (`2h`, `7d`; blank: none) reaches back to.
fn since(within: &str) -> Result<Option<SystemTime>, String> {
    given(within)
        .map(|w| {
            let within = parse_within(w)?;
            SystemTime::now()
                .checked_sub(within)
                .ok_or_else(|| format!("`within` {w:?} reaches back before any clock"))
        })
        .transpose()
}

/// `90s`, `15m`, `2h`, `7d`; never panics, whatever a query string holds.
fn parse_within(text: &str) -> Result<Duration, String> {
    let bad = || format!("`within` takes a number and s, m, h or d (2h, 7d), not {text:?}");
    let unit = text.chars().last().ok_or_else(bad)?;
    let n: u64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| bad())?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(scale)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_reads_each_unit_and_refuses_others() {
        assert_eq!(parse_within("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_within("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_within("7d"), Ok(Duration::from_secs(604_800)));
        assert!(parse_within("2w").is_err());
        assert!(parse_within("h").is_err());
        assert!(parse_within("").is_err());
        // What a query string can hold must never panic: a multi-byte unit, an overflow.
        assert!(parse_within("é").is_err());
        assert!(parse_within("1é").is_err());
        assert!(parse_within("99999999999999999999d").is_err());
        assert!(parse_within("9999999999999999d").is_err());
        let far = RowFilters {
            within: "199999999999999d".into(),
            ..RowFilters::default()
        };
        assert!(far.received_from().is_err());
    }

    #[test]
    fn json_paths_are_keys_and_dots_and_a_value() {
        assert_eq!(json_path("order.id=42"), Ok(Some(("order.id", "42"))));
        assert_eq!(json_path(" a = x=y "), Ok(Some(("a", "x=y"))));
        assert_eq!(json_path(""), Ok(None));
        for bad in [
            "order.id",
            "order..id=1",
            "=1",
            "a\"b=1",
            "a.b c=1",
            "$.a=1",
        ] {
            assert!(json_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_strings_keep_only_given_fields_escaped() {
        let f = LetterFilters {
            consumer: "a&b".into(),
            reason: " ".into(),
            id: Some(7),
            ..LetterFilters::default()
        };
        assert_eq!(f.query_string(), "consumer=a%26b&id=7");
    }
}
