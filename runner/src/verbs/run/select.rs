//! Which tests a rerun runs (`run --last-failed`, `run --from DIR`): those
//! that failed, were killed or never ran in the latest run of a results
//! folder, read the way every report reads a run (`runs::choose` and
//! `runs::complete`: a test killed before it ended is a failure, a
//! tampered folder is refused as green), or, for a folder with no records
//! (a merged one, a CI artifact that kept only `junit.xml`), from its
//! `junit.xml`. They become one nextest filter expression, which the
//! run's `cargo nextest list` then reconciles with the suite as it is now.

use std::path::{Path, PathBuf};

use testkit_engine::report::{read_records, read_starts, Outcome, TestRecord};
use testkit_engine::resource::read_journal;

use crate::errors::ExpectedError;
use crate::rerun::{Rerun, RerunTest, Was};

/// Where the tests to rerun come from.
pub(super) enum Origin<'a> {
    /// `--last-failed`: the latest run of this suite in the results root.
    LastOf { suite_dir: &'a Path, root: &'a Path },
    /// `--from DIR`.
    Folder(&'a Path),
}

/// What a rerun runs.
pub(super) enum Selected {
    /// These tests, by the filter expression that selects them.
    Tests { rerun: Rerun, filter: String },
    /// Every test: the run it reruns ran none.
    Every { rerun: Rerun },
    /// Nothing: the run it reruns has no test that failed, was killed or
    /// never ran; what to say.
    Nothing(String),
}

/// The skip reason of a test an interrupted run never started.
const NOT_RUN: &str = "not run:";

pub(super) fn select(from: Origin<'_>) -> Result<Selected, ExpectedError> {
    let dir = match from {
        Origin::Folder(dir) => folder(dir)?,
        Origin::LastOf { suite_dir, root } => latest_of(suite_dir, root)?,
    };
    let found = if has_records(&dir) {
        from_records(&dir)?
    } else if dir.join("junit.xml").is_file() {
        from_junit(&dir)?
    } else {
        return Err(ExpectedError::bad_args(format_args!(
            "{} holds no test records and no junit.xml: it is not the results folder of a run; \
             give --from the folder a run printed as `results:`, or one `testkit-runner merge` \
             wrote",
            dir.display()
        )));
    };
    let rerun = Rerun {
        run_id: String::new(),
        of_runs: found.runs,
        from: dir.display().to_string(),
        tests: found.tests,
    };
    if found.none_ran {
        return Ok(Selected::Every { rerun });
    }
    if rerun.tests.is_empty() {
        return Ok(Selected::Nothing(format!(
            "nothing to rerun: {} has no test that failed, was killed or never ran ({} tests); \
             no pod was started",
            rerun.source(),
            found.total
        )));
    }
    let filter = filter_expression(&rerun.tests);
    Ok(Selected::Tests { rerun, filter })
}

/// `--from DIR`, canonical.
fn folder(dir: &Path) -> Result<PathBuf, ExpectedError> {
    match dir.canonicalize() {
        Ok(d) if d.is_dir() => Ok(d),
        Ok(d) => Err(ExpectedError::bad_args(format_args!(
            "--from {}: not a folder; give the results folder of a run",
            d.display()
        ))),
        Err(e) => Err(ExpectedError::bad_args(format_args!(
            "--from {}: {e}; give the results folder of a run",
            dir.display()
        ))),
    }
}

/// The results folder under `root` of the latest run of `suite_dir`: the
/// folders whose `source.json` names the suite, the one whose verdict was
/// written last.
fn latest_of(suite_dir: &Path, root: &Path) -> Result<PathBuf, ExpectedError> {
    let suite = suite_dir.display().to_string();
    let latest = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| crate::html::source::Source::read(d).is_some_and(|s| s.suite == suite))
        .filter_map(|d| {
            let at = std::fs::metadata(d.join("verdict.jsonl"))
                .and_then(|m| m.modified())
                .ok()?;
            Some((at, d))
        })
        .max_by_key(|(at, _)| *at);
    match latest {
        Some((_, dir)) => Ok(dir),
        None => Err(ExpectedError::bad_args(format_args!(
            "--last-failed: no run of {suite} in {}: run the suite first, or give the results \
             folder of its run (one given --results DIR, a CI artifact) with --from DIR",
            root.display()
        ))),
    }
}

fn has_records(dir: &Path) -> bool {
    read_records(dir).is_ok_and(|r| !r.is_empty())
}

/// The tests a folder says to rerun.
struct Found {
    runs: Vec<String>,
    tests: Vec<RerunTest>,
    /// How many tests the run had.
    total: usize,
    /// The run ran no test at all (its pod never came up).
    none_ran: bool,
}

