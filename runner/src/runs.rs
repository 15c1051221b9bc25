//! Which run a report is about. A results folder reused by several runs (a
//! fixed `TESTKIT_RESULTS_DIR`, `run --results DIR` twice) holds the records
//! of each; a report is about one run, and names it: `junit.xml` is named
//! after it, `report` prints it, the page shows it.
//!
//! The latest run is the one whose tests were last active: the latest end
//! (start plus duration) of its records and the latest entry of its
//! journal. Every record of a test that ran has its start (the runner's
//! own, for a test whose process died, included); a statically ignored
//! test's is 0, and counts for nothing. When two runs are equally late
//! (none of their tests ran), nothing says which is the latest: `report`
//! refuses, naming the runs, and `--run ID` picks one.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use testkit_engine::report::{
    fold_attempts, read_records, read_starts, ReportError, TestRecord, TestStart,
};
use testkit_engine::resource::{read_journal, JournalEntry};

use crate::seal::SealCheck;

/// One run of a results folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOf {
    /// Its id.
    pub id: String,
    /// When its tests were last active, in ms since the Unix epoch (0 when
    /// none ran).
    pub last_ms: u64,
}

/// The runs `records`, `journal` and `starts` know of, the latest first
/// (ties by id, so that the order is the same on every reading).
pub fn runs_of(
    records: &[TestRecord],
    journal: &[JournalEntry],
    starts: &[TestStart],
) -> Vec<RunOf> {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for r in records {
        let end = if r.started_at_ms == 0 {
            0
        } else {
            r.started_at_ms + r.duration_ms
        };
        let slot = last.entry(&r.run_id).or_default();
        *slot = (*slot).max(end);
    }
    // A run whose only tests were killed has nothing but its journal.
    for e in journal.iter().filter(|e| !e.test.is_empty()) {
        let slot = last.entry(&e.run).or_default();
        *slot = (*slot).max(e.time);
    }
    // A run whose only tests never ended has nothing but their starts.
    for start in starts {
        let slot = last.entry(&start.run_id).or_default();
        *slot = (*slot).max(start.at_ms);
    }
    let mut runs: Vec<RunOf> = last
        .into_iter()
        .map(|(id, last_ms)| RunOf {
            id: id.to_owned(),
            last_ms,
        })
        .collect();
    runs.sort_by(|a, b| b.last_ms.cmp(&a.last_ms).then_with(|| a.id.cmp(&b.id)));
    runs
}

/// Why no run could be chosen.
#[derive(Debug)]
pub enum RunChoiceError {
    /// The folder could not be read.
    Report(ReportError),
    /// `--run ID` names a run the folder does not hold.
    NoSuchRun {
        /// The folder.
        dir: String,
        /// The run asked for.
        wanted: String,
        /// The runs it holds.
        runs: Vec<RunOf>,
    },
    /// Several runs are equally late: nothing says which to report.
    Undecided {
        /// The folder.
        dir: String,
        /// The runs it holds.
        runs: Vec<RunOf>,
    },
}

impl From<ReportError> for RunChoiceError {
    fn from(e: ReportError) -> RunChoiceError {
        RunChoiceError::Report(e)
    }
}

/// `a (tests last active 2026-12-01T19:30:07Z), b (no test ran)`.
pub fn describe_runs(runs: &[RunOf]) -> String {
    runs.iter()
        .map(|r| {
            if r.last_ms == 0 {
                format!("{} (no test ran)", r.id)
            } else {
                let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.last_ms);
                format!(
                    "{} (tests last active {})",
                    r.id,
                    humantime::format_rfc3339_seconds(at)
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for RunChoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunChoiceError::Report(e) => e.fmt(f),
            RunChoiceError::NoSuchRun { dir, wanted, runs } => write!(
                f,
                "{dir} holds no records of run {wanted}; it holds {}: pass one of them to --run",
                describe_runs(runs)
            ),
            RunChoiceError::Undecided { dir, runs } => write!(
                f,
                "{dir} holds the records of several runs and none of them ran a test later than the others: {}; pass --run ID to say which to report",
                describe_runs(runs)
            ),
        }
    }
}

/// The run a report of a folder is about, and its records.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The run's id.
    pub run_id: String,
    /// Its records.
    pub records: Vec<TestRecord>,
    /// The folder's other runs, the latest first.
    pub others: Vec<RunOf>,
    /// Whether it is the folder's latest run.
    pub latest: bool,
    /// What the run's seal says of the folder (unchecked until the run's
    /// records are completed, see [`complete`]).
    pub seal: SealCheck,
}

impl Chosen {
    /// What a report says of the run it is about, and of the others.
    pub fn describe(&self, dir: &Path) -> String {
        let mut text = format!("report of run {} in {}", self.run_id, dir.display());
        if !self.others.is_empty() {
            let which = if self.latest { "older" } else { "other" };
            text.push_str(&format!(
                "; the folder also holds {which} runs: {}; pass --run ID to report one of them",
                describe_runs(&self.others)
            ));
        }
        text
    }
}

