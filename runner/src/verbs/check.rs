//! `testkit-runner check SUITE_DIR`: everything about a suite that can be
//! checked without building or running it, each problem named with its
//! file, its key or line, and how to mend it: `testkit.toml` (every
//! section, the resource kinds and their templates), `KNOWN-ISSUES.md`,
//! and the pins between the file and the tests' sources. All problems are
//! reported, not the first only.

use std::path::PathBuf;

use clap::Args;
use testkit_engine::config::{SuiteConfig, CONFIG_FILE};
use testkit_engine::resource::Kinds;

use crate::errors::ExpectedError;

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The suite: its `testkit.toml`, `KNOWN-ISSUES.md` and the `.rs`
    /// files under it.
    suite: PathBuf,
}

pub(crate) fn run(args: CheckArgs) -> Result<(), ExpectedError> {
    let suite = &args.suite;
    if !suite.is_dir() {
        return Err(ExpectedError::bad_args(format_args!(
            "the suite {} is not a directory",
            suite.display()
        )));
    }
    let mut problems = Vec::new();
    let config = suite.join(CONFIG_FILE);
    match SuiteConfig::load(suite) {
        Ok(loaded) => match Kinds::from_config(&loaded, &config) {
            // A suite without the file runs on the defaults: say so, rather
            // than call a file that is not there valid.
            Ok(kinds) if !config.is_file() => println!(
                "{}: none; the defaults apply (resource kinds: {})",
                config.display(),
                kinds.names()
            ),
            Ok(kinds) => println!(
                "{}: valid (resource kinds: {})",
                config.display(),
                kinds.names()
            ),
            Err(e) => problems.push(e.to_string()),
        },
        Err(e) => problems.push(e.to_string()),
    }
    match testkit_engine::report::check_known_issues(suite) {
        Ok(check) if check.ok() => println!("{check}"),
        Ok(check) => problems.push(check.to_string().trim_end().to_owned()),
        Err(e) => problems.push(e.to_string()),
    }
    if problems.is_empty() {
        return Ok(());
    }
    for problem in &problems {
        println!("{problem}");
    }
    Err(ExpectedError::ChecksReported)
}
