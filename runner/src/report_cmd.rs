//! `testkit-runner report DIR`: the JUnit files of a results folder that a
//! plain `cargo test` or `cargo nextest run` left. Test processes only write
//! records (what each does must not grow with the run); this builds
//! `junit/<binary>.xml` and `junit.xml` from them, once, and prints the
//! summary. `testkit-runner run` does the same at the end of its tests phase.

use std::path::PathBuf;

use clap::Args;
use testkit::report::{self, KnownIssues, Summary};

use crate::errors::ExpectedError;

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The results folder (`TESTKIT_RESULTS_DIR`, else
    /// `<target>/testkit/runs/<run id>`).
    results: PathBuf,
    /// The suite, whose `KNOWN-ISSUES.md` the summary checks the run against.
    #[arg(long)]
    suite: Option<PathBuf>,
}

pub(crate) fn run(args: ReportArgs) -> Result<(), ExpectedError> {
    if !args.results.is_dir() {
        return Err(ExpectedError::bad_args(format_args!(
            "report: the results folder {} is not a directory",
            args.results.display()
        )));
    }
    let known = match &args.suite {
        Some(suite) => Some(KnownIssues::load(suite).map_err(|e| {
            ExpectedError::bad_args(format_args!("report: --suite {}: {e}", suite.display()))
        })?),
        None => None,
    };
    let records = report::write_results_junit(&args.results)
        .map_err(|e| ExpectedError::Incomplete(format!("report: {e}")))?;
    if records.is_empty() {
        return Err(ExpectedError::Incomplete(format!(
            "report: no test records under {}: give the results folder of a run \
             (TESTKIT_RESULTS_DIR, else <target>/testkit/runs/<run id>)",
            args.results.join("records").display()
        )));
    }
    let summary = Summary::from_records(&records, known.as_ref());
    println!(
        "wrote {} from {} records",
        args.results.join("junit.xml").display(),
        records.len()
    );
    print!("{summary}");
    Ok(())
}
