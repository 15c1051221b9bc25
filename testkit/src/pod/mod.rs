//! The pod: one isolated instance of the service under test.

use crate::harness::Skip;
use crate::Cx;

/// Skips a test whose `requires` names a capability the pod lacks.
pub(crate) fn check_requires(_requires: &[&str], _cx: &Cx) -> Result<(), Skip> {
    Ok(())
}

/// Finds, validates and connects to the pod for this process, once.
pub(crate) async fn init() {}
