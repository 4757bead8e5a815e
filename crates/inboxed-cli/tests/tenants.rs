//! `inboxed stats` across a database per tenant: `--tenant NAME=URL` for each, the report made
//! for each under its name (and in JSON under `tenants`).

use crate::common;

use inboxed_core::{ConsumerName, Processor};
use inboxed_test::{Backend, Ledger, Pg, TestDb};

use common::{inboxed, inboxed_with};

/// `n` keyless deliveries of `consumer` dead-lettered in `db`.
async fn dead_letters(db: &TestDb<Pg>, consumer: &str, n: usize) {
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new(consumer).unwrap(),
        Ledger::<Pg>::default(),
    );
    for _ in 0..n {
        processor
            .dead_letter_invalid(b"{}", &inboxed_core::EnvelopeError::MissingId)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn stats_reports_each_tenants_database_under_its_name() {
    let (a, b) = (Pg::create().await, Pg::create().await);
    dead_letters(&a, "billing", 1).await;
    dead_letters(&b, "shipping", 2).await;
    let tenants = [
        "stats",
        "--tenant",
        &format!("a={}", a.locator),
        "--tenant",
        &format!("b={}", b.locator),
    ];
    let (code, out) = inboxed(&tenants);
    assert_eq!(code, 0, "{out}");
    let (first, second) = out.split_once("== tenant b").expect("a section for b");
    assert!(
        first.contains("== tenant a") && first.contains("billing"),
        "{out}"
    );
    assert!(
        !first.contains("shipping") && second.contains("shipping"),
        "{out}"
    );

    let (code, out) = inboxed(&[&tenants[..], &["--json"]].concat());
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let count = |tenant: &str| report["tenants"][tenant]["dead_letters"][0]["count"].as_i64();
    assert_eq!((count("a"), count("b")), (Some(1), Some(2)), "{out}");

    let (code, out) = inboxed_with(&[], &["stats", "--tenant", "a"]);
    assert_ne!(code, 0);
    assert!(out.contains("--tenant takes NAME=URL"), "{out}");
    a.finish().await;
    b.finish().await;
}
