//! The delays before a failed message's next attempt, step by step.

use std::time::Duration;

/// The delays before a failed message's next attempt, by the attempt that failed: step 1 after
/// the first, step 2 after the second, the last step for every later one.
///
/// A ladder rather than a doubling: a downstream service that is down for minutes should not
/// use up a message's attempts in seconds, and an operator reading the settings should be able
/// to say when a message will be dead-lettered. The default, 1 s, 10 s, 1 min, 5 min, 15 min,
/// gives a message failing on its own about six and a half minutes (five attempts) before it is
/// dead-lettered; an outage is forgiven by the kill switch and uses up nothing.
///
/// Each delay is its step plus up to a quarter more, at random, so that messages that failed
/// together do not come back together. It never falls below the step: a broker that can only
/// delay by fixed steps (RabbitMQ's delay queues) rounds it down to exactly that step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ladder {
    steps: Vec<Duration>,
}

impl Default for Ladder {
    /// 1 s, 10 s, 1 min, 5 min, 15 min.
    fn default() -> Self {
        Self::new([1, 10, 60, 300, 900].map(Duration::from_secs))
    }
}

impl Ladder {
    /// A ladder of these steps, in the order given (an empty one retries at once).
    #[must_use]
    pub fn new(steps: impl IntoIterator<Item = Duration>) -> Self {
        Self {
            steps: steps.into_iter().collect(),
        }
    }

    /// One delay for every retry: for tests, and for a store that must not wait.
    #[must_use]
    pub fn constant(delay: Duration) -> Self {
        Self::new([delay])
    }

    /// The steps, without jitter.
    #[must_use]
    pub fn steps(&self) -> &[Duration] {
        &self.steps
    }

    /// The step after attempt `attempt` (1-based) failed, without jitter.
    #[must_use]
    pub fn step(&self, attempt: u32) -> Duration {
        let index = usize::try_from(attempt.max(1) - 1).unwrap_or(usize::MAX);
        self.steps
            .get(index)
            .or(self.steps.last())
            .copied()
            .unwrap_or_default()
    }

    /// The delay after attempt `attempt` failed: its step plus up to a quarter more.
    #[must_use]
    pub fn delay(&self, attempt: u32) -> Duration {
        let step = self.step(attempt);
        step + step.mul_f64(fastrand::f64() / 4.0)
    }

    /// The delay for a failure that is nobody's attempt (the database is down) during an
    /// outage that has lasted `outage`: uniform in `[0, outage]`, kept between the first step
    /// and the last, so that retries thin out as the outage goes on.
    #[must_use]
    pub fn after_outage(&self, outage: Duration) -> Duration {
        let first = self.step(1);
        let last = self.steps.last().copied().unwrap_or_default().max(first);
        outage.clamp(first, last).mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_attempt_has_its_step_and_the_last_step_holds() {
        let ladder = Ladder::default();
        let secs = |n| ladder.step(n).as_secs();
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 6, 99].map(secs),
            [1, 1, 10, 60, 300, 900, 900, 900]
        );
        for attempt in 1..8 {
            let step = ladder.step(attempt);
            for _ in 0..50 {
                let delay = ladder.delay(attempt);
                assert!(delay >= step && delay <= step + step / 4, "{delay:?}");
            }
        }
        assert_eq!(Ladder::new([]).delay(3), Duration::ZERO);
        assert_eq!(Ladder::constant(Duration::ZERO).delay(3), Duration::ZERO);
    }

    #[test]
    fn an_outage_waits_within_the_first_and_last_steps() {
        let ladder = Ladder::new([Duration::from_millis(100), Duration::from_secs(1)]);
        for _ in 0..100 {
            assert!(ladder.after_outage(Duration::from_secs(60)) <= Duration::from_secs(1));
            assert!(ladder.after_outage(Duration::ZERO) <= Duration::from_millis(100));
        }
        assert_eq!(
            Ladder::new([]).after_outage(Duration::from_secs(9)),
            Duration::ZERO
        );
    }
}
