//! The run's summary: counts by outcome, and every known issue with its state.

use std::collections::BTreeMap;
use std::fmt;

use super::known_issues::KnownIssues;
use super::{
    CleanupState, FailureKind, LeftoverProcess, LockMode, LockRecord, Outcome, TestRecord,
};

/// What became of a known issue in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum KnownIssueState {
    /// An intermittent known issue whose pinned tests passed this run: it
    /// did not show, which does not mean it is fixed.
    NotReproduced,
    /// Every pinned test failed as documented: the bug is still there.
    FailingAsDocumented,
    /// No pinned test ran (all skipped).
    NotRun,
    /// No test of the run pins it: run the check over the sources to tell
    /// whether the entry is stale.
    NotPinned,
    /// A pinned test passed: the bug appears fixed, and the marker and the
    /// `KNOWN-ISSUES.md` entry must go.
    Fixed,
    /// A pinned test failed, but not with the documented failure.
    FailingDifferently,
    /// Tests pin the id but `KNOWN-ISSUES.md` does not list it, or cannot
    /// be read or parsed.
    Unlisted,
}

impl KnownIssueState {
    /// Short words for the summary.
    pub fn describe(self) -> &'static str {
        match self {
            KnownIssueState::NotReproduced => {
                "intermittent: not reproduced this run (its tests passed)"
            }
            KnownIssueState::FailingAsDocumented => "still failing as documented",
            KnownIssueState::NotRun => "not run (its tests were skipped)",
            KnownIssueState::NotPinned => "pinned by no test of this run",
            KnownIssueState::Fixed => {
                "appears fixed: remove the marker and the KNOWN-ISSUES.md entry"
            }
            KnownIssueState::FailingDifferently => {
                "failing differently from the documented failure"
            }
            // Also when the file is there but cannot be read or parsed:
            // then the id may well be listed, and the failure says what.
            KnownIssueState::Unlisted => {
                "not checked: KNOWN-ISSUES.md does not list it, or cannot be read (its tests' failures say which)"
            }
        }
    }

    /// Whether this state fails the run.
    pub fn fails_run(self) -> bool {
        matches!(
            self,
            KnownIssueState::Fixed
                | KnownIssueState::FailingDifferently
                | KnownIssueState::Unlisted
        )
    }
}

/// One known issue in a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KnownIssueSummary {
    /// The id.
    pub id: String,
    /// The title in `KNOWN-ISSUES.md`, when listed.
    pub title: Option<String>,
    /// The issue's state: the worst of its tests' states.
    pub state: KnownIssueState,
    /// The tests pinned to it (binary and name), each with its own state.
    pub tests: Vec<(String, KnownIssueState)>,
}

/// A flaky test in a [`Summary`]: it failed, and passed (or failed as its
/// known issue documents) when nextest retried it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlakyTest {
    /// `binary::name`.
    pub test: String,
    /// What its last attempt came to (it counts as that).
    pub outcome: Outcome,
    /// How many of its attempts failed.
    pub failed_attempts: u32,
    /// How many attempts it took.
    pub attempts: u32,
}

impl FlakyTest {
    /// `failed 1 of 2 attempts`.
    pub fn describe(&self) -> String {
        format!(
            "failed {} of {} attempts",
            self.failed_attempts, self.attempts
        )
    }
}

/// Counts by outcome, and known issues with their state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed (cleanup failures and known-issue mismatches included).
    pub failed: usize,
    /// Tests skipped, statically or at run time.
    pub skipped: usize,
    /// Tests pinned to a known issue that failed as documented.
    pub expected_failures: usize,
    /// Tests pinned to a known issue that passed.
    pub unexpected_passes: usize,
    /// Of the failed tests, those whose cleanup failed.
    pub cleanup_failures: usize,
    /// Tests (`binary::name`) whose cleanup found a resource already gone:
    /// something else deleted it before cleanup did (`gone_before_delete`).
    pub gone_before_delete: Vec<String>,
    /// Every known issue pinned by a test or listed in `KNOWN-ISSUES.md`,
    /// sorted by id.
    pub known_issues: Vec<KnownIssueSummary>,
    /// Tests that opened a browser.
    pub browser_tests: usize,
    /// Screenshots those tests saved.
    pub screenshots: usize,
    /// Tests whose browser outlived its teardown cap and was killed.
    pub browser_teardowns_timed_out: usize,
    /// Flaky tests (each also counted by its last attempt's outcome), sorted.
    pub flaky: Vec<FlakyTest>,
    /// Every process a test left running, with the test (`binary::name`).
    pub leftover_processes: Vec<(String, LeftoverProcess)>,
    /// Tests that held the pod to themselves (`#[testkit::test(exclusive)]`)
    /// in at least one attempt.
    pub exclusive_tests: usize,
    /// How long they held it, every attempt's hold added up, in milliseconds.
    pub exclusive_held_ms: u64,
}

