//! The verbs of `testkit-runner`, one module each (`run`, `pod`, `report`,
//! `merge`, `janitor`, `new`, `check`, `check-known-issues`), and what they share: the runtime an async verb runs on, the runner's
//! own settings, and the parsers of the arguments several of them take.

pub(crate) mod check;
pub(crate) mod janitor;
pub(crate) mod known_issues;
pub(crate) mod merge;
pub(crate) mod new;
pub(crate) mod pod;
pub(crate) mod report;
pub(crate) mod run;

use std::sync::OnceLock;
use std::time::Duration;

use testkit_engine::settings::Settings;

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

/// The `TESTKIT_*` variables of the runner's own environment that decide
/// where its files go (`TESTKIT_SECRETS_DIR`, `CARGO_TARGET_DIR`,
/// `XDG_RUNTIME_DIR`), read once; the defaults when they do not parse.
pub(crate) fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| Settings::from_env().unwrap_or_else(|_| Settings::defaults()))
}

/// A duration argument: `500ms`, `10s`, `30m`, `2h`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (expected e.g. 500ms, 10s, 30m, 2h)"))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration(" 10s ").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        let e = parse_duration("soon").unwrap_err();
        assert!(e.contains("\"soon\"") && e.contains("expected e.g."), "{e}");
    }
}
