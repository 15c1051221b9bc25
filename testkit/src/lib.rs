//! testkit: end-to-end test suites that drive a live service as a black box.
#![warn(missing_docs, unreachable_pub)]

#[doc(hidden)]
pub mod __private;
mod config;
mod cx;
mod harness;
mod modes;
mod pod;
mod redact;
mod report;
mod resource;
mod run;

pub use cx::Cx;
pub use harness::Skip;
pub use redact::{redact, register_secret, REDACTED};
pub use report::{CleanupState, FailureKind, Outcome, ResourceRecord, TestRecord, RECORD_SCHEMA_VERSION};
pub use testkit_macros::test;

/// What a test returns: `Ok(())` or any error, with context.
pub type Result<T = (), E = anyhow::Error> = std::result::Result<T, E>;

pub use anyhow::{anyhow as format_err, bail, ensure, Context};

/// Everything a test file needs: `use testkit::prelude::*;`
pub mod prelude {
    pub use crate::{bail, ensure, format_err, Cx, Skip};
    pub use anyhow::Context as _;
}

/// The entry point of a test binary (`harness = false`): runs every
/// `#[testkit::test]` of the binary under libtest-mimic.
#[macro_export]
macro_rules! main {
    () => {
        fn main() -> ::std::process::ExitCode {
            $crate::__private::main()
        }
    };
}
