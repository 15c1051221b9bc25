//! Reporting: one record per test, read and written; summaries; known issues.
//!
//! # The results folder
//!
//! ```text
//! <results>/records/<binary>/<pid>-<n>.jsonl       one TestRecord per line, one line per test, one file per test process
//! <results>/records/<binary>/ignored-<run>.jsonl   under nextest: the binary's statically ignored tests
//! <results>/records/<binary>/ignored-<run>.listed  the same, written when nextest lists the binary
//! <results>/junit/<binary>.xml                     one JUnit report per test binary
//! <results>/junit.xml                              every binary of the run
//! ```
//!
//! `<results>` is `TESTKIT_RESULTS_DIR`, else `<target>/testkit/runs/<run id>`.
//! Every test process appends its records as each test ends, and reads no
//! other process's records: what a test process does costs the same in a
//! run of 10 tests and of 10,000. JUnit is built once, from the records:
//!
//! - `testkit-runner run` builds `junit/<binary>.xml` and `junit.xml` at the
//!   end of its tests phase;
//! - after a plain `cargo test` or `cargo nextest run`,
//!   `testkit-runner report DIR` builds them.
//!
//! No test process builds JUnit: under `cargo test` that was 40% of what a
//! binary of 1,000 trivial tests cost (quick-junit strips ANSI escapes from
//! every string it is given).
//!
//! # The record (schema version 1)
//!
//! A JSON object, [`TestRecord`]; fields are only ever added, and a reader
//! accepts records of its own version or older (values are added too: the
//! `gone_before_delete` states are newer than version 1's first readers):
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `schema` | integer | [`RECORD_SCHEMA_VERSION`] |
//! | `run_id` | string | the run's id |
//! | `binary` | string | the test binary, without cargo's hash |
//! | `name` | string | the test's full name, as listed |
//! | `description` | string | the first paragraph of its doc comment |
//! | `file`, `line` | string, integer | where it is defined |
//! | `outcome` | `passed` \| `failed` \| `skipped` \| `expected_failure` \| `unexpected_pass` | |
//! | `failure_kind` | `error` \| `panic` \| `timeout` \| `cleanup` \| `known_issue_mismatch` \| `known_issue_fixed` \| `known_issue_unlisted` \| `config` \| `browser_teardown` \| `no_screenshot` \| null | why it failed |
//! | `message` | string \| null | the failure; for an expected failure, the failure observed |
//! | `skip_reason` | string \| null | why it was skipped (`ignored: <reason>` when statically ignored) |
//! | `started_at_ms` | integer | start, ms since the Unix epoch (0 when it never ran; a record the runner writes for a test that wrote none has when the test ran, as nextest or the journal saw it) |
//! | `duration_ms` | integer | body and cleanup, and the wait for the pod lock (`lock.wait_ms`) |
//! | `known_issue`, `fails_with` | string \| null | the attribute's values |
//! | `requires`, `capabilities_missing` | array of strings | pod capabilities |
//! | `resources` | array of `{kind, name, state}` | `state`: `pending`, `created`, `deleted`, `kept`, `leaked`, `gone_before_delete` (its first delete found it already gone: something else deleted it) |
//! | `cleanup` | `nothing` \| `verified` \| `kept` \| `failed` \| `gone_before_delete` | the cleanup as a whole; `gone_before_delete`: nothing leaked, but something else deleted a resource before cleanup did |
//! | `output` | string | the test's log, redacted |
//! | `browsers` | integer, default 0 | browsers the test opened |
//! | `screenshots` | array of strings, default empty | the PNG files it saved, absolute paths |
//! | `browser_teardown_timed_out` | boolean, default false | a browser outlived its teardown cap and was killed |
//! | `leftover_processes` | array of `{pid, command, fate}`, default empty | processes the test left running; `fate` is `ended`, `kept` or `survived` |
//! | `intermittent` | boolean, default false | `intermittent = true`: the known issue fails only sometimes, and a pass is a pass |
//! | `attempt` | integer, default 1 | which attempt this is: `NEXTEST_ATTEMPT` of a nextest retry |
//! | `attempts` | array, default empty | the earlier attempts, oldest first: `{attempt, outcome, failure_kind, message, started_at_ms, duration_ms, resources, cleanup, output, lock, category}`; written by no test process, filled by readers |
//! | `trace` | string, absent when none | the kept trace's `trace.json`, an absolute path |
//! | `history` | string, absent when none | the `history.json` of the operations the test recorded (`cx.history()`, [`crate::history`]), an absolute path |
//! | `category` | `product` \| `infrastructure` \| `known_issue` \| `testkit`, absent when none | what a failure is the fault of, as the process that judged it saw it ([`FailureCategory`]); absent in older records, whose readers derive it from `failure_kind` ([`TestRecord::category`]) |
//! | `lock` | `{mode, acquired_at_ms, released_at_ms, wait_ms}`, absent when none | the pod lock the test held for its body and cleanup ([`crate::pod::lock`]): `mode` `shared` or `exclusive` (`#[testkit::test(exclusive)]`), when it was taken and let go (ms since the Unix epoch), how long the test waited for it; absent for a test skipped or failed before its body ran |
//!
//! # Attempts
//!
//! A test nextest retries writes one record per attempt, each with its
//! `attempt`. [`read_records`] keeps every one: the last attempt's record
//! counts, and the earlier ones are folded into its `attempts`
//! ([`fold_attempts`]); an attempt that left no record (its process
//! crashed) gets one that says so. A test whose last attempt did not fail
//! after one that did is flaky ([`TestRecord::is_flaky`]): counted by its
//! last attempt's outcome, and listed as flaky by the summary, JUnit
//! (`<flakyFailure>`) and `report.html`. Whether a flaky test fails a run is
//! the suite's `[suite] flaky`.
//!

