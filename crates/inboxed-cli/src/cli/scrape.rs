//! `inboxed stats --metrics-url`: the dedup hit rate, which only counters know (a duplicate
//! writes nothing to the database), read from a running process's Prometheus endpoint: a
//! service's own exporter, or `inboxed relay --metrics-addr`.

use std::time::Duration;

use anyhow::{Context, bail};

use inboxed_core::metrics::DedupRate;

use super::prometheus_text::parse;

/// How long the endpoint may take to answer.
const WAIT: Duration = Duration::from_secs(5);

/// The dedup hit rates in the metrics `url` serves (`http://host:port/path`).
pub(crate) async fn dedup_rates(url: &str) -> anyhow::Result<Vec<DedupRate>> {
    Ok(parse(&get(url).await?))
}

/// The body `url` answers with, within [`WAIT`].
async fn get(url: &str) -> anyhow::Result<String> {
    if !url.starts_with("http://") {
        bail!("--metrics-url {url}: only http:// is supported");
    }
    let client = reqwest::Client::builder()
        .timeout(WAIT)
        .build()
        .context("--metrics-url: an HTTP client")?;
    let answer = client.get(url).send().await.map_err(|e| {
        if e.is_timeout() {
            anyhow::anyhow!("--metrics-url {url}: no answer within {WAIT:?}")
        } else {
            anyhow::Error::new(e).context(format!("--metrics-url: cannot read {url}"))
        }
    })?;
    let status = answer.status();
    if !status.is_success() {
        bail!("--metrics-url {url}: HTTP status {}", status.as_u16());
    }
    answer
        .text()
        .await
        .with_context(|| format!("--metrics-url {url}: the body"))
}
