//! The Prometheus text format as `inboxed stats --metrics-url` reads it: the two settling
//! counters' samples summed into a dedup hit rate per consumer. Self-contained (the fuzz target
//! `prometheus_text` includes this file as it is): no maintained Rust parser of the format
//! both undoes label escapes and keeps a label value's `,` and `=` inside it.

use std::collections::BTreeMap;

use inboxed_core::metrics::DedupRate;
use inboxed_core::metrics::{MESSAGES_TOTAL, RECEIPTS_TOTAL};

/// Sums the samples of the two settling counters by consumer.
pub(crate) fn parse(text: &str) -> Vec<DedupRate> {
    let mut rates: BTreeMap<(&'static str, String), (f64, f64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, labels, value)) = sample(line) else {
            continue;
        };
        let (counter, first) = match name {
            MESSAGES_TOTAL => (MESSAGES_TOTAL, "processed"),
            RECEIPTS_TOTAL => (RECEIPTS_TOTAL, "stored"),
            _ => continue,
        };
        let label = |key: &str| {
            labels
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let (Some(consumer), Some(outcome)) = (label("consumer"), label("outcome")) else {
            continue;
        };
        let entry = rates.entry((counter, consumer)).or_default();
        if outcome == "duplicate" {
            entry.0 += value;
            entry.1 += value;
        } else if outcome == first {
            entry.1 += value;
        }
    }
    rates
        .into_iter()
        .map(|((counter, consumer), (duplicates, settled))| {
            DedupRate::new(consumer, counter, duplicates, settled)
        })
        .collect()
}

/// A sample's labels, in order.
type Labels = Vec<(String, String)>;

/// One sample of the text format: `name{label="value",…} value [timestamp]`, label values
/// with their escapes (`\\`, `\"`, `\n`) undone.
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim();
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let (name, mut rest) = line.split_at(name_end);
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        let mut chars = inside.char_indices();
        let mut key = String::new();
        let end = loop {
            let (at, c) = chars.next()?;
            match c {
                '}' => break at + 1,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        };
        rest = &inside[end..];
    }
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    // A counter is finite and never negative; any other value (`NaN`, `-4`, `+Inf`) would
    // make the rate meaningless, beyond 100% or NaN (found by the `prometheus_text` fuzz
    // target's rate check).
    (value.is_finite() && value >= 0.0).then_some((name, labels, value))
}

#[cfg(test)]
mod tests {
    #[test]
    fn duplicates_over_first_deliveries_per_consumer_and_counter() {
        let text = "# TYPE inboxed_receipts_total counter\n\
            inboxed_receipts_total{consumer=\"billing\",outcome=\"stored\"} 7\n\
            inboxed_receipts_total{outcome=\"duplicate\",consumer=\"billing\"} 3\n\
            inboxed_receipts_total{consumer=\"billing\",outcome=\"invalid\"} 1\n\
            inboxed_messages_total{consumer=\"ledger\",outcome=\"processed\"} 0\n\
            inboxed_rows_total{consumer=\"billing\",outcome=\"done\"} 9\n";
        let rates = super::parse(text);
        assert_eq!(rates.len(), 2, "{rates:?}");
        let billing = rates.iter().find(|r| r.consumer == "billing").unwrap();
        assert_eq!((billing.duplicates, billing.settled), (3.0, 10.0));
        assert_eq!(billing.rate(), Some(0.3));
        let ledger = rates.iter().find(|r| r.consumer == "ledger").unwrap();
        assert_eq!(ledger.rate(), None, "nothing settled yet");
    }

    #[test]
    fn values_no_counter_can_have_are_left_out() {
        let text = "inboxed_messages_total{consumer=\"a\",outcome=\"duplicate\"} 5\n\
            inboxed_messages_total{consumer=\"a\",outcome=\"processed\"} -4\n\
            inboxed_messages_total{consumer=\"a\",outcome=\"processed\"} NaN\n\
            inboxed_messages_total{consumer=\"a\",outcome=\"processed\"} +Inf\n\
            inboxed_messages_total{consumer=\"a\",outcome=\"processed\"} 15\n";
        let rates = super::parse(text);
        assert_eq!(rates[0].rate(), Some(0.25), "{rates:?}");
    }

    #[test]
    fn samples_with_timestamps_and_escaped_labels_are_read() {
        let text = "inboxed_messages_total{consumer=\"a\",outcome=\"duplicate\",\
            note=\"x,consumer=\\\"b\\\"\"} 2 1700000000000\n\
            inboxed_messages_total{outcome=\"processed\", consumer=\"a\"} 6\n\
            inboxed_messages_total{consumer=\"a\",outcome=\"broken 1\n";
        let rates = super::parse(text);
        assert_eq!(rates.len(), 1, "{rates:?}");
        assert_eq!(rates[0].consumer, "a");
        assert_eq!((rates[0].duplicates, rates[0].settled), (2.0, 8.0));
    }
}
