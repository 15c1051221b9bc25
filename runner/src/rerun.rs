//! `rerun.json`: what a run that reran the failures of another
//! (`testkit-runner run --last-failed`, `--from DIR`) was asked to rerun,
//! kept in its results folder so that every report of it (the summary,
//! JUnit, report.html, CTRF) says which run it reran and how many of
//! those tests now pass.
//!
//! ```json
//! {"run_id":"b","of_runs":["a"],"from":"/…/runs/a","tests":[{"binary":"api","name":"api::create","was":"failed"}]}
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};
use testkit_engine::report::{Outcome, TestRecord};

/// The file in a results folder.
pub(crate) const FILE: &str = "rerun.json";

/// Why a test was rerun: what it was in the run it is rerun from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Was {
    /// It failed (or passed pinned to a known issue).
    Failed,
    /// Its process was killed before it ended, or crashed.
    Killed,
    /// It never ran: the run was interrupted, or its tests never started.
    NotRun,
}

impl Was {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Was::Failed => "failed",
            Was::Killed => "killed",
            Was::NotRun => "not_run",
        }
    }
}

/// One test to rerun.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RerunTest {
    pub(crate) binary: String,
    pub(crate) name: String,
    pub(crate) was: Was,
}

/// What a run reran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rerun {
    /// The run that reran them.
    pub(crate) run_id: String,
    /// The runs whose tests it reran (several for a merged folder).
    pub(crate) of_runs: Vec<String>,
    /// The folder they were read from.
    pub(crate) from: String,
    /// The tests it was asked to rerun; empty when it reran every test
    /// (the run it reran ran none).
    pub(crate) tests: Vec<RerunTest>,
}

/// How the tests a run reran came out in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Came {
    /// Passed now (or failed as a known issue documents).
    pub(crate) pass: usize,
    /// Failed again.
    pub(crate) fail: usize,
    /// Skipped, or no record of them at all (renamed or removed since,
    /// or the run stopped before them).
    pub(crate) not_run: usize,
}

impl Rerun {
    /// Writes `<results>/rerun.json`.
    pub(crate) fn write(&self, results_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(results_dir.join(FILE), text)
    }

    /// The rerun of `run_id` that its results folder records, if it was one.
    pub(crate) fn read(results_dir: &Path, run_id: &str) -> Option<Rerun> {
        let text = std::fs::read_to_string(results_dir.join(FILE)).ok()?;
        serde_json::from_str::<Rerun>(&text)
            .ok()
            .filter(|r| r.run_id == run_id)
    }

    /// `run a in /…/runs/a`, `runs a, b in /…/merged`.
    pub(crate) fn source(&self) -> String {
        let runs = match self.of_runs.as_slice() {
            [] => "a run".to_owned(),
            [one] => format!("run {one}"),
            many => format!("runs {}", many.join(", ")),
        };
        format!("{runs} in {}", self.from)
    }

    /// How the tests it reran came out in `records` (the new run's).
    pub(crate) fn came(&self, records: &[TestRecord]) -> Came {
        let mut came = Came::default();
        for t in &self.tests {
            let record = records
                .iter()
                .find(|r| r.binary == t.binary && r.name == t.name);
            match record.map(|r| r.outcome) {
                Some(o) if o.fails() => came.fail += 1,
                Some(Outcome::Passed | Outcome::ExpectedFailure) => came.pass += 1,
                _ => came.not_run += 1,
            }
        }
        came
    }

    /// The line every report of the run has: `rerun of run a in DIR: 3
    /// tests (3 failed): 2 now pass, 1 fails again`.
    pub(crate) fn line(&self, records: &[TestRecord]) -> String {
        if self.tests.is_empty() {
            return format!(
                "rerun of {}: it ran no test, so every test was run again",
                self.source()
            );
        }
        let came = self.came(records);
        let mut was: Vec<String> = Vec::new();
        for w in [Was::Failed, Was::Killed, Was::NotRun] {
            let n = self.tests.iter().filter(|t| t.was == w).count();
            if n > 0 {
                was.push(format!("{n} {}", w.as_str().replace('_', " ")));
            }
        }
        let mut now = vec![format!("{} now pass", came.pass)];
        if came.fail > 0 {
            now.push(format!("{} fail again", came.fail));
        }
        if came.not_run > 0 {
            now.push(format!(
                "{} did not run (renamed or removed since, or the run stopped before them)",
                came.not_run
            ));
        }
        format!(
            "rerun of {}: {} tests ({}): {}",
            self.source(),
            self.tests.len(),
            was.join(", "),
            now.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_was_rerun_and_how_it_came_out() {
        let rerun = Rerun {
            run_id: "b".into(),
            of_runs: vec!["a".into()],
            from: "/r/a".into(),
            tests: vec![
                RerunTest {
                    binary: "x".into(),
                    name: "x::one".into(),
                    was: Was::Failed,
                },
                RerunTest {
                    binary: "x".into(),
                    name: "x::two".into(),
                    was: Was::Killed,
                },
                RerunTest {
                    binary: "x".into(),
                    name: "x::gone".into(),
                    was: Was::Failed,
                },
            ],
        };
        let one = TestRecord::new("b", "x", "x::one");
        let mut two = TestRecord::new("b", "x", "x::two");
        two.fail(testkit_engine::report::FailureKind::Error, "no".into());
        assert_eq!(
            rerun.line(&[one, two]),
            "rerun of run a in /r/a: 3 tests (2 failed, 1 killed): 1 now pass, 1 fail again, \
             1 did not run (renamed or removed since, or the run stopped before them)"
        );
    }
}
