//! The producer's side of a storm: when each message is published (and published again, a
//! producer's retry), and the publishing itself.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use inboxed_core::BoxError;

use super::{ChaosConfig, ChaosReport, LIMIT};

/// When each publish happens, as an offset into the storm, with the message's number: every
/// message once, evenly spread, and a share of them again at a random later point.
pub(super) fn publish_plan(
    config: &ChaosConfig,
    rng: &mut fastrand::Rng,
    report: &mut ChaosReport,
) -> Vec<(Duration, usize)> {
    let step = config
        .storm
        .checked_div(u32::try_from(config.messages.max(1)).unwrap_or(u32::MAX))
        .unwrap_or_default();
    let mut plan = Vec::new();
    for n in 0..config.messages {
        let at = step * u32::try_from(n).unwrap_or(u32::MAX);
        plan.push((at, n));
        if rng.f64() < config.producer_retries {
            let later = at + config.storm.saturating_sub(at).mul_f64(rng.f64());
            plan.push((later, n));
            report.republished += 1;
        }
    }
    plan.sort();
    plan
}

/// The producer: each publish of `plan` at its time, tried again after an error (up to 50
/// times, 100 ms apart: a broker that refuses that long is not a storm's doing).
pub(super) async fn produce<P, PF, PE>(
    plan: Vec<(Duration, usize)>,
    ids: &[String],
    publish: &P,
    errors: &AtomicUsize,
    started: Instant,
) -> Result<(), String>
where
    P: Fn(String, u64) -> PF,
    PF: Future<Output = Result<(), PE>>,
    PE: Into<BoxError>,
{
    const TRIES: usize = 50;
    for (at, n) in plan {
        tokio::time::sleep_until((started + at).into()).await;
        let mut tries = 0;
        loop {
            let published: Result<(), BoxError> =
                match tokio::time::timeout(LIMIT, publish(ids[n].clone(), n as u64)).await {
                    Ok(published) => published.map_err(Into::into),
                    Err(_) => Err(format!("no answer in {} s", LIMIT.as_secs()).into()),
                };
            match published {
                Ok(()) => break,
                Err(_) if tries + 1 < TRIES => {
                    tries += 1;
                    errors.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    return Err(format!("publishing {} failed {TRIES} times: {e}", ids[n]));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_publishes_every_message_and_retries_later() {
        let config = ChaosConfig {
            messages: 100,
            producer_retries: 0.5,
            seed: 7,
            ..ChaosConfig::default()
        };
        let mut report = ChaosReport::default();
        let plan = publish_plan(&config, &mut fastrand::Rng::with_seed(7), &mut report);
        assert_eq!(plan.len(), 100 + report.republished);
        assert!(report.republished > 20, "{}", report.republished);
        for n in 0..100 {
            let times: Vec<Duration> = plan.iter().filter(|p| p.1 == n).map(|p| p.0).collect();
            assert!(!times.is_empty() && times.len() <= 2);
            assert!(times.iter().all(|t| *t <= config.storm));
        }
        assert!(plan.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    }
}
