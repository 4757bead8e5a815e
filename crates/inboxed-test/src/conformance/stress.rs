//! Many workers, many messages, a third of them delivered twice at the same moment.

use std::collections::BTreeMap;

use inboxed_core::{Envelope, Processor};

use super::{ledger, ledger_state};
use crate::backend::Backend;
use crate::handler::{Ledger, credit};

const WORKERS: usize = 8;
const PER_WORKER: usize = 800;

/// 8 workers, 800 messages each, 30% of them also delivered to the neighbouring worker at
/// the same position so the two copies race. The ledger must equal the sum over unique ids.
pub async fn concurrent_stress_ledger_is_exact<B: Backend>(_test: &str) {
    let db = B::create().await;
    let handler = Ledger::<B>::default();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut originals: Vec<Vec<Envelope>> = vec![Vec::new(); WORKERS];
    let mut expected_sum = 0;
    for i in 0..PER_WORKER {
        for (w, list) in originals.iter_mut().enumerate() {
            let amount = rng.i64(1..100);
            expected_sum += amount;
            list.push(credit(&format!("s-{w}-{i}"), amount));
        }
    }
    // Each copy goes into the neighbour's list right beside the neighbour's own message i,
    // so both workers reach the two deliveries at about the same moment.
    let mut planned: Vec<Vec<Envelope>> = vec![Vec::new(); WORKERS];
    let mut copies = 0;
    #[allow(
        clippy::needless_range_loop,
        reason = "`i` addresses two workers' lists at once"
    )]
    for i in 0..PER_WORKER {
        for (w, list) in planned.iter_mut().enumerate() {
            list.push(originals[w][i].clone());
            if rng.f64() < 0.3 {
                list.push(originals[(w + WORKERS - 1) % WORKERS][i].clone());
                copies += 1;
            }
        }
    }
    let mut tasks = Vec::new();
    for list in planned {
        let p = Processor::new(db.store.clone(), ledger(), handler.clone());
        tasks.push(tokio::spawn(async move {
            let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
            for msg in &list {
                let outcome = p.process(msg, Some(1)).await.expect("settles");
                *counts.entry(outcome.as_str()).or_default() += 1;
            }
            counts
        }));
    }
    let mut totals: BTreeMap<&'static str, usize> = BTreeMap::new();
    for t in tasks {
        for (k, v) in t.await.expect("worker") {
            *totals.entry(k).or_default() += v;
        }
    }
    let unique = WORKERS * PER_WORKER;
    assert_eq!(totals.get("processed").copied(), Some(unique), "{totals:?}");
    assert_eq!(totals.get("duplicate").copied(), Some(copies), "{totals:?}");
    assert_eq!(
        handler.calls() as usize,
        unique,
        "no message ran its handler twice"
    );
    assert_eq!(ledger_state(&db).await, (unique as i64, expected_sum));
    assert_eq!(
        db.scalar("SELECT count(*) FROM inboxed_processed_messages")
            .await,
        unique as i64
    );
    db.finish().await;
}
