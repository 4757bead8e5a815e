//! Durations on the command line, in the environment and in TOML files, as people write them
//! (humantime: `500ms`, `45s`, `90m`, `12h`, `30d`, `1h 30m`); and shown back the same way.

use std::time::Duration;

/// Parses a duration written as a number and a unit, or several (`500ms`, `30d`, `1h 30m`).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}`: {e}: write for example 500ms, 45s, 90m, 12h or 30d"))
}

/// The largest whole unit that divides the duration: `30d`, `36h`, `90s`.
pub(crate) fn show(d: Duration) -> String {
    let s = d.as_secs();
    for (unit, n) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if s > 0 && s.is_multiple_of(n) {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}

/// An age for people, in its two largest units: `45s`, `56m 8s`, `3h 2m`, `12d 4h`.
pub(crate) fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m {}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h {}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3_600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip_and_bad_ones_say_why() {
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(show(Duration::from_secs(36 * 3_600)), "36h");
        assert_eq!(show(Duration::from_secs(90)), "90s");
        assert_eq!(age(Duration::from_secs(3_368)), "56m 8s");
        assert_eq!(age(Duration::from_secs(90_000)), "1d 1h");
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert!(
            parse_duration("30")
                .unwrap_err()
                .contains("write for example")
        );
        assert!(
            parse_duration("3 fortnights")
                .unwrap_err()
                .contains("`3 fortnights`")
        );
    }
}