pub mod known_issues;
mod record;
mod start;
mod summary;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use known_issues::{
    check_known_issues, KnownIssue, KnownIssues, KnownIssuesCheck, KnownIssuesError,
    KNOWN_ISSUES_FILE,
};
pub use record::{
    AttemptRecord, CleanupState, FailureCategory, FailureKind, FaultRecord, FaultState,
    LeftoverProcess, LockMode, LockRecord, Outcome, ProcessFate, ResourceRecord, ResourceState,
    TestRecord, RECORD_SCHEMA_VERSION,
};
pub use start::{read_starts, unended, StartFile, TestStart, STARTS_DIR};
pub use summary::{FlakyTest, KnownIssueState, KnownIssueSummary, Summary};

use crate::run::Run;

/// Bytes every testkit test binary carries (its harness keeps them linked).
/// The runner tells a testkit binary, every test of which that ran writes a
/// record, from a plain libtest one by them ([`is_testkit_binary`]): a test
/// of a testkit binary that ran and left no record did not pass, whatever
/// its process's exit status said.
pub const HARNESS_MARKER: [u8; 32] = *b"testkit harness: records tests\0\0";

/// Whether the executable at `path` is a testkit test binary: whether it
/// holds [`HARNESS_MARKER`]. Reads the file once, in pieces.
pub fn is_testkit_binary(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    // The tail of the previous piece, so a marker that straddles two is seen.
    let keep = HARNESS_MARKER.len() - 1;
    let mut filled = 0;
    loop {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok(false);
        }
        let end = filled + n;
        if buf[..end]
            .windows(HARNESS_MARKER.len())
            .any(|w| w == HARNESS_MARKER)
        {
            return Ok(true);
        }
        let tail = end.saturating_sub(keep);
        buf.copy_within(tail..end, 0);
        filled = end - tail;
    }
}

