//! The tests phase: build the suite (a build failure leaves the compiler's
//! output in `build.log`), run it under `cargo nextest run`, `cargo test`, or
//! from a nextest archive, with progress on a terminal, then count the
//! outcomes from testkit's per-test records, cross-checked with what the test
//! engine said.
//!
//! Under nextest the runner lists the tests first (`cargo nextest list`, which
//! is also the build) and follows the run's libtest-json events, so a test
//! that left no record (its process crashed or was killed) is named and
//! counted as a failure, and progress shows `done/total`. Under `cargo test`
//! only the exit code can reveal a crashed binary.
//!
//! - `build`: building the suite and starting the test command;
//! - `events`: following the command and its test events until it exits;
//! - `capped`: the bounds on what the runner holds and keeps of the output;
//! - `records`: reading the records, and writing those the tests never did;
//! - `progress`: the progress line on a terminal.

mod build;
mod capped;
mod events;
mod progress;
mod records;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use testkit_engine::config::FlakyPolicy;
use testkit_engine::report::{FailureCategory, KnownIssues, Summary};

use super::signal::Interrupt;
use crate::verdict::{PhaseResult, Verdict};
pub(crate) use progress::{clear_progress, progress_line};

/// The engine that runs the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Engine {
    /// `cargo nextest run` (or a nextest archive).
    Nextest,
    /// `cargo test`.
    CargoTest,
}

pub(crate) struct TestsSpec<'a> {
    pub(crate) suite_dir: &'a Path,
    pub(crate) results_dir: &'a Path,
    pub(crate) run_id: &'a str,
    pub(crate) engine: Engine,
    pub(crate) archive: Option<&'a Path>,
    pub(crate) filters: &'a [String],
    pub(crate) partition: Option<&'a str>,
    pub(crate) extra: &'a [String],
    pub(crate) env: Vec<(String, OsString)>,
    pub(crate) show_output: bool,
    /// The run's secrets dir: its ledger names the credentials the test
    /// processes obtained, to redact before anything is written.
    pub(crate) secrets_dir: &'a Path,
    /// `[suite] flaky`: whether a test that passed on a retry fails the run.
    pub(crate) flaky: FlakyPolicy,
    /// `[suite] retries`: nextest's `--retries`, unless the run's own
    /// arguments give one.
    pub(crate) retries: u32,
}

/// What the tests phase found.
pub(crate) struct TestsOutcome {
    pub(crate) result: PhaseResult,
    /// The run could not complete (build failed, the engine did not start).
    pub(crate) incomplete: bool,
    pub(crate) summary: Option<Summary>,
    /// `binary::name` and the first line of why, for every failed test.
    pub(crate) failures: Vec<crate::summary::FailedTest>,
    /// The suite's test binaries, as nextest listed them: what sweeps the
    /// suite's Rust resource kinds.
    pub(crate) binaries: Vec<std::path::PathBuf>,
}

/// A test nextest lists, and what its events said.
#[derive(Debug, Default, Clone)]
struct Listed {
    binary_id: String,
    binary: String,
    binary_path: Option<std::path::PathBuf>,
    name: String,
    event: Option<String>,
    /// When nextest said it started, and when its result came (ms since
    /// the Unix epoch).
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
    /// The attempt nextest's last event was of (`name#2` is a retry's): 1
    /// when it named none.
    attempt: u32,
}