/// Chooses, of `records` (every record of the folder `dir`) and its
/// `journal`, the run `wanted`, else the latest.
pub fn choose(
    dir: &Path,
    records: Vec<TestRecord>,
    journal: &[JournalEntry],
    starts: &[TestStart],
    wanted: Option<&str>,
) -> Result<Chosen, RunChoiceError> {
    let mut runs = runs_of(&records, journal, starts);
    let index = match wanted {
        Some(id) => {
            runs.iter()
                .position(|r| r.id == id)
                .ok_or_else(|| RunChoiceError::NoSuchRun {
                    dir: dir.display().to_string(),
                    wanted: id.to_owned(),
                    runs: runs.clone(),
                })?
        }
        None if runs.len() > 1 && runs[0].last_ms == runs[1].last_ms => {
            return Err(RunChoiceError::Undecided {
                dir: dir.display().to_string(),
                runs,
            })
        }
        None => 0,
    };
    let run_id = if runs.is_empty() {
        String::new()
    } else {
        runs.remove(index).id
    };
    let records = records.into_iter().filter(|r| r.run_id == run_id).collect();
    Ok(Chosen {
        run_id,
        records,
        others: runs,
        latest: index == 0,
        seal: SealCheck::Unsealed,
    })
}

/// The records of the latest run of the folder `dir` (with two equally
/// late, the first by id), as [`complete`] makes them: what a merge takes
/// of each of its inputs.
pub fn latest_records(dir: &Path) -> Result<Vec<TestRecord>, ReportError> {
    let records = read_records(dir)?;
    let journal = read_journal(dir);
    let starts = read_starts(dir)?;
    let Some(latest) = runs_of(&records, &journal, &starts).into_iter().next() else {
        return Ok(records);
    };
    let mut records = records
        .into_iter()
        .filter(|r| r.run_id == latest.id)
        .collect();
    complete(dir, &latest.id, &mut records, true)?;
    Ok(records)
}

/// What every reading of a run adds to its records (`records`, of the run
/// `run_id` of the folder `dir`), so that none reads it greener than it was:
/// a failure for each test that began and never ended (the `killed`
/// module), and, when `hold_to_seal`, a failure for results changed after
/// a runner judged them (the `seal` module), whose check it returns.
pub fn complete(
    dir: &Path,
    run_id: &str,
    records: &mut Vec<TestRecord>,
    hold_to_seal: bool,
) -> Result<SealCheck, ReportError> {
    if run_id.is_empty() {
        return Ok(SealCheck::Unsealed);
    }
    let unended = crate::killed::from_journal(dir, records, run_id)?;
    if !unended.is_empty() {
        records.extend(unended);
        *records = fold_attempts(std::mem::take(records));
    }
    let seal = if hold_to_seal {
        match crate::seal::check(dir, run_id) {
            // A folder a runner sealed is never reported green from a run
            // it did not judge: that run may be forged beside it.
            SealCheck::Unsealed => {
                let sealed = crate::seal::sealed_runs(dir);
                if sealed.is_empty() {
                    SealCheck::Unsealed
                } else {
                    SealCheck::Missing(format!(
                        "run {run_id} has no seal, and the folder holds the sealed run(s) {}: \
                         a run testkit-runner did not judge is not reported from a folder it \
                         sealed; report the sealed run with --run ID, or give the run a folder \
                         of its own",
                        sealed.join(", ")
                    ))
                }
            }
            check => check,
        }
    } else {
        SealCheck::Unsealed
    };
    if let Some(failure) = seal.tampering_record(run_id) {
        records.push(failure);
    }
    Ok(seal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(run: &str, name: &str, start: u64) -> TestRecord {
        let mut r = TestRecord::new(run, "bin", name);
        r.started_at_ms = start;
        r.duration_ms = 5;
        r
    }

    #[test]
    fn the_latest_run_is_the_one_whose_tests_were_last_active() {
        let records = vec![
            rec("old", "a", 1000),
            rec("old", "b", 3000),
            // The new run's only record of a test that ran is later than
            // every record of the old; its ignored test counts for nothing.
            rec("new", "a", 4000),
            rec("new", "ignored", 0),
        ];
        let chosen = choose(Path::new("r"), records.clone(), &[], &[], None).unwrap();
        assert_eq!(chosen.run_id, "new");
        assert_eq!(chosen.records.len(), 2);
        assert_eq!(chosen.others[0].id, "old");
        assert!(chosen.describe(Path::new("r")).contains("older runs: old"));
        let old = choose(Path::new("r"), records.clone(), &[], &[], Some("old")).unwrap();
        assert_eq!((old.run_id.as_str(), old.records.len()), ("old", 2));
        assert!(old.describe(Path::new("r")).contains("other runs: new"));
        let e = choose(Path::new("r"), records, &[], &[], Some("gone")).unwrap_err();
        assert!(e.to_string().contains("old (tests last active"), "{e}");
        // Two runs none of whose tests ran: nothing says which is later.
        let e = choose(
            Path::new("r"),
            vec![rec("x", "a", 0), rec("y", "a", 0)],
            &[],
            &[],
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("pass --run ID"), "{e}");
    }
}
