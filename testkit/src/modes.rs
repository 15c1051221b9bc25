//! Other things a test binary can be asked to do than run tests (for example
//! reaping the resources of a killed test process), chosen by environment
//! variables so that libtest's and nextest's arguments stay untouched.

use std::process::ExitCode;

/// Runs a non-test mode when the environment asks for one.
pub(crate) fn dispatch() -> Option<ExitCode> {
    None
}
