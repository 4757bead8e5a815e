//! `inboxed stats --metrics-url`: the dedup hit rate, which only counters know (a duplicate
//! writes nothing to the database), read from a running process's Prometheus endpoint: a
//! service's own exporter, or `inboxed relay --metrics-addr`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use inboxed_core::metrics::{MESSAGES_TOTAL, RECEIPTS_TOTAL};

/// How long the endpoint may take to answer.
const WAIT: Duration = Duration::from_secs(5);

/// One consumer's duplicates among what one counter settled, since its process started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DedupRate {
    pub(crate) consumer: String,
    /// `inboxed_messages_total` (a processor) or `inboxed_receipts_total` (receipts, a relay).
    pub(crate) counter: &'static str,
    pub(crate) duplicates: f64,
    /// Duplicates plus first deliveries (`processed`, or `stored` for receipts).
    pub(crate) settled: f64,
}

impl DedupRate {
    /// `duplicates / settled`, or `None` before anything was settled.
    pub(crate) fn rate(&self) -> Option<f64> {
        (self.settled > 0.0).then(|| self.duplicates / self.settled)
    }
}

/// The dedup hit rates in the metrics `url` serves (plain `http://host:port/path`).
pub(crate) async fn dedup_rates(url: &str) -> anyhow::Result<Vec<DedupRate>> {
    let text = tokio::time::timeout(WAIT, get(url))
        .await
        .with_context(|| format!("--metrics-url {url}: no answer within {WAIT:?}"))??;
    Ok(parse(&text))
}

async fn get(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--metrics-url {url}: only http:// is supported"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/"), |(h, p)| (h, p));
    let path = if path == "/" {
        "/".to_owned()
    } else {
        format!("/{path}")
    };
    let mut conn = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("--metrics-url: cannot connect to {host}"))?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        bail!("--metrics-url {url}: HTTP status {status:?}");
    }
    Ok(body.to_owned())
}

/// Sums the samples of the two settling counters by consumer.
fn parse(text: &str) -> Vec<DedupRate> {
    let mut rates: BTreeMap<(&'static str, String), (f64, f64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let (counter, first) = match name {
            MESSAGES_TOTAL => (MESSAGES_TOTAL, "processed"),
            RECEIPTS_TOTAL => (RECEIPTS_TOTAL, "stored"),
            _ => continue,
        };
        let label = |key: &str| {
            labels
                .trim_end_matches('}')
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().trim_matches('"').to_owned())
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
        .map(|((counter, consumer), (duplicates, settled))| DedupRate {
            consumer,
            counter,
            duplicates,
            settled,
        })
        .collect()
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
}
