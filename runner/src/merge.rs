//! `testkit-runner merge OUT_DIR INPUT...`: one `junit.xml` from the results
//! of several shards, binaries or machines. Each input is a results folder
//! (its per-test records are read) or a JUnit file (nextest's own, for tests
//! whose process died before writing a record).

use std::path::PathBuf;

use clap::Args;
use testkit::report::{self, Summary};

use crate::exit;

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

pub(crate) fn run(args: MergeArgs) -> u8 {
    for input in &args.inputs {
        if !input.exists() {
            eprintln!("testkit-runner: merge: {} does not exist", input.display());
            return exit::BAD_ARGS;
        }
    }
    let merged = match report::merge_results(&args.name, &args.inputs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("testkit-runner: merge: {e}");
            return exit::INCOMPLETE;
        }
    };
    let out = args.out_dir.join("junit.xml");
    if let Err(e) = report::write_junit(&merged, &out) {
        eprintln!("testkit-runner: merge: {e}");
        return exit::INCOMPLETE;
    }
    let mut records = Vec::new();
    for dir in args.inputs.iter().filter(|i| i.is_dir()) {
        match report::read_records(dir) {
            Ok(r) => records.extend(r),
            Err(e) => {
                eprintln!("testkit-runner: merge: {e}");
                return exit::INCOMPLETE;
            }
        }
    }
    let summary = Summary::from_records(&records, None);
    println!("merged {} inputs into {}", args.inputs.len(), out.display());
    print!("{summary}");
    exit::OK
}
