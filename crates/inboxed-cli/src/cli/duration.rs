//! Durations on the command line: a whole number and a unit (`s`, `m`, `h`, `d`).

use std::time::Duration;

/// Parses `30d`, `12h`, `90m` or `45s`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit: write for example 30d, 12h, 90m or 45s"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}`: use s, m, h or d"
            ));
        }
    };
    Ok(Duration::from_secs(n.saturating_mul(seconds)))
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
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(parse_duration("3w").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("d").unwrap_err().contains("whole number"));
    }
}