/// Reading or writing results failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file or folder could not be read or written.
    #[error("failed to access {}: {cause}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// A record is not valid JSON of the record schema.
    #[error("invalid test record {}: {message}", path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A JUnit file could not be read or written.
    #[error("invalid JUnit file {}: {message}", path.display())]
    Junit {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads every record under `<results_dir>/records`, sorted by binary and
/// name, one per test of each run. A folder without records gives none.
/// When a test has several records in one run (nextest retried it), the
/// last attempt counts, and the earlier ones are kept in its `attempts`
/// ([`fold_attempts`]).
///
/// The ignored tests a nextest listing recorded (`ignored-<run>.listed`,
/// see [`record_listed_ignored`]) count only for a run that has another
/// record in the folder: `cargo nextest list` lists too, and a listing is
/// not a run.
pub fn read_records(results_dir: &Path) -> Result<Vec<TestRecord>, ReportError> {
    let mut records = Vec::new();
    let mut listed = Vec::new();
    for path in files_per_binary(&results_dir.join("records"))? {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => records.extend(read_record_lines(&path)?),
            Some("json") => records.push(read_record(&path)?),
            Some("listed") => listed.extend(read_record_lines(&path)?),
            _ => {}
        }
    }
    let runs: std::collections::BTreeSet<String> =
        records.iter().map(|r| r.run_id.clone()).collect();
    records.extend(listed.into_iter().filter(|r| runs.contains(&r.run_id)));
    Ok(fold_attempts(records))
}

/// Sorted by binary and name, one record per test of each run: the last
/// attempt's, with the earlier attempts in its `attempts` (oldest first).
/// Of two records of one attempt, the later start counts.
/// An attempt number below the last that has no record (its process
/// crashed) gets an attempt that says so. A record of a test that never
/// started (a statically ignored test's, written for nextest) is no
/// attempt: it counts only when the test has no other record.
pub fn fold_attempts(mut records: Vec<TestRecord>) -> Vec<TestRecord> {
    // A retry ran, even when its record is the runner's for a process that
    // left none (and so has no start).
    let ran = |r: &TestRecord| r.started_at_ms > 0 || r.attempt > 1;
    records.sort_by(|a, b| {
        (
            &a.binary,
            &a.name,
            &a.run_id,
            ran(a),
            a.attempt,
            a.started_at_ms,
        )
            .cmp(&(
                &b.binary,
                &b.name,
                &b.run_id,
                ran(b),
                b.attempt,
                b.started_at_ms,
            ))
    });
    let mut folded: Vec<TestRecord> = Vec::with_capacity(records.len());
    for record in records {
        match folded.last_mut() {
            Some(last)
                if (&last.binary, &last.name, &last.run_id)
                    == (&record.binary, &record.name, &record.run_id) =>
            {
                let earlier = std::mem::replace(last, record);
                // The same attempt twice (a rerun under a fixed run id): the
                // later replaces it, as before retries were counted.
                if last.file.is_empty() && !earlier.file.is_empty() {
                    // The runner's record of a retry that left none knows
                    // nothing of the test: its earlier attempt does.
                    last.description = earlier.description.clone();
                    last.file = earlier.file.clone();
                    last.line = earlier.line;
                    last.known_issue = earlier.known_issue.clone();
                    last.fails_with = earlier.fails_with.clone();
                    last.intermittent = earlier.intermittent;
                    last.requires = earlier.requires.clone();
                }
                if ran(&earlier) && earlier.attempt < last.attempt {
                    let mut attempts = earlier.attempts.clone();
                    attempts.push(AttemptRecord::of(&earlier));
                    attempts.append(&mut last.attempts);
                    last.attempts = attempts;
                }
            }
            _ => folded.push(record),
        }
    }
    for record in &mut folded {
        if record.attempt <= 1 {
            continue;
        }
        for n in 1..record.attempt {
            if !record.attempts.iter().any(|a| a.attempt == n) {
                record.attempts.push(AttemptRecord::unrecorded(n));
            }
        }
        record.attempts.sort_by_key(|a| a.attempt);
        record.attempts.dedup_by_key(|a| a.attempt);
    }
    folded
}

/// Every file of each binary's folder under `root` (`records/`, `starts/`):
/// none when `root` is not there.
pub(crate) fn files_per_binary(root: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |cause| ReportError::Io { path, cause }
    };
    let binaries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(root)(e)),
    };
    let mut files = Vec::new();
    for binary in binaries {
        let binary = binary.map_err(io(root))?.path();
        if !binary.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&binary).map_err(io(&binary))? {
            files.push(file.map_err(io(&binary))?.path());
        }
    }
    Ok(files)
}

