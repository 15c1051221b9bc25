//! `Skip`: the error a test returns to be reported as skipped, with the
//! reason, rather than failed.

/// A runtime skip: a test (or testkit on its behalf, when the pod is missing
/// or lacks a capability) returns this error to be reported as skipped, with
/// the reason, rather than failed.
#[derive(Debug, Clone)]
pub struct Skip {
    reason: String,
}

impl Skip {
    /// A skip with the exact reason a person reading the report needs.
    pub fn new(reason: impl Into<String>) -> Skip {
        Skip {
            reason: reason.into(),
        }
    }

    /// Why the test was skipped.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "skipped: {}", self.reason)
    }
}

impl std::error::Error for Skip {}
