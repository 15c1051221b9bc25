//! `testkit-runner report DIR…`: what a plain `cargo test` or `cargo
//! nextest run` leaves is records; this builds the rest from them, once: the
//! JUnit files (`junit/<binary>.xml` and `junit.xml`; test processes never
//! build them, so that what each does does not grow with the run),
//! `ctrf.json` beside them, the summary, and `report.html` (one page for several folders: the
//! partitions of a fanned-out run). `testkit-runner run` does the same at
//! the end of every run.
//!
//! A report is about one run of each folder, and says which: a folder
//! several runs wrote into is reported for its latest (the one whose tests
//! were last active, see [`crate::runs`]), or for `--run ID`; the others
//! are named. A test of the run whose process was killed before it wrote
//! its record is counted from its journal ([`crate::killed`]).

use std::path::PathBuf;

use clap::Args;
use testkit_engine::report::{KnownIssues, Summary};

use crate::errors::ExpectedError;
use crate::runs::RunChoiceError;

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// Results folders: of a plain `cargo test` / `cargo nextest run`
    /// (`TESTKIT_RESULTS_DIR`, else `<target>/testkit/runs/<run id>`), of a
    /// `testkit-runner run`, or several partitions to merge.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where `report.html` is written (default: the one DIR given; required
    /// with several).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The suite the results are of: the `KNOWN-ISSUES.md` the summary
    /// checks the run against, its commit, and the titles of its known
    /// issues, when the results folder does not record them.
    #[arg(long, value_name = "DIR")]
    suite: Option<PathBuf>,
    /// The run to report, of a folder several runs wrote into (a fixed
    /// `TESTKIT_RESULTS_DIR`, `run --results DIR` reused). Default: the
    /// latest, the run whose tests were last active; the report names the
    /// others. Two equally late runs (none of whose tests ran) need it.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
}

pub(crate) fn run(args: ReportArgs) -> Result<(), ExpectedError> {
    crate::verbs::quiet_on_a_closed_pipe();
    for dir in &args.dirs {
        if !dir.is_dir() {
            return Err(ExpectedError::bad_args(format_args!(
                "report: {} is not a folder: give a results folder (the TESTKIT_RESULTS_DIR of a \
                 cargo test run, or the `results:` folder a testkit-runner run printed)",
                dir.display()
            )));
        }
        // A folder whose only test was killed holds its start, or its
        // journal, only.
        if !dir.join("records").is_dir()
            && !dir.join("verdict.jsonl").is_file()
            && !dir.join("journal").is_dir()
            && !dir.join(testkit_engine::report::STARTS_DIR).is_dir()
        {
            return Err(ExpectedError::bad_args(format_args!(
                "report: {} holds neither records/ nor verdict.jsonl: it is not a results \
                 folder of testkit tests",
                dir.display()
            )));
        }
    }
    if args.run.is_some() && args.dirs.len() > 1 {
        return Err(ExpectedError::bad_args(
            "report: --run ID picks the run of one results folder: give one DIR (several are \
             merged, the latest run of each)",
        ));
    }
    let out =
        match (&args.out, args.dirs.as_slice()) {
            (Some(out), _) => out.clone(),
            (None, [one]) => one.clone(),
            (None, _) => return Err(ExpectedError::bad_args(
                "report: several results folders need --out DIR, where the merged report.html goes",
            )),
        };
    let known = match &args.suite {
        Some(suite) if !suite.is_dir() => {
            return Err(ExpectedError::bad_args(format_args!(
                "report: --suite {} is not a folder",
                suite.display()
            )))
        }
        Some(suite) => Some(KnownIssues::load(suite).map_err(|e| {
            ExpectedError::bad_args(format_args!("report: --suite {}: {e}", suite.display()))
        })?),
        None => None,
    };
    let mut all = Vec::new();
    let mut inputs = Vec::new();
    for dir in &args.dirs {
        let chosen = match crate::junit::write_results_junit(dir, args.run.as_deref()) {
            Ok(chosen) => chosen,
            Err(e @ (RunChoiceError::NoSuchRun { .. } | RunChoiceError::Undecided { .. })) => {
                return Err(ExpectedError::bad_args(format_args!("report: {e}")))
            }
            Err(e) => return Err(ExpectedError::Incomplete(format!("report: {e}"))),
        };
        if chosen.records.is_empty() {
            return Err(ExpectedError::Incomplete(format!(
                "report: no test records under {}: give the results folder of a run \
                 (TESTKIT_RESULTS_DIR, else <target>/testkit/runs/<run id>)",
                dir.join("records").display()
            )));
        }
        println!("{}", chosen.describe(dir));
        if let Some(seal) = chosen.seal.describe() {
            println!("{seal}");
        }
        // Beside its JUnit, the run's tests as CTRF.
        let rerun = crate::rerun::Rerun::read(dir, &chosen.run_id).map(|r| r.line(&chosen.records));
        crate::ctrf::write(dir, &chosen.run_id, &chosen.records, rerun.as_deref()).map_err(
            |e| {
                ExpectedError::Incomplete(format!(
                    "report: {}: {e}",
                    dir.join(crate::ctrf::FILE).display()
                ))
            },
        )?;
        inputs.push((dir.clone(), Some(chosen.run_id.clone())));
        all.extend(chosen.records);
    }
    print!("{}", Summary::from_records(&all, known.as_ref()));
    let page = crate::html::write_with(&out, &inputs, args.suite.as_deref())
        .map_err(|e| ExpectedError::Incomplete(format!("report: {e}")))?;
    // Where to look, last.
    for dir in &args.dirs {
        println!("junit: {}", dir.join("junit.xml").display());
    }
    println!("report: {}", page.display());
    Ok(())
}