impl Summary {
    /// `exclusive: 2 tests held the pod to themselves for 1s 204ms in
    /// total`, when any did.
    pub fn exclusive_line(&self) -> Option<String> {
        if self.exclusive_tests == 0 {
            return None;
        }
        let held = std::time::Duration::from_millis(self.exclusive_held_ms);
        Some(format!(
            "exclusive: {} test{} held the pod to themselves for {} in total",
            self.exclusive_tests,
            if self.exclusive_tests == 1 { "" } else { "s" },
            humantime::format_duration(held)
        ))
    }

    /// One line per process a test left running: the test, the pid, the
    /// command and what became of it.
    pub fn leftover_lines(&self) -> Vec<String> {
        self.leftover_processes
            .iter()
            .map(|(test, p)| {
                format!(
                    "{test} left pid {} running (`{}`): {}",
                    p.pid,
                    p.command,
                    p.fate.as_str()
                )
            })
            .collect()
    }
}

impl Summary {
    /// Summarizes records (deduplicated by binary and name, the latest start
    /// winning) against the suite's known issues, when given.
    pub fn from_records(records: &[TestRecord], known: Option<&KnownIssues>) -> Summary {
        let mut summary = Summary::default();
        let mut issues: BTreeMap<String, KnownIssueSummary> = BTreeMap::new();
        for record in latest_attempts(records).values() {
            summary.count(record);
            let Some(id) = &record.known_issue else {
                continue;
            };
            let status = issues
                .entry(id.clone())
                .or_insert_with(|| KnownIssueSummary {
                    id: id.clone(),
                    title: None,
                    state: KnownIssueState::FailingAsDocumented,
                    tests: Vec::new(),
                });
            status.tests.push((
                format!("{}::{}", record.binary, record.name),
                pinned_state(record),
            ));
        }
        for status in issues.values_mut() {
            status.state = worst_state(&status.tests);
        }
        if let Some(known) = known {
            add_listed(&mut issues, known);
        }
        summary.known_issues = issues.into_values().collect();
        summary
    }

    /// Counts one test's (latest) record: its outcome, its cleanup, its
    /// browsers, the processes it left and whether it was flaky.
    fn count(&mut self, record: &TestRecord) {
        match record.outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Failed => self.failed += 1,
            Outcome::Skipped => self.skipped += 1,
            Outcome::ExpectedFailure => self.expected_failures += 1,
            Outcome::UnexpectedPass => self.unexpected_passes += 1,
        }
        if record.failure_kind == Some(FailureKind::Cleanup) {
            self.cleanup_failures += 1;
        }
        if record.cleanup == CleanupState::GoneBeforeDelete {
            self.gone_before_delete
                .push(format!("{}::{}", record.binary, record.name));
        }
        if record.browsers > 0 {
            self.browser_tests += 1;
        }
        self.screenshots += record.screenshots.len();
        if record.browser_teardown_timed_out {
            self.browser_teardowns_timed_out += 1;
        }
        for p in &record.leftover_processes {
            self.leftover_processes
                .push((format!("{}::{}", record.binary, record.name), p.clone()));
        }
        let exclusive: Vec<&LockRecord> = std::iter::once(record.lock.as_ref())
            .chain(record.attempts.iter().map(|a| a.lock.as_ref()))
            .flatten()
            .filter(|lock| lock.mode == LockMode::Exclusive)
            .collect();
        if !exclusive.is_empty() {
            self.exclusive_tests += 1;
            self.exclusive_held_ms += exclusive.iter().map(|l| l.held_ms()).sum::<u64>();
        }
        if record.is_flaky() {
            let attempts = record.total_attempts();
            self.flaky.push(FlakyTest {
                test: format!("{}::{}", record.binary, record.name),
                outcome: record.outcome,
                failed_attempts: record.failed_attempts().count() as u32,
                attempts,
            });
        }
    }

    /// Every test counted.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.skipped + self.expected_failures + self.unexpected_passes
    }

    /// No test failed and no known issue passed. Flaky tests are green
    /// here; whether they fail a run is the suite's `[suite] flaky`.
    pub fn is_green(&self) -> bool {
        self.failed == 0 && self.unexpected_passes == 0
    }

    /// `4 passed (1 flaky), 0 failed, 1 skipped, 1 expected failures, 0
    /// unexpected passes`: a count of flaky tests follows the outcome their
    /// last attempt counts as, when there are any.
    pub fn counts(&self) -> String {
        let flaky = |outcome: Outcome| {
            let n = self.flaky.iter().filter(|f| f.outcome == outcome).count();
            if n == 0 {
                String::new()
            } else {
                format!(" ({n} flaky)")
            }
        };
        format!(
            "{} passed{}, {} failed, {} skipped{}, {} expected failures{}, {} unexpected passes",
            self.passed,
            flaky(Outcome::Passed),
            self.failed,
            self.skipped,
            flaky(Outcome::Skipped),
            self.expected_failures,
            flaky(Outcome::ExpectedFailure),
            self.unexpected_passes
        )
    }
}

