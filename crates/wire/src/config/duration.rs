//! Spans of time as files spell them: a number with a unit (`"250ms"`,
//! `"60s"`, `"10m"`, `"1h"`), read and written the same way.

use std::time::Duration;

/// `"100ms"`, `"1.5s"`, `"10m"`, `"2h"`; `None` for anything else
/// (no unit, an unknown unit, a negative or non-finite number).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.trim().parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    (seconds >= 0.0).then(|| Duration::try_from_secs_f64(seconds).ok()).flatten()
}

/// The shortest exact spelling [`parse_duration`] reads back: whole hours,
/// minutes or seconds when they are, else milliseconds (sub-millisecond
/// parts are dropped).
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    match ms {
        0 => "0s".into(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_units_and_writes_them_back() {
        assert_eq!(parse_duration("100ms"), Some(Duration::from_millis(100)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration(" 2 h "), Some(Duration::from_secs(7200)));
        for bad in ["", "10", "s", "-1s", "10d", "1e400s", "NaNs", "5 minutes"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        for (ms, text) in [(100, "100ms"), (60_000, "1m"), (90_000, "90s"), (7_200_000, "2h"), (1500, "1500ms")] {
            assert_eq!(format_duration(Duration::from_millis(ms)), text);
            assert_eq!(parse_duration(text), Some(Duration::from_millis(ms)));
        }
    }
}
