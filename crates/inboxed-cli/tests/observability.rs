//! The operator's artefacts stay in step with the code: every metric the library and the CLI
//! define is documented in docs/metrics.md, and the alert rules and the dashboard use only
//! documented metrics (so a renamed metric cannot silently blind an alert).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every `inboxed_…` metric name in `text` (recording rules, written `inboxed:…`, excluded).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("inboxed_") {
        let before = rest[..at].chars().last();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        // A name, not the middle of a longer identifier or a path.
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/' || c == '-') {
            names.insert(tail[..end].trim_end_matches('_').to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The metrics a file defines as string constants: `"inboxed_…"` literals.
fn defined(text: &str) -> BTreeSet<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.starts_with("inboxed_") && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_metric_is_documented_and_alerts_use_only_those() {
    let documented = metric_names(&read("docs/metrics.md"));
    let mut defined_names = defined(&read("crates/inboxed-core/src/metrics.rs"));
    defined_names.extend(defined(&read("crates/inboxed-cli/src/cli/serve/gauges.rs")));
    assert!(defined_names.len() > 20, "{defined_names:?}");
    let undocumented: Vec<_> = defined_names.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/metrics.md: {undocumented:?}"
    );

    // Histograms are exported with _bucket/_sum/_count or quantile series: strip those.
    let base = |n: &String| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .fold(n.clone(), |n, s| {
                n.strip_suffix(s).map_or(n.clone(), str::to_owned)
            })
    };
    for file in [
        "deploy/prometheus/alerts.yml",
        "deploy/grafana/inboxed.json",
    ] {
        let used: BTreeSet<String> = metric_names(&read(file)).iter().map(base).collect();
        assert!(!used.is_empty(), "{file} uses no metric");
        let unknown: Vec<_> = used.difference(&defined_names).collect();
        assert!(
            unknown.is_empty(),
            "{file} uses metrics nobody emits: {unknown:?}"
        );
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/inboxed.json")).expect("valid JSON");
    assert!(
        dashboard["panels"]
            .as_array()
            .is_some_and(|p| p.len() >= 10)
    );
}