/// From the records of the latest run of `dir`, completed as every
/// reading completes them.
fn from_records(dir: &Path) -> Result<Found, ExpectedError> {
    let unreadable = |e: &dyn std::fmt::Display| {
        ExpectedError::bad_args(format_args!("cannot read {}: {e}", dir.display()))
    };
    let records = read_records(dir).map_err(|e| unreadable(&e))?;
    let journal = read_journal(dir);
    let starts = read_starts(dir).map_err(|e| unreadable(&e))?;
    let mut chosen =
        crate::runs::choose(dir, records, &journal, &starts, None).map_err(|e| unreadable(&e))?;
    let seal = crate::runs::complete(dir, &chosen.run_id, &mut chosen.records, true)
        .map_err(|e| unreadable(&e))?;
    if let (Some(why), Some(_)) = (seal.describe(), seal.tampering_record(&chosen.run_id)) {
        return Err(ExpectedError::bad_args(format_args!(
            "{}: {why}: its failures cannot be told from what was changed",
            dir.display()
        )));
    }
    let tests: Vec<RerunTest> = chosen.records.iter().filter_map(to_rerun).collect();
    let ran = chosen.records.iter().any(|r| r.started_at_ms > 0);
    Ok(Found {
        runs: vec![chosen.run_id],
        none_ran: !ran && tests.is_empty() && tests_did_not_run(dir),
        total: chosen.records.len(),
        tests,
    })
}

/// Whether a run's `verdict.jsonl` says its tests phase did not pass (a
/// skip: no pod to test).
fn tests_did_not_run(dir: &Path) -> bool {
    let text = std::fs::read_to_string(dir.join("verdict.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| v["phase"] == "tests" && v["verdict"] != "pass")
}

/// The first words of the records the runner writes for a test whose
/// process died before it recorded its end (`killed`, `suite::records`).
const DIED: &[&str] = &["no record", "no end written", "killed:", "terminated ("];

/// Whether `record` is of a test whose process died under it.
fn died(record: &TestRecord) -> bool {
    record
        .message
        .as_deref()
        .is_some_and(|m| DIED.iter().any(|d| m.starts_with(d)))
}

/// Whether `record` is of a test to rerun, and why.
fn to_rerun(record: &TestRecord) -> Option<RerunTest> {
    let was = match record.outcome {
        Outcome::Failed if died(record) => Was::Killed,
        Outcome::Failed | Outcome::UnexpectedPass => Was::Failed,
        Outcome::Skipped
            if record
                .skip_reason
                .as_deref()
                .is_some_and(|r| r.starts_with(NOT_RUN)) =>
        {
            Was::NotRun
        }
        _ => return None,
    };
    // A record of the runner's own (the seal) is no test of the suite.
    if record.binary == "testkit-runner" {
        return None;
    }
    Some(RerunTest {
        binary: record.binary.clone(),
        name: record.name.clone(),
        was,
    })
}

/// From `junit.xml` (of a merge, or of a run whose records were not kept):
/// a testcase with a `<failure>` or `<error>` failed; a skipped one whose
/// message says it was not run never ran.
fn from_junit(dir: &Path) -> Result<Found, ExpectedError> {
    use quick_junit::{Report, TestCaseStatus};
    let path = dir.join("junit.xml");
    let unreadable = |e: &dyn std::fmt::Display| {
        ExpectedError::bad_args(format_args!("cannot read {}: {e}", path.display()))
    };
    let text = std::fs::read_to_string(&path).map_err(|e| unreadable(&e))?;
    let report = Report::deserialize_from_str(&text).map_err(|e| unreadable(&e))?;
    let mut runs: Vec<String> = Vec::new();
    let mut tests = Vec::new();
    let mut total = 0;
    for suite in &report.test_suites {
        let suite_binary = suite.name.rsplit("::").next().unwrap_or(&suite.name);
        for case in &suite.test_cases {
            total += 1;
            for p in case.properties.iter().filter(|p| &*p.name == "run_id") {
                for id in p.value.split(',') {
                    if !runs.iter().any(|r| r == id) {
                        runs.push(id.to_owned());
                    }
                }
            }
            let was = match &case.status {
                TestCaseStatus::NonSuccess { .. } => Was::Failed,
                TestCaseStatus::Skipped { message, .. }
                    if message.as_deref().is_some_and(|m| m.starts_with(NOT_RUN)) =>
                {
                    Was::NotRun
                }
                _ => continue,
            };
            let binary = case.classname.as_deref().unwrap_or(suite_binary).to_owned();
            if binary == "testkit-runner" {
                continue;
            }
            tests.push(RerunTest {
                binary,
                name: (*case.name).to_owned(),
                was,
            });
        }
    }
    runs.sort();
    Ok(Found {
        runs,
        none_ran: false,
        total,
        tests,
    })
}

/// The nextest filter expression that selects exactly `tests`: each by
/// its binary and its full name.
fn filter_expression(tests: &[RerunTest]) -> String {
    tests
        .iter()
        .map(|t| format!("(binary(={}) & test(={}))", t.binary, t.name))
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn each_test_is_selected_by_its_binary_and_its_exact_name() {
        let tests = [
            RerunTest {
                binary: "api".into(),
                name: "api::create".into(),
                was: Was::Failed,
            },
            RerunTest {
                binary: "ui".into(),
                name: "ui::login".into(),
                was: Was::NotRun,
            },
        ];
        assert_eq!(
            filter_expression(&tests),
            "(binary(=api) & test(=api::create)) | (binary(=ui) & test(=ui::login))"
        );
    }
}