/// Why the tests phase could not complete: its evidence, written with its
/// causes ([`testkit_engine::error_chain`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TestsIncomplete {
    #[error("failed to start cargo")]
    StartCargo(#[source] std::io::Error),
    #[error("interrupted while building the suite")]
    InterruptedBuilding,
    #[error("the suite did not build ({status}): {last}; compiler output in {}", log.display())]
    Build {
        status: String,
        last: String,
        log: std::path::PathBuf,
    },
    #[error("cannot read `cargo nextest list`")]
    NextestList(#[source] NextestListError),
    #[error("cannot read the test binary {}", exe.display())]
    ReadBinary {
        exe: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to list the tests of {}", exe.display())]
    ListBinary {
        exe: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{} --list` failed ({status})", exe.display())]
    ListFailed {
        exe: std::path::PathBuf,
        status: String,
    },
    #[error("failed to start the test command")]
    StartTests(#[source] std::io::Error),
    #[error("failed to wait for the test command")]
    WaitTests(#[source] std::io::Error),
    #[error("cannot read the test records")]
    Records(#[source] testkit_engine::report::ReportError),
    #[error("cannot read the tests' starts")]
    Starts(#[source] testkit_engine::report::ReportError),
}

/// `cargo nextest list`'s output is not what the runner reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NextestListError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("no `rust-suites` in its output")]
    NoSuites,
}

pub(crate) async fn run_tests(spec: &TestsSpec<'_>, interrupt: &mut Interrupt) -> TestsOutcome {
    let started = Instant::now();
    // A tests phase that could not complete is no product's failure: no
    // test of it judged the product. The infrastructure's (a command
    // that would not start, an interruption, a file that could not be
    // written or read), unless the suite itself did not build.
    let incomplete_as = |evidence: String, category: FailureCategory| {
        let mut result = PhaseResult::new("tests", Verdict::Fail, evidence, started.elapsed());
        result.category = Some(category);
        TestsOutcome {
            result,
            incomplete: true,
            summary: None,
            failures: Vec::new(),
            binaries: Vec::new(),
        }
    };
    let incomplete = |evidence: String| incomplete_as(evidence, FailureCategory::Infrastructure);

    let listed = match build::build(spec, interrupt).await {
        Ok(listed) => listed,
        Err(e) => {
            let category = match e {
                TestsIncomplete::Build { .. } | TestsIncomplete::NextestList(_) => {
                    FailureCategory::Testkit
                }
                _ => FailureCategory::Infrastructure,
            };
            return incomplete_as(testkit_engine::error_chain(&e), category);
        }
    };
    clear_progress();
    if interrupt.requested() {
        return incomplete("interrupted before the tests started".to_owned());
    }

    let tests_log = spec.results_dir.join("tests.log");
    let log = match capped::CappedLog::create(&tests_log, &events::log_header(spec.engine)) {
        Ok(log) => log,
        Err(e) => return incomplete(format!("cannot create {}: {e}", tests_log.display())),
    };
    // The run's browser is the runner's to end, and its watchdog's should
    // the runner die: both know where it will be before a test starts it.
    let browser_dir = testkit_engine::browser::dir(spec.results_dir);
    if let Err(e) = testkit_engine::browser::announce(spec.results_dir) {
        return incomplete(format!(
            "cannot prepare the run's browser folder {}: {e}",
            browser_dir.display()
        ));
    }
    super::watch::tell_browser(spec.run_id, &browser_dir);
    let mut child = match build::start(spec) {
        Ok(child) => child,
        Err(e) => return incomplete(testkit_engine::error_chain(&e)),
    };
    // SIGUSR1 asks these processes what their tests are doing.
    let _running = super::status::tests_running(
        spec.run_id,
        spec.results_dir,
        listed
            .iter()
            .flatten()
            .filter_map(|t| t.binary_path.clone())
            .collect(),
    );
    let progress = events::Progress {
        total: listed
            .as_ref()
            .map(|l| l.iter().filter(|t| t.event.is_none()).count()),
        started,
    };
    let mut listed = listed.unwrap_or_default();
    let followed = match events::follow(
        spec,
        &mut child,
        Some(log),
        progress,
        &mut listed,
        interrupt,
    )
    .await
    {
        Ok(f) => f,
        Err(e) => {
            let evidence = testkit_engine::error_chain(&e);
            // No test runs any more: neither does the browser they shared.
            let ended =
                testkit_engine::browser::end(&browser_dir, spec.run_id, BROWSER_GRACE).await;
            return incomplete(match ended {
                Ok(_) => evidence,
                Err(e) => format!("{evidence}; {e}"),
            });
        }
    };
    // The test processes may have obtained credentials the runner never
    // saw (renewals): known from here on, before JUnit, the summary and the
    // pod's logs are written, and redacted from the engine's output.
    testkit_engine::redact::register_recorded(spec.secrets_dir);
    capped::redact_lines(&tests_log);
    capped::redact_lines(&events::events_file(spec.results_dir));

    // A killed test process's reaper may still be undoing its faults or
    // deleting its resources: its records, the residue sweep and the
    // pod's teardown would judge a pod it is still working on.
    let reapers_left = wait_for_reapers(spec.results_dir, interrupt).await;
    // The tests are over: so is the browser they shared.
    let browser_left = testkit_engine::browser::end(&browser_dir, spec.run_id, BROWSER_GRACE).await;
    let records = match records::complete(spec, &listed, followed.interrupted) {
        Ok(r) => r,
        Err(e) => return incomplete(testkit_engine::error_chain(&e)),
    };
    // The binaries of tests that ran: one of them sweeps the Rust kinds, and
    // a binary listed for its ignored tests only may be a plain libtest one.
    let mut binaries: Vec<std::path::PathBuf> = listed
        .iter()
        .filter(|t| t.event.as_deref() != Some("ignored"))
        .filter_map(|t| t.binary_path.clone())
        .collect();
    binaries.sort();
    binaries.dedup();
    let mut out = TestsOutcome {
        binaries,
        ..outcome(spec, &records, &followed, &tests_log, started)
    };
    if let Err(e) = browser_left {
        out.result.verdict = Verdict::Fail;
        out.result.evidence.push_str(&format!("; {e}"));
    }
    if !reapers_left.is_empty() {
        out.result.verdict = Verdict::Fail;
        out.result.evidence.push_str(&format!(
            "; {} reaper(s) of killed test processes still ran {} after the tests ended: \
             what they had not undone or deleted is judged by the residue sweep and the \
             teardown as it is (their locks: {})",
            reapers_left.len(),
            humantime::format_duration(REAPER_WAIT),
            reapers_left
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// How long the run's browser gets to exit after SIGTERM.
const BROWSER_GRACE: Duration = Duration::from_secs(3);

/// The longest the run waits for the reapers of killed test processes:
/// each undoes and proves a fault within 30 s, and deletes resources
/// within their kinds' bounds.
const REAPER_WAIT: Duration = Duration::from_secs(120);

/// Waits until no reaper of the run's test processes runs, within
/// [`REAPER_WAIT`] or until a signal the run has not seen yet, saying so
/// while it waits; the reapers still running.
async fn wait_for_reapers(results_dir: &Path, interrupt: &mut Interrupt) -> Vec<PathBuf> {
    use testkit_engine::resource::reapers::live_reapers;
    let mut live = live_reapers(results_dir);
    if live.is_empty() {
        return live;
    }
    eprintln!(
        "tests: waiting for {} reaper(s) of killed test processes to finish (at most {})",
        live.len(),
        humantime::format_duration(REAPER_WAIT)
    );
    let deadline = Instant::now() + REAPER_WAIT;
    let seen = interrupt.count();
    while !live.is_empty() && Instant::now() < deadline {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = interrupt.more_than(seen) => {
                eprintln!("tests: interrupted: the residue sweep and the teardown go on without the reapers");
                break;
            }
        }
        live = live_reapers(results_dir);
    }
    live
}

/// The tests phase's verdict from the records: the counts, the known
/// issues, `junit.xml`, and every reason not to pass, which the engine's
/// exit status is one of.
fn outcome(
    spec: &TestsSpec<'_>,
    records::Records {
        records,
        crashed,
        unlisted,
    }: &records::Records,
    followed: &events::Followed,
    tests_log: &Path,
    started: Instant,
) -> TestsOutcome {
    let events::Followed {
        status,
        interrupted,
    } = *followed;
    // What keeps the run from a verdict at all: it could not complete.
    let mut unfinished = Vec::new();
    // A KNOWN-ISSUES.md the suite has is valid or an error naming its line;
    // without it, no expected failure can be judged.
    let known = match KnownIssues::load(spec.suite_dir) {
        Ok(known) => Some(known),
        Err(e) => {
            unfinished.push(e.to_string());
            None
        }
    };
    let summary = Summary::from_records(records, known.as_ref());
    // Test processes write records only; JUnit is built here, once. A JUnit
    // file the run promised and could not write fails it.
    if let Err(e) = crate::junit::write_junit_files(spec.results_dir, spec.run_id, records) {
        unfinished.push(e.to_string());
    }
    let findings = Findings::of(spec, &summary, crashed, interrupted);
    let engine = engine_name(spec);
    let mut problems = findings.problems(summary.total() == 0);
    let green = summary.is_green() && findings.known_bad.is_empty() && !findings.flaky_fails;
    if !status.success() && green && crashed.is_empty() && !interrupted {
        problems.push(format!(
            "{engine} {} though every test record is green: a test binary crashed or the command failed; see {}",
            describe_status(status),
            tests_log.display()
        ));
    }
    if !unlisted.is_empty() {
        problems.push(format!(
            "records of tests the run did not list (a process outside the run's tests wrote them, \
             or a test's name changed under the run): {}",
            unlisted.join(", ")
        ));
    }
    problems.extend(unfinished.iter().cloned());
    let ok = green && problems.is_empty();
    let mut evidence = format!(
        "{} ({engine}, {})",
        summary.counts(),
        describe_status(status)
    );
    if !findings.flaky.is_empty() && !findings.flaky_fails {
        // A pass, loudly: which tests needed a retry, and that the suite
        // lets them pass.
        evidence.push_str(&format!(
            "; flaky, passed on a retry: {} (the run passes with them: [suite] flaky = \"pass\")",
            findings.flaky.join(", ")
        ));
    }
    if !problems.is_empty() {
        evidence.push_str("; ");
        evidence.push_str(&problems.join("; "));
    }
    let verdict = if ok { Verdict::Pass } else { Verdict::Fail };
    TestsOutcome {
        result: PhaseResult::new("tests", verdict, evidence, started.elapsed()),
        incomplete: !unfinished.is_empty(),
        summary: Some(summary),
        failures: crate::summary::FailedTest::of(records),
        binaries: Vec::new(),
    }
}

/// The engine that ran the tests, as the evidence names it.
fn engine_name(spec: &TestsSpec<'_>) -> &'static str {
    match (spec.engine, spec.archive) {
        (Engine::Nextest, Some(_)) => "nextest archive",
        (Engine::Nextest, None) => "nextest",
        (Engine::CargoTest, _) => "cargo test",
    }
}

/// What the records say besides the counts, each a reason the run may fail.
struct Findings<'a> {
    interrupted: bool,
    crashed: &'a [String],
    /// Known issues in a state that fails the run, each described.
    known_bad: Vec<String>,
    /// Tests that passed on a retry, each described.
    flaky: Vec<String>,
    /// Whether the suite lets no flaky test pass.
    flaky_fails: bool,
}

impl<'a> Findings<'a> {
    fn of(
        spec: &TestsSpec<'_>,
        summary: &Summary,
        crashed: &'a [String],
        interrupted: bool,
    ) -> Findings<'a> {
        let known_bad: Vec<String> = summary
            .known_issues
            .iter()
            .filter(|k| k.state.fails_run())
            .map(|k| format!("{} {}", k.id, k.state.describe()))
            .collect();
        let flaky: Vec<String> = summary
            .flaky
            .iter()
            .map(|f| format!("{} ({})", f.test, f.describe()))
            .collect();
        let flaky_fails = spec.flaky == FlakyPolicy::Fail && !flaky.is_empty();
        Findings {
            interrupted,
            crashed,
            known_bad,
            flaky,
            flaky_fails,
        }
    }

    /// The reasons found in the records not to pass, in the order the
    /// evidence gives them.
    fn problems(&self, no_test_ran: bool) -> Vec<String> {
        let mut problems = Vec::new();
        if self.interrupted {
            problems.push("interrupted".to_owned());
        }
        if !self.crashed.is_empty() {
            problems.push(format!(
                "no record (its process exited early, crashed or was killed): {}",
                self.crashed.join(", ")
            ));
        }
        if !self.known_bad.is_empty() {
            problems.push(format!("known issues: {}", self.known_bad.join("; ")));
        }
        if no_test_ran && !self.interrupted {
            problems.push("no test ran".to_owned());
        }
        if self.flaky_fails {
            problems.push(format!(
                "flaky tests fail the run ([suite] flaky = \"fail\"): {}",
                self.flaky.join(", ")
            ));
        }
        problems
    }
}

pub(crate) fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}
