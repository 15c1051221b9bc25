//! `testkit-runner merge OUT_DIR INPUT...`: one `junit.xml`, one
//! `ctrf.json`, one `report.html` and one `summary.md` from the results of several shards,
//! binaries or machines. Each input is a results folder (its per-test
//! records are read; for the report, its verdicts and journal too) or a
//! JUnit file (nextest's own, for tests whose process died before writing a
//! record).

use std::path::PathBuf;

use clap::Args;
use testkit_engine::report::Summary;

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
    crate::verbs::quiet_on_a_closed_pipe();
    if let Some(missing) = args.inputs.iter().find(|i| !i.exists()) {
        return Err(ExpectedError::bad_args(format_args!(
            "merge: {} does not exist",
            missing.display()
        )));
    }
    let incomplete = |e: &dyn std::fmt::Display| ExpectedError::Incomplete(format!("merge: {e}"));
    let merged =
        crate::junit::merge_results(&args.name, &args.inputs).map_err(|e| incomplete(&e))?;
    let out = args.out_dir.join("junit.xml");
    crate::junit::write_junit(&merged, &out).map_err(|e| incomplete(&e))?;
    let mut records = Vec::new();
    for dir in args.inputs.iter().filter(|i| i.is_dir()) {
        records.extend(crate::runs::latest_records(dir).map_err(|e| incomplete(&e))?);
    }
    let known = crate::html::known_issues_of(&args.inputs);
    let summary = Summary::from_records(&records, known.as_ref());
    crate::ctrf::write(&args.out_dir, &args.name, &records, None).map_err(|e| {
        incomplete(&format!(
            "{}: {e}",
            args.out_dir.join(crate::ctrf::FILE).display()
        ))
    })?;
    let failures = crate::summary::FailedTest::of(&records);
    let mut markdown = format!(
        "# Merged: {} inputs, {} tests\n",
        args.inputs.len(),
        summary.total()
    );
    crate::summary::tests_markdown(&mut markdown, &summary, &failures, None);
    let markdown = testkit_engine::redact(&markdown).into_owned();
    let md = args.out_dir.join("summary.md");
    std::fs::write(&md, markdown.as_bytes())
        .map_err(|e| incomplete(&format!("{}: {e}", md.display())))?;
    crate::summary::to_github_step_summary(&markdown);
    let report =
        crate::html::write_merged(&args.out_dir, &args.inputs).map_err(|e| incomplete(&e))?;
    println!("merged {} inputs into {}", args.inputs.len(), out.display());
    print!("{summary}");
    crate::summary::print_where_to_look(&args.out_dir, Some(&report));
    Ok(())
}