/// Reads one record file (`.json`: one record).
pub(crate) fn read_record(path: &Path) -> Result<TestRecord, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        cause: source,
    })?;
    parse_record(&text, path)
}

/// Reads a process's record file (`.jsonl`: one record per line). A last
/// line without its newline is a record whose process died while writing
/// it, and is not a record.
fn read_record_lines(path: &Path) -> Result<Vec<TestRecord>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        cause: source,
    })?;
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n') && !line.trim().is_empty())
        .map(|line| parse_record(line, path))
        .collect()
}

fn parse_record(text: &str, path: &Path) -> Result<TestRecord, ReportError> {
    let record: TestRecord = serde_json::from_str(text).map_err(|e| ReportError::Record {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    if record.schema > RECORD_SCHEMA_VERSION {
        return Err(ReportError::Record {
            path: path.to_owned(),
            message: format!(
                "schema version {} is newer than this testkit reads ({RECORD_SCHEMA_VERSION}): upgrade the reader",
                record.schema
            ),
        });
    }
    Ok(record)
}

/// Writes `records` (of any binaries) under `results_dir` in files of their
/// own, one per binary: how `testkit-runner` records the tests that never
/// wrote a record themselves.
pub fn write_records(results_dir: &Path, records: &[TestRecord]) -> Result<(), ReportError> {
    let mut by_binary: std::collections::BTreeMap<&str, String> = Default::default();
    for record in records {
        by_binary
            .entry(&record.binary)
            .or_default()
            .push_str(&record_line(record));
    }
    for (binary, lines) in by_binary {
        let dir = results_dir.join("records").join(binary);
        let path = dir.join(format!("written-after-{}.jsonl", std::process::id()));
        std::fs::create_dir_all(&dir)
            .and_then(|()| {
                File::options()
                    .create(true)
                    .append(true)
                    .open(&path)?
                    .write_all(lines.as_bytes())
            })
            .map_err(|source| ReportError::Io {
                path,
                cause: source,
            })?;
    }
    Ok(())
}

/// How many records the results folder holds so far: cheap enough to show
/// progress while tests run.
pub fn count_records(results_dir: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(results_dir.join("records")) else {
        return 0;
    };
    dirs.filter_map(|d| d.ok())
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|files| files.filter_map(|f| f.ok()))
        .map(|f| {
            let path = f.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("json") => 1,
                Some("jsonl") => std::fs::read(&path)
                    .map(|b| b.iter().filter(|&&c| c == b'\n').count())
                    .unwrap_or(0),
                _ => 0,
            }
        })
        .sum()
}

/// A record as one line of a `.jsonl` file, redacted, with its newline.
fn record_line(record: &TestRecord) -> String {
    let mut line =
        crate::redact::redact(&serde_json::to_string(record).unwrap_or_default()).into_owned();
    line.push('\n');
    line
}

/// A test process's record file, opened on first use. One file per
/// process, one line per test, appended with a single write: no lock, no
/// file per test (creating a file per test cost more than running a trivial
/// test).
#[derive(Debug, Default)]
pub struct RecordFile {
    file: Mutex<Option<File>>,
}

impl RecordFile {
    /// A record file not opened yet.
    pub const fn new() -> RecordFile {
        RecordFile {
            file: Mutex::new(None),
        }
    }

    /// Appends `record` to `<results>/records/<binary>/<pid>-<nanos>.jsonl`
    /// in one write, so that a reader never sees half a record.
    pub fn write(&self, run: &Run, record: &TestRecord) -> Result<(), ReportError> {
        let line = record_line(record);
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let result = match &mut *file {
            Some(f) => f.write_all(line.as_bytes()),
            None => open_process_file(&run.results_dir.join("records").join(&run.binary)).and_then(
                |mut f| {
                    let written = f.write_all(line.as_bytes());
                    *file = Some(f);
                    written
                },
            ),
        };
        result.map_err(|source| ReportError::Io {
            path: run.results_dir.join("records").join(&run.binary),
            cause: source,
        })
    }
}

