//! The bounds of every duration a user sets (a `testkit.toml` key, a
//! `TESTKIT_*` variable, a runner argument), checked where it is parsed, and
//! deadlines that cannot overflow.
//!
//! Without a bound, `delete_timeout = "5000000000000000h"` parses, and the
//! first deadline computed from it overflows the clock: a panic in the middle
//! of a cleanup. With one, the value is refused where it is read, naming the
//! key, the bound and what to give instead.

use std::fmt;
use std::time::{Duration, Instant};

/// A day: the longest timeout, deadline or grace testkit takes.
pub const DAY: Duration = Duration::from_secs(24 * 3600);

/// The range a duration must fall in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    least: Duration,
    most: Duration,
}

/// Timeouts, deadlines and graces: more than zero (a timeout of zero cannot
/// be meant), at most a day.
pub const TIMEOUT: Bounds = Bounds::new(Duration::from_millis(1), DAY);

impl Bounds {
    /// From `least` to `most`, both included. A `least` of zero lets zero
    /// through: only where zero has a meaning.
    pub const fn new(least: Duration, most: Duration) -> Bounds {
        Bounds { least, most }
    }

    /// `duration` itself when it is within the bounds.
    pub fn check(self, duration: Duration) -> Result<Duration, DurationError> {
        let reason = if duration.is_zero() && !self.least.is_zero() {
            Reason::Zero
        } else if duration < self.least {
            Reason::TooShort
        } else if duration > self.most {
            Reason::TooLong
        } else {
            return Ok(duration);
        };
        Err(DurationError {
            reason,
            bounds: self,
        })
    }

    /// Parses `text` (`500ms`, `90s`, `5m`, `2h`; surrounding spaces
    /// ignored) and checks it against the bounds.
    pub fn parse(self, text: &str) -> Result<Duration, DurationError> {
        match humantime::parse_duration(text.trim()) {
            Ok(duration) => self.check(duration),
            // More than `Duration` holds is longer than any bound.
            Err(humantime::DurationError::NumberOverflow) => Err(DurationError {
                reason: Reason::TooLong,
                bounds: self,
            }),
            Err(e) => Err(DurationError {
                reason: Reason::NotADuration(e.to_string()),
                bounds: self,
            }),
        }
    }
}

/// A duration that is not one, or is out of its bounds. It reads after
/// the value it is about: `TESTKIT_TIMEOUT="0s" is invalid: it is zero; give
/// a duration from 1ms to 24h, such as 30s or 5m`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    reason: Reason,
    bounds: Bounds,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    NotADuration(String),
    Zero,
    TooShort,
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Bounds { least, most } = self.bounds;
        match &self.reason {
            Reason::NotADuration(e) => write!(f, "it is not a duration ({e})")?,
            Reason::Zero => f.write_str("it is zero")?,
            Reason::TooShort => write!(f, "it is shorter than {}", short(least))?,
            Reason::TooLong => write!(f, "it is longer than {}", short(most))?,
        }
        write!(
            f,
            "; give a duration from {} to {}, such as 30s or 5m",
            short(least),
            short(most)
        )
    }
}

impl std::error::Error for DurationError {}

/// A bound as a user would write it: `1ms`, `1s`, `24h`, `365d`.
fn short(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match s {
        s if s > 2 * 86_400 && s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        s if s >= 3600 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        s if s >= 60 && s.is_multiple_of(60) => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// `start + after`, or the latest instant the clock can hold short of it:
/// a deadline that is never reached rather than a panic.
pub(crate) fn deadline_after(start: Instant, after: Duration) -> Instant {
    let mut after = after;
    loop {
        if let Some(deadline) = start.checked_add(after) {
            return deadline;
        }
        after /= 2;
    }
}

/// [`deadline_after`] on tokio's clock.
pub(crate) fn tokio_deadline_after(
    start: tokio::time::Instant,
    after: Duration,
) -> tokio::time::Instant {
    tokio::time::Instant::from_std(deadline_after(start.into_std(), after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_more_than_zero_and_at_most_a_day() {
        assert_eq!(TIMEOUT.parse(" 90s ").unwrap(), Duration::from_secs(90));
        assert_eq!(TIMEOUT.parse("24h").unwrap(), DAY);
        assert_eq!(TIMEOUT.parse("1ms").unwrap(), Duration::from_millis(1));
        for (text, reason) in [
            ("0s", "it is zero"),
            ("25h", "it is longer than 24h"),
            ("5000000000000000h", "it is longer than 24h"),
            // More than a `Duration` holds.
            ("99999999999999999999h", "it is longer than 24h"),
            ("soon", "it is not a duration ("),
            ("500us", "it is shorter than 1ms"),
        ] {
            let e = TIMEOUT.parse(text).unwrap_err().to_string();
            assert!(e.starts_with(reason), "{text}: {e}");
            assert!(
                e.ends_with("; give a duration from 1ms to 24h, such as 30s or 5m"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn zero_passes_only_where_the_bounds_allow_it() {
        let age = Bounds::new(Duration::ZERO, Duration::from_secs(365 * 86_400));
        assert_eq!(age.parse("0s").unwrap(), Duration::ZERO);
        let e = age.parse("366d").unwrap_err().to_string();
        assert!(
            e.contains("longer than 365d") && e.contains("from 0s to 365d"),
            "{e}"
        );
        let sweep = Bounds::new(Duration::from_secs(1), DAY);
        assert!(sweep
            .parse("0s")
            .unwrap_err()
            .to_string()
            .starts_with("it is zero"));
        assert!(sweep
            .parse("500ms")
            .unwrap_err()
            .to_string()
            .starts_with("it is shorter than 1s"));
    }

    #[test]
    fn a_deadline_past_the_clocks_end_saturates() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = deadline_after(now, Duration::MAX);
        assert!(far > now + DAY * 365, "{far:?}");
        let far = tokio_deadline_after(tokio::time::Instant::now(), Duration::MAX);
        assert!(far > tokio::time::Instant::now() + DAY);
    }
}
