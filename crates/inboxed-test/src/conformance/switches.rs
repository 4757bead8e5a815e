//! An open kill switch is recorded in the store while it is open, for `inboxed stats` and the
//! console, and its row goes when it closes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use inboxed_core::observe::ObserveStore;
use inboxed_core::{Consumer, ConsumerConfig, KillSwitch, ProcessorConfig};

use super::consumer::{Log, Memory, Source};
use super::{ledger_state, processor};
use crate::backend::Backend;
use crate::handler::{Script, credit};

/// Two messages failing transiently open a switch (2 of 2, a pause of 1.5 s): while it is
/// open the store shows it for consumer `ledger` (one switch, since when, the next probe); the
/// probe after the pause succeeds, the switch closes, and its row is gone while the run goes on.
pub async fn an_open_kill_switch_is_recorded_until_it_closes<B: Backend>(_test: &str) {
    let db = B::create().await;
    let pause = Duration::from_millis(1_500);
    let switch = KillSwitch::new().trip_at(2, 2).pause(pause, pause);
    let (p, _) = processor(&db, ProcessorConfig::default().kill_switch(switch));
    let log: Log = Arc::default();
    let transient = Script {
        fail: Some("transient".into()),
        ..Script::default()
    };
    // After the probe, two slow messages keep the run going: the row must go at the close,
    // not only when the run ends.
    let slow = Script {
        sleep_ms: 500,
        ..Script::default()
    };
    let messages = [
        ("f-1", transient.message("f-1")),
        ("f-2", transient.message("f-2")),
        ("ok-1", credit("ok-1", 1)),
        ("slow-1", slow.message("slow-1")),
        ("slow-2", slow.message("slow-2")),
    ];
    let queue: VecDeque<Memory<B>> = messages
        .iter()
        .map(|(id, envelope)| Memory::<B> {
            id: (*id).to_owned(),
            payload: envelope.payload().to_vec(),
            store: db.store.clone(),
            log: log.clone(),
            in_order: false,
        })
        .collect();
    let consumer = Consumer::new(p, ConsumerConfig::default().concurrency(1));
    let done = AtomicBool::new(false);
    let running = async {
        let ran = consumer
            .run(Source(queue), std::future::pending::<()>())
            .await;
        done.store(true, Ordering::SeqCst);
        ran
    };
    let watching = async {
        let (mut seen, mut closed_while_running) = (Vec::new(), false);
        while !done.load(Ordering::SeqCst) {
            let observed = db.store.observe().await.expect("observe");
            let running = !done.load(Ordering::SeqCst);
            closed_while_running |= running && !seen.is_empty() && observed.switches.is_empty();
            seen.extend(observed.switches);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (seen, closed_while_running)
    };
    let (ran, (seen, closed_while_running)) = tokio::join!(running, watching);
    ran.expect("run");
    assert!(closed_while_running, "the row went only when the run ended");
    let first = seen.first().expect("the open switch was never recorded");
    assert_eq!(
        (first.consumer.as_str(), first.open),
        ("ledger", 1),
        "{seen:?}"
    );
    let (opened, next) = (
        first.opened_at.expect("opened"),
        first.next_probe.expect("probe"),
    );
    let ahead = next
        .duration_since(opened)
        .expect("the probe after the opening");
    assert!(ahead >= pause && ahead < pause * 2, "{ahead:?}");
    assert!(
        db.store
            .observe()
            .await
            .expect("observe")
            .switches
            .is_empty()
    );
    // The probe went through: the switch closed on its success.
    let acked: Vec<String> = log
        .lock()
        .expect("log")
        .iter()
        .filter(|(_, what, _)| *what == "ack")
        .map(|(id, _, _)| id.clone())
        .collect();
    assert_eq!(acked, ["ok-1", "slow-1", "slow-2"]);
    assert_eq!(ledger_state(&db).await, (3, 3));
    db.finish().await;
}
