//! The rule's parts, in process: suspects, scopes, groups and waits.
use std::time::Duration;

use super::{CrashAttribution, Seen, Turn};
use crate::envelope::{ConsumerName, MessageId};
use crate::store::KeyParams;

fn key<'a>(consumer: &'a ConsumerName, id: &'a MessageId) -> KeyParams<'a> {
    KeyParams {
        consumer,
        message_id: id,
    }
}

#[test]
fn a_retry_after_a_failure_seen_here_is_not_a_suspect() {
    let scope = CrashAttribution::new();
    let (c, other) = (
        ConsumerName::new("c").unwrap(),
        ConsumerName::new("d").unwrap(),
    );
    let a = MessageId::new("a").unwrap();
    assert!(!scope.is_suspect(&key(&c, &a), 1), "a first attempt");
    assert!(
        scope.is_suspect(&key(&c, &a), 2),
        "nothing seen: a crash may have come first"
    );
    scope.failed(&key(&c, &a), 1);
    assert!(
        !scope.is_suspect(&key(&c, &a), 2),
        "the attempt after the one seen to fail"
    );
    assert!(
        scope.is_suspect(&key(&c, &a), 3),
        "another attempt came between"
    );
    assert!(
        scope.is_suspect(&key(&other, &a), 2),
        "another consumer's key"
    );
    for i in 0..Seen::KEPT {
        scope.failed(&key(&c, &MessageId::new(format!("k{i}")).unwrap()), 1);
    }
    assert!(
        scope.is_suspect(&key(&c, &a), 2),
        "forgotten past the bound"
    );
    let elsewhere = CrashAttribution::new();
    elsewhere.failed(&key(&c, &a), 1);
    assert!(
        scope.is_suspect(&key(&c, &a), 2) && !elsewhere.is_suspect(&key(&c, &a), 2),
        "each scope sees its own"
    );
}

#[test]
fn a_copy_beside_one_running_here_is_not_a_suspect() {
    let scope = CrashAttribution::new();
    let (c, b) = (
        ConsumerName::new("c").unwrap(),
        MessageId::new("b").unwrap(),
    );
    let first = scope.running(&key(&c, &b));
    let second = scope.running(&key(&c, &b));
    assert!(
        !scope.is_suspect(&key(&c, &b), 2),
        "its earlier attempt is running here"
    );
    drop(first);
    assert!(scope.is_suspect(&key(&c, &b), 2), "alone again");
    drop(second);
}

#[test]
fn past_the_window_or_off_nothing_is_a_suspect() {
    let (c, b) = (
        ConsumerName::new("c").unwrap(),
        MessageId::new("b").unwrap(),
    );
    let none = CrashAttribution::window(Duration::ZERO);
    none.start();
    assert!(!none.is_suspect(&key(&c, &b), 2));
    let off = CrashAttribution::off();
    off.start();
    assert!(!off.is_suspect(&key(&c, &b), 2));
    assert!(off.running(&key(&c, &b)).is_none());
}

#[tokio::test]
async fn a_suspect_waits_for_its_scope_only() {
    let (scope, other) = (CrashAttribution::new(), CrashAttribution::new());
    let running = scope.shared().await;
    let wait = Duration::from_millis(50);
    assert!(
        other
            .alone(other.waiting("delivery", 1), wait)
            .await
            .is_group(),
        "another scope's work is not waited for"
    );
    assert!(
        scope
            .alone(scope.waiting("delivery", 1), wait)
            .await
            .is_shared(),
        "its own is, up to the limit"
    );
    let waiter = tokio::spawn({
        let scope = scope.clone();
        async move {
            scope
                .alone(scope.waiting("delivery", 1), Duration::from_secs(5))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(scope.suspects_waiting(), 1, "a clone is the same scope");
    drop(running);
    assert!(waiter.await.unwrap().is_group());
    assert_eq!(scope.suspects_waiting(), 0);
    let off = CrashAttribution::off();
    assert!(matches!(
        off.alone(off.waiting("delivery", 1), wait).await,
        Turn::Untracked
    ));
    assert!(matches!(off.shared().await, Turn::Untracked));
}

#[tokio::test]
async fn suspects_run_in_groups_no_larger_than_the_smallest_limit_among_them() {
    let scope = CrashAttribution::new();
    let long = Duration::from_secs(5);
    let suspect = |limit: usize| {
        let scope = scope.clone();
        tokio::spawn(async move { scope.alone(scope.waiting("delivery", limit), long).await })
    };
    let running = scope.shared().await;
    let (first, second) = (suspect(4), suspect(2));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(scope.suspects_waiting(), 2);
    drop(running);
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert!(
        first.is_together() && second.is_together(),
        "two waiting suspects run together"
    );
    let (third, ordinary) = (
        suspect(4),
        tokio::spawn({
            let scope = scope.clone();
            async move { scope.shared().await }
        }),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !third.is_finished(),
        "a third is one too many for the second's limit"
    );
    assert!(
        !ordinary.is_finished(),
        "nothing but suspects runs beside a group"
    );
    drop((first, second));
    let third = third.await.unwrap();
    assert!(
        third.is_group() && !third.is_together(),
        "a suspect that finds no other waiting runs alone"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!ordinary.is_finished());
    drop(third);
    assert!(ordinary.await.unwrap().is_shared());
    assert_eq!(CrashAttribution::group_limit(0), 8);
    assert_eq!(CrashAttribution::group_limit(2), 2);
    assert_eq!(CrashAttribution::group_limit(3), 1);
    assert_eq!(CrashAttribution::group_limit(40), 1);
}

#[tokio::test]
async fn a_wait_cut_short_is_no_longer_counted_and_a_group_admits_until_one_leaves() {
    let scope = CrashAttribution::new();
    let running = scope.shared().await;
    let cut = tokio::spawn({
        let scope = scope.clone();
        async move {
            let waiting = scope.waiting("delivery", 8);
            scope.alone(waiting, Duration::from_secs(5)).await
        }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(scope.suspects_waiting(), 1);
    cut.abort();
    let _ = cut.await;
    assert_eq!(scope.suspects_waiting(), 0, "the wait was dropped");
    drop(running);
    let wait = Duration::from_millis(30);
    let (first, second) = (scope.waiting("delivery", 8), scope.waiting("delivery", 8));
    let first = scope.alone(first, wait).await;
    let second = scope.alone(second, wait).await;
    assert!(first.is_together() && second.is_together());
    drop(first);
    let late = tokio::spawn({
        let scope = scope.clone();
        async move {
            scope
                .alone(scope.waiting("delivery", 8), Duration::from_secs(5))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !late.is_finished(),
        "one has left: the group takes no one more"
    );
    drop(second);
    assert!(late.await.unwrap().is_group());
}
