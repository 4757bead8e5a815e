//! What a failed check reports: the property that broke, the state one delivery leaves beside
//! the state the check left, and what usually causes that difference.

use std::fmt;

/// One check that failed. Its `Display` is the message a test prints.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckFailure {
    /// The check's name, as its method is named (`crash_before_commit`, …).
    pub check: &'static str,
    /// What should have held, in a sentence.
    pub property: String,
    /// The probe's value after what the property compares against (one delivery, or none),
    /// in `{:?}` form; empty when the check failed before it probed.
    pub expected: String,
    /// The probe's value after the check, in `{:?}` form; or what went wrong instead.
    pub actual: String,
    /// The usual causes of this failure in a handler.
    pub hint: &'static str,
}

impl CheckFailure {
    /// A failure of `check` that is not a difference of state: the probe, the reset or a
    /// delivery itself failed (`what`).
    pub(crate) fn broken(check: &'static str, what: impl fmt::Display) -> Self {
        Self {
            check,
            property: "the check could run".to_owned(),
            expected: String::new(),
            actual: what.to_string(),
            hint: "the reset, the probe, or the store failed: see the error",
        }
    }
}

impl CheckFailure {
    /// A delivery of `check` that settled as `found` where `property` wants `expected`.
    pub(crate) fn outcome(
        check: &'static str,
        property: &str,
        expected: &str,
        found: &inboxed_core::Outcome,
        hint: &'static str,
    ) -> Self {
        Self {
            check,
            property: property.to_owned(),
            expected: expected.to_owned(),
            actual: format!("{found:?}"),
            hint,
        }
    }
}

impl CheckFailure {
    /// `Ok` when a delivery of `check` settled as `Processed`, as `property` wants; else the
    /// failure, whose usual cause is a handler that committed the claim itself.
    pub(crate) fn unless_processed(
        check: &'static str,
        property: &str,
        found: &inboxed_core::Outcome,
    ) -> Result<(), Self> {
        if *found == inboxed_core::Outcome::Processed {
            return Ok(());
        }
        Err(Self::outcome(
            check,
            property,
            "Processed",
            found,
            "the handler committed the claim itself (a COMMIT through `conn`)",
        ))
    }

    /// A delivery of `check` that failed for good (not a transient failure to redeliver).
    pub(crate) fn failed_for_good(check: &'static str, err: &inboxed_core::Error) -> Self {
        Self::broken(
            check,
            format!(
                "a delivery failed for good: {}",
                inboxed_core::error_chain(err)
            ),
        )
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "check `{}` failed: {}", self.check, self.property)?;
        if !self.expected.is_empty() {
            writeln!(f, "  expected state: {}", self.expected)?;
        }
        writeln!(f, "  state found:    {}", self.actual)?;
        write!(f, "  usual cause:    {}", self.hint)
    }
}

impl std::error::Error for CheckFailure {}

/// Every check [`Kit::check_all`](crate::Kit::check_all) or
/// [`Kit::check_all_workers`](crate::Kit::check_all_workers) ran that failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// The failures, in the order the checks ran.
    pub failures: Vec<CheckFailure>,
}

impl Report {
    /// `Ok` when no check failed.
    pub(crate) fn of(failures: Vec<CheckFailure>) -> Result<(), Self> {
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Self { failures })
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} inboxed-testkit check(s) failed:",
            self.failures.len()
        )?;
        for failure in &self.failures {
            writeln!(f)?;
            writeln!(f, "{failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Report {}
