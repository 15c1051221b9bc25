//! Other things a test binary can be asked to do than run tests (for example
//! reaping the resources of a killed test process), chosen by environment
//! variables so that libtest's and nextest's arguments stay untouched.

use std::process::ExitCode;

/// Runs a non-test mode when the environment asks for one.
pub(crate) fn dispatch() -> Option<ExitCode> {
    match std::env::var("TESTKIT_MODE").ok()?.as_str() {
        crate::resource::REAP_MODE => Some(crate::resource::reap_main()),
        other => {
            eprintln!(
                "testkit: unknown TESTKIT_MODE={other:?}: expected `{}`",
                crate::resource::REAP_MODE
            );
            Some(ExitCode::from(2))
        }
    }
}