/// Opens `<dir>/<pid>-<nanos>.jsonl` to append to, creating `dir`: a file
/// of this process's own, which no other process writes.
fn open_process_file(dir: &Path) -> std::io::Result<File> {
    std::fs::create_dir_all(dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!("{}-{nanos}.jsonl", std::process::id()));
    File::options().create(true).append(true).open(&path)
}

/// Called once per test process after its tests ran. No test process
/// builds JUnit, under nextest or `cargo test`: that is done once, from the
/// records, by `testkit-runner`. Nothing here
/// reads another process's records, so its cost does not grow with the run.
///
/// Under nextest it writes the records of the binary's statically ignored
/// tests (`ignored` makes them: nextest never starts a process for them),
/// once per binary and run. Under `cargo test` the
/// binary's one process has recorded them already.
pub fn finish_binary(run: &Run, under_nextest: bool, ignored: impl FnOnce() -> Vec<TestRecord>) {
    if !under_nextest {
        return;
    }
    let file = format!("ignored-{}.jsonl", run.id);
    if let Err(e) = record_ignored_once(run, &file, ignored) {
        eprintln!(
            "testkit: failed to record the ignored tests of {}: {e}",
            run.binary
        );
    }
}

/// Called when nextest lists the binary's ignored tests (`--list
/// --ignored`), which it does for every binary before a run starts, with
/// the run's id: writes the records of its statically ignored tests to
/// `ignored-<run id>.listed`, once per binary and run. A binary whose only
/// tests are ignored has no test process, so [`finish_binary`] never runs
/// for it; this is where its tests are counted. Readers count a listing
/// only for a run that has other records ([`read_records`]): `cargo
/// nextest list` lists the same way, and runs nothing.
pub fn record_listed_ignored(run: &Run, ignored: impl FnOnce() -> Vec<TestRecord>) {
    let file = format!("ignored-{}.listed", run.id);
    if let Err(e) = record_ignored_once(run, &file, ignored) {
        eprintln!(
            "testkit: failed to record the ignored tests of {} as nextest listed them: {e}",
            run.binary
        );
    }
}

