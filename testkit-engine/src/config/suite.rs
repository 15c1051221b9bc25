//! `[suite]` of `testkit.toml`: the resource-name prefix, what a flaky
//! test does to the run, and which failures a retry reruns.

use serde::Deserialize;

use super::Problem;

/// `[suite]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SuiteSection {
    /// Prefix of every resource name: 1 to 8 characters of `a-z0-9`.
    #[serde(default = "default_prefix")]
    pub name_prefix: String,
    /// Whether a flaky test (one that failed, then passed on a nextest
    /// retry) fails the run.
    #[serde(default)]
    pub flaky: FlakyPolicy,
    /// How many times `testkit-runner run` has nextest retry a failed test
    /// (nextest's `--retries`); 0, the default, retries nothing.
    #[serde(default)]
    pub retries: u32,
    /// Which failures a retry reruns: any, or only the infrastructure's
    /// ([`RetryPolicy`]).
    #[serde(default)]
    pub retry: RetryPolicy,
}

/// The most `[suite] retries` may ask for.
pub const MAX_RETRIES: u32 = 10;

/// `[suite] retry`: which failed tests a retry (`[suite] retries`, or
/// nextest's `--retries`) reruns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[non_exhaustive]
pub enum RetryPolicy {
    /// `"any"`: every failure is retried, as nextest does.
    #[default]
    Any,
    /// `"infrastructure"`: only a failure of the infrastructure (the
    /// container engine, a port that could not be bound, a test process
    /// killed); a retry of any other failure does not run the test again
    /// and fails as the attempt before it did, so that no product bug
    /// passes on a retry.
    Infrastructure,
}

impl RetryPolicy {
    /// The word `testkit.toml` spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryPolicy::Any => "any",
            RetryPolicy::Infrastructure => "infrastructure",
        }
    }
}

/// A `[suite] retry` that is neither word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "is {0:?}: expected \"infrastructure\" (a retry reruns only a test the infrastructure \
     failed) or \"any\" (it reruns every failed test)"
)]
pub struct UnknownRetryPolicy(String);

impl TryFrom<String> for RetryPolicy {
    type Error = UnknownRetryPolicy;

    fn try_from(value: String) -> Result<RetryPolicy, UnknownRetryPolicy> {
        match value.as_str() {
            "any" => Ok(RetryPolicy::Any),
            "infrastructure" => Ok(RetryPolicy::Infrastructure),
            _ => Err(UnknownRetryPolicy(value)),
        }
    }
}

impl Default for SuiteSection {
    fn default() -> Self {
        SuiteSection {
            name_prefix: default_prefix(),
            flaky: FlakyPolicy::default(),
            retries: 0,
            retry: RetryPolicy::default(),
        }
    }
}

/// `[suite] flaky`: what a flaky test does to the run. Either way it is
/// counted and shown as flaky, with every attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[non_exhaustive]
pub enum FlakyPolicy {
    /// `"pass"`: the run passes, and its summary says which tests were flaky.
    #[default]
    Pass,
    /// `"fail"`: a flaky test fails the run.
    Fail,
}

impl FlakyPolicy {
    /// The word `testkit.toml` (and nextest's `--flaky-result`) spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            FlakyPolicy::Pass => "pass",
            FlakyPolicy::Fail => "fail",
        }
    }
}

/// A `[suite] flaky` that is neither word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "is {0:?}: expected \"pass\" (a test that passes on a retry passes the run, and the \
     summary names it) or \"fail\" (it fails the run)"
)]
pub struct UnknownFlakyPolicy(String);

impl TryFrom<String> for FlakyPolicy {
    type Error = UnknownFlakyPolicy;

    fn try_from(value: String) -> Result<FlakyPolicy, UnknownFlakyPolicy> {
        match value.as_str() {
            "pass" => Ok(FlakyPolicy::Pass),
            "fail" => Ok(FlakyPolicy::Fail),
            _ => Err(UnknownFlakyPolicy(value)),
        }
    }
}

impl SuiteSection {
    pub(super) fn validate(&self) -> Result<(), Problem> {
        let prefix = &self.name_prefix;
        if prefix.is_empty()
            || prefix.len() > 8
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err((
                "suite.name_prefix",
                format!("is {prefix:?}: expected 1 to 8 characters of a-z and 0-9"),
            ));
        }
        if self.retries > MAX_RETRIES {
            return Err((
                "suite.retries",
                format!(
                    "is {}: expected 0 to {MAX_RETRIES} (a test that fails more often than \
                     that is failing, not flaky)",
                    self.retries
                ),
            ));
        }
        Ok(())
    }
}

fn default_prefix() -> String {
    "ct".to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, SuiteConfig};
    use super::{FlakyPolicy, RetryPolicy};
    use std::path::Path;

    fn parse(text: &str) -> Result<SuiteConfig, ConfigError> {
        SuiteConfig::parse(text, Path::new("/s/testkit.toml"))
    }

    #[test]
    fn flaky_passes_by_default_and_takes_pass_or_fail_only() {
        assert_eq!(parse("").unwrap().suite.flaky, FlakyPolicy::Pass);
        let c = parse("[suite]\nflaky = \"fail\"").unwrap();
        assert_eq!(c.suite.flaky, FlakyPolicy::Fail);
        assert_eq!(
            parse("[suite]\nflaky = \"pass\"").unwrap().suite.flaky,
            FlakyPolicy::Pass
        );
        let e = parse("[suite]\nflaky = \"retry\"").unwrap_err().to_string();
        assert_eq!(e.matches("suite.flaky").count(), 1, "{e}");
        assert!(
            e.contains("/s/testkit.toml")
                && e.contains("suite.flaky")
                && e.contains("\"retry\"")
                && e.contains("\"pass\"")
                && e.contains("\"fail\""),
            "{e}"
        );
        let e = parse("[suite]\nflaky = true").unwrap_err().to_string();
        assert!(e.contains("flaky"), "{e}");
    }

    #[test]
    fn retries_are_bounded_and_retry_takes_any_or_infrastructure() {
        let c = parse("").unwrap();
        assert_eq!((c.suite.retries, c.suite.retry), (0, RetryPolicy::Any));
        let c = parse("[suite]\nretries = 2\nretry = \"infrastructure\"").unwrap();
        assert_eq!(
            (c.suite.retries, c.suite.retry),
            (2, RetryPolicy::Infrastructure)
        );
        let e = parse("[suite]\nretries = 11").unwrap_err().to_string();
        assert!(e.contains("suite.retries") && e.contains("0 to 10"), "{e}");
        let e = parse("[suite]\nretry = \"product\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("retry") && e.contains("\"product\"") && e.contains("\"infrastructure\""),
            "{e}"
        );
    }
}
