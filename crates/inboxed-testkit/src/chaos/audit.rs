//! The user's audit: each message id with its number of effects, read within a bound, and the
//! verdict drawn from it.

use std::collections::HashMap;
use std::future::Future;

use inboxed_core::BoxError;

use super::{ChaosReport, LIMIT};

/// The audit's rows, or what it failed with.
pub(super) async fn read<A, AF, AE>(audit: &A) -> Result<Vec<(String, i64)>, String>
where
    A: Fn() -> AF,
    AF: Future<Output = Result<Vec<(String, i64)>, AE>>,
    AE: Into<BoxError>,
{
    match tokio::time::timeout(LIMIT, audit()).await {
        Ok(counts) => counts.map_err(|e| format!("the audit failed: {}", e.into())),
        Err(_) => Err(format!("the audit gave no answer in {} s", LIMIT.as_secs())),
    }
}

/// Every effect the audit counts, of any id.
pub(super) fn total(counts: &[(String, i64)]) -> i64 {
    counts.iter().map(|(_, n)| n).sum()
}

/// Fills the report's `lost` and `doubled` from the audit's counts of the storm's `ids`.
pub(super) fn verdict(ids: &[String], counts: &[(String, i64)], report: &mut ChaosReport) {
    let mut effects: HashMap<&str, i64> = HashMap::new();
    for (id, n) in counts {
        *effects.entry(id.as_str()).or_default() += n;
    }
    report.lost = ids
        .iter()
        .filter(|id| effects.get(id.as_str()).copied().unwrap_or(0) == 0)
        .cloned()
        .collect();
    report.doubled = ids
        .iter()
        .filter_map(|id| {
            let n = effects.get(id.as_str()).copied().unwrap_or(0);
            (n > 1).then(|| (id.clone(), n))
        })
        .collect();
}

/// Moves the report's lost messages that `letters` (id and reason) holds to `dead_lettered`.
pub(super) fn sort_dead_lettered(letters: &[(String, String)], report: &mut ChaosReport) {
    let reasons: HashMap<&str, &str> = letters
        .iter()
        .map(|(id, reason)| (id.as_str(), reason.as_str()))
        .collect();
    let (dead, lost): (Vec<String>, Vec<String>) = std::mem::take(&mut report.lost)
        .into_iter()
        .partition(|id| reasons.contains_key(id.as_str()));
    report.lost = lost;
    report.dead_lettered = dead
        .into_iter()
        .map(|id| {
            let reason = reasons[id.as_str()].to_owned();
            (id, reason)
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_names_lost_and_doubled_messages() {
        let ids: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let counts = vec![
            ("a".to_owned(), 1),
            ("c".to_owned(), 1),
            ("c".to_owned(), 1),
            ("other".to_owned(), 5),
        ];
        let mut report = ChaosReport::default();
        verdict(&ids, &counts, &mut report);
        assert_eq!(report.lost, ["b"]);
        assert_eq!(report.doubled, [("c".to_owned(), 2)]);
        assert!(!report.exact());
    }

    #[test]
    fn a_message_without_an_effect_and_with_a_dead_letter_is_not_lost() {
        let mut report = ChaosReport {
            lost: vec!["a".to_owned(), "b".to_owned()],
            ..ChaosReport::default()
        };
        let letters = [
            ("b".to_owned(), "attempts_exhausted".to_owned()),
            ("other".to_owned(), "permanent".to_owned()),
        ];
        sort_dead_lettered(&letters, &mut report);
        assert_eq!(report.lost, ["a"]);
        assert_eq!(
            report.dead_lettered,
            [("b".to_owned(), "attempts_exhausted".to_owned())]
        );
        assert!(!report.exact());
        assert!(report.to_string().contains("dead-lettered"), "{report}");
    }
}
