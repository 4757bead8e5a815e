use std::time::Duration;

use super::{Judged, KillSwitch};
use crate::envelope::{ConsumerName, MessageId};

fn key(i: usize) -> (ConsumerName, MessageId) {
    (
        ConsumerName::new("c").unwrap(),
        MessageId::new(format!("m-{i}")).unwrap(),
    )
}

fn fail(switch: &KillSwitch, i: usize) -> Judged {
    let (c, m) = key(i);
    switch.failed(&c, &m, true)
}

fn charged(judged: &Judged) -> bool {
    matches!(judged, Judged::Charged { .. })
}

#[tokio::test(start_paused = true)]
async fn opens_at_the_failures_of_its_window_and_forgives_them() {
    let switch = KillSwitch::new().trip_at(3, 5);
    switch.succeeded();
    assert!(charged(&fail(&switch, 1)));
    switch.succeeded();
    assert!(charged(&fail(&switch, 2)));
    assert!(!switch.is_open());
    assert_eq!(
        fail(&switch, 3),
        Judged::Forgiven(vec![key(1), key(2), key(3)]),
        "the failures that opened it are forgiven with it"
    );
    assert!(switch.is_open());
    assert_eq!(fail(&switch, 4), Judged::Forgiven(vec![key(4)]));
    switch.succeeded();
    assert!(
        switch.is_open(),
        "a delivery let through before it opened does not close it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_among_successes_is_charged() {
    let switch = KillSwitch::new().trip_at(3, 5);
    for i in 0..20 {
        assert!(charged(&fail(&switch, i)), "failure {i}");
        for _ in 0..3 {
            switch.succeeded();
        }
    }
    assert!(!switch.is_open());
}

#[tokio::test(start_paused = true)]
async fn a_switch_that_is_off_never_opens() {
    let switch = KillSwitch::off().trip_at(1, 1);
    for i in 0..5 {
        assert!(charged(&fail(&switch, i)));
    }
    assert!(!switch.is_open());
}

#[tokio::test(start_paused = true)]
async fn one_probe_after_the_pause_closes_it_for_every_waiter() {
    let switch = KillSwitch::new()
        .trip_at(1, 1)
        .pause(Duration::from_secs(5), Duration::from_secs(60));
    let _ = fail(&switch, 0);
    let start = tokio::time::Instant::now();
    switch.admit().await;
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(5),
        "the probe goes after the pause"
    );
    let waiter = tokio::spawn({
        let switch = switch.clone();
        async move {
            switch.admit().await;
            tokio::time::Instant::now()
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!waiter.is_finished(), "the others wait for the probe");
    switch.succeeded();
    let admitted = waiter.await.unwrap();
    assert_eq!(admitted - start, Duration::from_secs(7));
    assert!(!switch.is_open());
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_doubles_the_pause_up_to_its_bound() {
    let switch = KillSwitch::new()
        .trip_at(1, 1)
        .pause(Duration::from_secs(5), Duration::from_secs(15));
    let _ = fail(&switch, 0);
    let mut waited = Vec::new();
    for i in 1..=4 {
        let start = tokio::time::Instant::now();
        switch.admit().await;
        waited.push(start.elapsed().as_secs());
        assert_eq!(fail(&switch, i), Judged::Forgiven(vec![key(i)]));
    }
    assert_eq!(waited, [5, 10, 15, 15]);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_never_comes_back_is_replaced() {
    let switch = KillSwitch::new()
        .trip_at(1, 1)
        .pause(Duration::from_secs(5), Duration::from_secs(60));
    let _ = fail(&switch, 0);
    switch.admit().await;
    let start = tokio::time::Instant::now();
    switch.admit().await;
    assert_eq!(
        start.elapsed(),
        super::PROBE_WAIT,
        "a second probe goes once the first is overdue"
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_told_nothing_lets_the_next_one_go_at_once() {
    let switch = KillSwitch::new()
        .trip_at(1, 1)
        .pause(Duration::from_secs(5), Duration::from_secs(60));
    let _ = fail(&switch, 0);
    assert!(switch.admit().await, "the first through is the probe");
    switch.probe_ended();
    let start = tokio::time::Instant::now();
    assert!(switch.admit().await, "the next one probes");
    assert_eq!(start.elapsed(), Duration::ZERO);
    switch.succeeded();
    switch.probe_ended();
    assert!(!switch.admit().await, "closed: no probe");
}

#[tokio::test(start_paused = true)]
async fn one_message_failing_again_and_again_never_opens_it() {
    let switch = KillSwitch::new().trip_at(3, 5);
    for _ in 0..10 {
        assert!(charged(&fail(&switch, 7)));
    }
    assert!(
        !switch.is_open(),
        "its own failures use up its own attempts"
    );
    assert!(charged(&fail(&switch, 8)));
    assert_eq!(
        fail(&switch, 9),
        Judged::Forgiven(vec![key(7), key(7), key(7), key(8), key(9)]),
        "each failure in the window is forgiven, one attempt each"
    );
}

#[tokio::test(start_paused = true)]
async fn half_the_failures_that_open_it_raise_a_doubt() {
    let switch = KillSwitch::new().trip_at(4, 8);
    assert_eq!(fail(&switch, 1), Judged::Charged { doubt: false });
    assert_eq!(
        fail(&switch, 2),
        Judged::Charged { doubt: true },
        "an outage may be starting: a last attempt is not dead-lettered yet"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_charged_nothing_opens_it_and_is_not_forgiven() {
    let switch = KillSwitch::new().trip_at(2, 4);
    let (c, m) = key(1);
    assert!(charged(&switch.failed(&c, &m, false)));
    assert_eq!(
        fail(&switch, 2),
        Judged::Forgiven(vec![key(2)]),
        "only what was charged is forgiven"
    );
    let (c, m) = key(3);
    assert_eq!(switch.failed(&c, &m, false), Judged::Forgiven(vec![]));
}

#[tokio::test(start_paused = true)]
async fn without_a_caller_in_admit_the_first_outcome_after_the_pause_probes() {
    let switch = KillSwitch::new()
        .trip_at(1, 1)
        .pause(Duration::from_secs(5), Duration::from_secs(60));
    let _ = fail(&switch, 0);
    switch.succeeded();
    assert!(
        switch.is_open(),
        "within the pause a success is not a probe"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(fail(&switch, 1), Judged::Forgiven(vec![key(1)]));
    tokio::time::sleep(Duration::from_secs(9)).await;
    switch.succeeded();
    assert!(
        switch.is_open(),
        "the failed probe doubled the pause to 10 s"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    switch.succeeded();
    assert!(!switch.is_open(), "a success after the pause closes it");
}
