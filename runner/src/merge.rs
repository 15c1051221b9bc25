//! `testkit-runner merge OUT_DIR INPUT...`: one `junit.xml` from the results
//! of several shards, binaries or machines. Each input is a results folder
//! (its per-test records are read) or a JUnit file (nextest's own, for tests
//! whose process died before writing a record).

use std::path::PathBuf;

use clap::Args;
use testkit::report::{self, Summary};

use crate::errors::ExpectedError;

#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// Where `junit.xml` is written (created if needed).
    out_dir: PathBuf,
    /// Results folders or JUnit files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The name of the merged report.
    #[arg(long, default_value = "merged")]
    name: String,
}

pub(crate) fn run(args: MergeArgs) -> Result<(), ExpectedError> {
    if let Some(missing) = args.inputs.iter().find(|i| !i.exists()) {
        return Err(ExpectedError::bad_args(format_args!(
            "merge: {} does not exist",
            missing.display()
        )));
    }
    let incomplete = |e: &dyn std::fmt::Display| ExpectedError::Incomplete(format!("merge: {e}"));
    let merged = report::merge_results(&args.name, &args.inputs).map_err(|e| incomplete(&e))?;
    let out = args.out_dir.join("junit.xml");
    report::write_junit(&merged, &out).map_err(|e| incomplete(&e))?;
    let mut records = Vec::new();
    for dir in args.inputs.iter().filter(|i| i.is_dir()) {
        records.extend(report::read_records(dir).map_err(|e| incomplete(&e))?);
    }
    let summary = Summary::from_records(&records, None);
    println!("merged {} inputs into {}", args.inputs.len(), out.display());
    print!("{summary}");
    Ok(())
}