/// The record of each test (by binary and name) that counts: its latest
/// attempt, the latest start winning.
fn latest_attempts(records: &[TestRecord]) -> BTreeMap<(&str, &str), &TestRecord> {
    let mut latest: BTreeMap<(&str, &str), &TestRecord> = BTreeMap::new();
    for record in records {
        let slot = latest
            .entry((&record.binary, &record.name))
            .or_insert(record);
        if (record.attempt, record.started_at_ms) > (slot.attempt, slot.started_at_ms) {
            *slot = record;
        }
    }
    latest
}

/// The state of the known issue a test pins, as this test shows it.
fn pinned_state(record: &TestRecord) -> KnownIssueState {
    match (record.outcome, record.failure_kind) {
        (_, Some(FailureKind::KnownIssueUnlisted)) => KnownIssueState::Unlisted,
        (Outcome::ExpectedFailure, _) => KnownIssueState::FailingAsDocumented,
        (Outcome::UnexpectedPass, _) => KnownIssueState::Fixed,
        (Outcome::Skipped, _) => KnownIssueState::NotRun,
        (Outcome::Passed, _) if record.intermittent => KnownIssueState::NotReproduced,
        // A cleanup failure hides the body's outcome; a mismatch is
        // the documented failure's absence either way.
        (Outcome::Failed, _) | (Outcome::Passed, _) => KnownIssueState::FailingDifferently,
    }
}

/// An issue's state from its tests': not run if none ran, else the worst of
/// those that ran.
fn worst_state(tests: &[(String, KnownIssueState)]) -> KnownIssueState {
    let states = tests.iter().map(|(_, s)| *s);
    if states.clone().all(|s| s == KnownIssueState::NotRun) {
        KnownIssueState::NotRun
    } else {
        states
            .filter(|s| *s != KnownIssueState::NotRun)
            .max()
            .unwrap_or(KnownIssueState::NotRun)
    }
}

/// Gives every issue `KNOWN-ISSUES.md` lists its title, adding those no
/// test pins.
fn add_listed(issues: &mut BTreeMap<String, KnownIssueSummary>, known: &KnownIssues) {
    for entry in known.entries() {
        let status = issues
            .entry(entry.id.clone())
            .or_insert_with(|| KnownIssueSummary {
                id: entry.id.clone(),
                title: None,
                state: KnownIssueState::NotPinned,
                tests: Vec::new(),
            });
        status.title = Some(entry.title.clone());
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} tests: {}", self.total(), self.counts())?;
        for flaky in &self.flaky {
            writeln!(f, "flaky: {}: {}", flaky.test, flaky.describe())?;
        }
        if self.cleanup_failures > 0 {
            writeln!(
                f,
                "{} tests failed their cleanup: resources may have leaked",
                self.cleanup_failures
            )?;
        }
        for line in self.leftover_lines() {
            writeln!(f, "LEFT RUNNING: {line}")?;
        }
        if let Some(line) = self.exclusive_line() {
            writeln!(f, "{line}")?;
        }
        if !self.known_issues.is_empty() {
            writeln!(f, "known issues:")?;
        }
        for issue in &self.known_issues {
            let title = issue
                .title
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            writeln!(f, "  {}{title}: {}", issue.id, issue.state.describe())?;
            for (test, state) in &issue.tests {
                if *state != issue.state || issue.tests.len() > 1 {
                    writeln!(f, "    {test}: {}", state.describe())?;
                }
            }
        }
        Ok(())
    }
}
