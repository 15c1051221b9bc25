//! The verbs of `testkit-runner`, one module each (`run`, `pod`, `report`,
//! `merge`, `janitor`, `new`, `check`, `check-known-issues`), and what they
//! share: the runtime an async verb runs on, and the parsers of the
//! arguments several of them take. The runner's settings are read once in
//! `args` and handed to the verbs that use them.

pub(crate) mod check;
pub(crate) mod janitor;
pub(crate) mod known_issues;
pub(crate) mod merge;
pub(crate) mod new;
pub(crate) mod pod;
pub(crate) mod report;
pub(crate) mod run;

use std::time::Duration;

use crate::errors::ExpectedError;

/// Runs an async verb on a runtime of its own. Only the verbs that need one
/// start it, so that the others cannot fail for want of one.
pub(crate) fn block_on(
    verb: impl std::future::Future<Output = Result<(), ExpectedError>>,
) -> Result<(), ExpectedError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ExpectedError::Incomplete(format!("failed to start the runtime: {e}")))?
        .block_on(verb)
}

/// Creates `dir` (and those above it) and proves that this process can
/// write in it: a probe file made and removed.
pub(crate) fn writable_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".testkit-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// A duration argument that bounds a wait (`pod down --grace`): `500ms`,
/// `10s`, `30m`, `2h`; more than zero, at most a day
/// ([`testkit_engine::duration::TIMEOUT`]).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, InvalidDuration> {
    testkit_engine::duration::TIMEOUT
        .parse(s)
        .map_err(|reason| InvalidDuration {
            text: s.to_owned(),
            reason,
        })
}

/// A duration argument that is not one, or is out of its bounds: clap
/// prints it after the argument's name.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is invalid: {reason}")]
pub(crate) struct InvalidDuration {
    text: String,
    reason: testkit_engine::duration::DurationError,
}

/// How old a run's journals must be for `janitor --older-than` to clean it
/// up: from zero (every run that is not live) to a year.
pub(crate) const AGE: testkit_engine::duration::Bounds =
    testkit_engine::duration::Bounds::new(Duration::ZERO, Duration::from_secs(365 * 86_400));

/// An age argument (`janitor --older-than`): `30m`, `1h`, `7d`, within
/// [`AGE`].
pub(crate) fn parse_age(s: &str) -> Result<Duration, InvalidDuration> {
    AGE.parse(s).map_err(|reason| InvalidDuration {
        text: s.to_owned(),
        reason,
    })
}

/// A reader that prints to a pipe closed early (`report DIR | head -1`)
/// ends quietly, as `cat` does, instead of panicking on the write: the
/// default action of SIGPIPE. Only for the verbs that read and print; `run`
/// keeps SIGPIPE ignored, so that it always finishes its teardown.
pub(crate) fn quiet_on_a_closed_pipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_DFL installs no handler of ours; it is set before any
    // thread of this verb starts.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration(" 10s ").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        let e = parse_duration("soon").unwrap_err().to_string();
        assert!(
            e.starts_with("\"soon\" is invalid: it is not a duration") && e.contains("such as 30s"),
            "{e}"
        );
        for zero_or_too_long in ["0s", "25h", "5000000000000000h"] {
            let e = parse_duration(zero_or_too_long).unwrap_err().to_string();
            assert!(e.contains("give a duration from 1ms to 24h"), "{e}");
        }
    }

    #[test]
    fn ages_run_from_zero_to_a_year() {
        assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(7 * 86_400));
        let e = parse_age("5000000000000000h").unwrap_err().to_string();
        assert_eq!(
            e,
            "\"5000000000000000h\" is invalid: it is longer than 365d; give a duration from \
             0s to 365d, such as 30s or 5m"
        );
    }
}
