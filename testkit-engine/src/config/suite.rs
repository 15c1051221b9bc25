//! `[suite]` of `testkit.toml`: the resource-name prefix and what a flaky
//! test does to the run.

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
}

impl Default for SuiteSection {
    fn default() -> Self {
        SuiteSection {
            name_prefix: default_prefix(),
            flaky: FlakyPolicy::default(),
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
        Ok(())
    }
}

fn default_prefix() -> String {
    "ct".to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, SuiteConfig};
    use super::FlakyPolicy;
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
}