/// Nextest runs each test in its own process with `--exact`, so no process
/// sees the ignored tests. The first process of the binary to finish records
/// them, in `ignored-<run id>.jsonl`, created with its content in one step
/// (a hard link, which fails when the file exists): every later process of
/// the binary finds it there at the cost of one system call. A record with
/// `started_at_ms` 0 loses to any real one, so a test nextest runs anyway
/// (`--run-ignored`) is counted as it ran.
fn record_ignored_once(
    run: &Run,
    file: &str,
    ignored: impl FnOnce() -> Vec<TestRecord>,
) -> Result<(), ReportError> {
    let dir = run.results_dir.join("records").join(&run.binary);
    let path = dir.join(file);
    if path.exists() {
        return Ok(());
    }
    // Written even when empty: its being there is what spares every later
    // process of the binary a pass over all of its tests.
    let ignored = ignored();
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ReportError::Io {
            path,
            cause: source,
        }
    };
    let lines: String = ignored.iter().map(record_line).collect();
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // Not `.jsonl`: readers never see the file before it is whole.
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    std::fs::write(&tmp, lines).map_err(io(&tmp))?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io(&path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_counts_only_for_a_run_that_has_other_records() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("records/later");
        std::fs::create_dir_all(&folder).unwrap();
        let ignored = |run: &str| {
            let mut r = TestRecord::new(run, "later", "later::v2_only");
            r.outcome = Outcome::Skipped;
            r.skip_reason = Some("ignored: waits for the v2 API".to_owned());
            record_line(&r)
        };
        // `cargo nextest list` lists, and runs nothing: no run.
        std::fs::write(folder.join("ignored-listonly.listed"), ignored("listonly")).unwrap();
        std::fs::write(folder.join("ignored-ran.listed"), ignored("ran")).unwrap();
        assert!(read_records(dir.path()).unwrap().is_empty());
        // A run with a record of another binary counts its listed tests.
        let other = dir.path().join("records/runs");
        std::fs::create_dir_all(&other).unwrap();
        let mut passed = TestRecord::new("ran", "runs", "runs::passes");
        passed.started_at_ms = 1;
        std::fs::write(other.join("1-1.jsonl"), record_line(&passed)).unwrap();
        let read: Vec<(String, String)> = read_records(dir.path())
            .unwrap()
            .into_iter()
            .map(|r| (r.run_id, r.name))
            .collect();
        assert_eq!(
            read,
            [
                ("ran".to_owned(), "later::v2_only".to_owned()),
                ("ran".to_owned(), "runs::passes".to_owned())
            ]
        );
    }

    fn attempt(name: &str, n: u32, start: u64, outcome: Outcome) -> TestRecord {
        let mut r = TestRecord::new("run1", "bin", name);
        r.attempt = n;
        r.started_at_ms = start;
        r.outcome = outcome;
        if outcome == Outcome::Failed {
            r.failure_kind = Some(FailureKind::Error);
            r.message = Some(format!("attempt {n} failed"));
            r.output = format!("log of attempt {n}");
        }
        r
    }

    #[test]
    fn a_retry_that_passes_keeps_the_failed_attempt_and_is_flaky() {
        // Both attempts started in the same millisecond: the attempt orders.
        let folded = fold_attempts(vec![
            attempt("t", 2, 100, Outcome::Passed),
            attempt("t", 1, 100, Outcome::Failed),
            attempt("steady", 1, 100, Outcome::Passed),
        ]);
        assert_eq!(folded.len(), 2);
        let t = folded.iter().find(|r| r.name == "t").unwrap();
        assert_eq!(
            (t.outcome, t.attempt, t.total_attempts()),
            (Outcome::Passed, 2, 2)
        );
        assert_eq!(t.attempts.len(), 1);
        assert_eq!(t.attempts[0].message.as_deref(), Some("attempt 1 failed"));
        assert_eq!(t.attempts[0].output, "log of attempt 1");
        assert!(t.is_flaky());
        assert!(!folded
            .iter()
            .find(|r| r.name == "steady")
            .unwrap()
            .is_flaky());

        let summary = Summary::from_records(&folded, None);
        assert_eq!((summary.passed, summary.failed), (2, 0));
        assert_eq!(summary.flaky.len(), 1);
        assert_eq!(summary.flaky[0].test, "bin::t");
        assert_eq!(summary.flaky[0].describe(), "failed 1 of 2 attempts");
        assert!(summary.is_green());
        assert!(
            summary.to_string().starts_with(
                "2 tests: 2 passed (1 flaky), 0 failed, 0 skipped, 0 expected failures, 0 unexpected passes\n\
                 flaky: bin::t: failed 1 of 2 attempts\n"
            ),
            "{summary}"
        );
    }

    #[test]
    fn every_attempt_failed_is_a_failure_with_its_attempts_and_a_lost_one_is_named() {
        let folded = fold_attempts(vec![
            attempt("t", 3, 300, Outcome::Failed),
            attempt("t", 1, 100, Outcome::Failed),
        ]);
        let t = &folded[0];
        assert_eq!(t.outcome, Outcome::Failed);
        assert!(!t.is_flaky());
        let numbers: Vec<u32> = t.attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(numbers, [1, 2]);
        assert!(t.attempts[1]
            .message
            .as_deref()
            .unwrap()
            .contains("no record"));
        // A pass on a retry whose failed attempts left no record is flaky too.
        let t = &fold_attempts(vec![attempt("t", 2, 100, Outcome::Passed)])[0];
        assert!(t.is_flaky() && t.attempts.len() == 1, "{t:#?}");
    }

    #[test]
    fn a_retry_that_left_no_record_is_the_last_attempt() {
        // The runner's record of attempt 2, whose process crashed: no start.
        let crashed = attempt("t", 2, 0, Outcome::Failed);
        let folded = fold_attempts(vec![attempt("t", 1, 100, Outcome::Failed), crashed]);
        assert_eq!(folded.len(), 1);
        assert_eq!((folded[0].attempt, folded[0].attempts.len()), (2, 1));
        assert_eq!(folded[0].attempts[0].attempt, 1);
        // Folding what is folded already changes nothing.
        let again = fold_attempts(folded.clone());
        assert_eq!(again[0].attempts, folded[0].attempts);
    }

    #[test]
    fn a_rerun_of_one_attempt_replaces_it_and_a_never_started_record_is_no_attempt() {
        let mut ignored = attempt("t", 1, 0, Outcome::Skipped);
        ignored.skip_reason = Some("ignored: slow".into());
        let folded = fold_attempts(vec![
            attempt("t", 1, 200, Outcome::Passed),
            attempt("t", 1, 100, Outcome::Failed),
            ignored,
        ]);
        assert_eq!(folded.len(), 1);
        assert_eq!(folded[0].outcome, Outcome::Passed);
        assert!(folded[0].attempts.is_empty() && !folded[0].is_flaky());
    }

    #[test]
    fn records_without_the_new_fields_still_read() {
        let old = r#"{"schema":1,"run_id":"r","binary":"b","name":"t","description":"","file":"","line":1,"outcome":"passed","failure_kind":null,"message":null,"skip_reason":null,"started_at_ms":5,"duration_ms":1,"known_issue":null,"fails_with":null,"requires":[],"capabilities_missing":[],"resources":[],"cleanup":"nothing","output":""}"#;
        let r = parse_record(old, Path::new("old.jsonl")).unwrap();
        assert_eq!((r.attempt, r.attempts.len(), r.intermittent), (1, 0, false));
        assert_eq!(r.lock, None);
        // And a first attempt is written as before.
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            !line.contains("attempt") && !line.contains("intermittent") && !line.contains("lock"),
            "{line}"
        );
    }

    fn locked(name: &str, mode: LockMode, from: u64, to: u64) -> TestRecord {
        let mut r = attempt(name, 1, from, Outcome::Passed);
        r.lock = Some(LockRecord::new(mode, from, to, 7));
        r
    }

    #[test]
    fn the_lock_a_test_held_is_written_and_read_back() {
        let r = locked("t", LockMode::Exclusive, 1_000, 1_300);
        let line = record_line(&r);
        assert!(
            line.contains(
                r#""lock":{"mode":"exclusive","acquired_at_ms":1000,"released_at_ms":1300,"wait_ms":7}"#
            ),
            "{line}"
        );
        let back = parse_record(line.trim_end(), Path::new("t.jsonl")).unwrap();
        assert_eq!(back.lock, r.lock);
    }

    #[test]
    fn the_summary_says_how_long_exclusive_tests_held_the_pod() {
        let none = Summary::from_records(&[locked("s", LockMode::Shared, 0, 500)], None);
        assert_eq!((none.exclusive_tests, none.exclusive_line()), (0, None));
        assert!(!none.to_string().contains("exclusive"), "{none}");
        // A retried exclusive test held the pod on each attempt.
        let mut retried = locked("e2", LockMode::Exclusive, 2_000, 2_250);
        let mut first = locked("e2", LockMode::Exclusive, 1_000, 1_050);
        first.outcome = Outcome::Failed;
        retried.attempt = 2;
        retried.attempts.push(AttemptRecord::of(&first));
        let records = [
            locked("e1", LockMode::Exclusive, 0, 1_000),
            retried,
            locked("s", LockMode::Shared, 0, 5_000),
        ];
        let summary = Summary::from_records(&records, None);
        assert_eq!(
            (summary.exclusive_tests, summary.exclusive_held_ms),
            (2, 1_300)
        );
        let line = "exclusive: 2 tests held the pod to themselves for 1s 300ms in total";
        assert_eq!(summary.exclusive_line().as_deref(), Some(line));
        assert!(summary.to_string().contains(line), "{summary}");
    }
}
