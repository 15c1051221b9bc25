//! `testkit-runner check-known-issues SUITE_DIR`: the CI check of a suite's
//! `KNOWN-ISSUES.md`, without a pod or a build: an entry that no test pins
//! (`known_issue = "ID"` in the sources) is stale, and an id a test pins
//! that the file does not list is unlisted. Either fails (exit 1).

use std::path::PathBuf;

use clap::Args;

use crate::errors::ExpectedError;

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The suite: its `KNOWN-ISSUES.md` and the `.rs` files under it.
    suite: PathBuf,
}

pub(crate) fn run(args: CheckArgs) -> Result<(), ExpectedError> {
    if !args.suite.is_dir() {
        return Err(ExpectedError::bad_args(format_args!(
            "the suite {} is not a directory",
            args.suite.display()
        )));
    }
    match testkit_engine::report::check_known_issues(&args.suite) {
        Ok(check) if check.ok() => {
            println!("{check}");
            Ok(())
        }
        Ok(check) => {
            print!("{check}");
            Err(ExpectedError::ChecksReported)
        }
        Err(e) => Err(ExpectedError::CheckFailed(e.to_string())),
    }
}
