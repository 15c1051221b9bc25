//! Reporting: one record per test, JUnit built from the records, known issues.
//!
//! # The results folder
//!
//! ```text
//! <results>/records/<binary>/<pid>-<n>.jsonl   one TestRecord per line, one line per test, one file per test process
//! <results>/junit/<binary>.xml             one JUnit report per test binary
//! <results>/junit.xml                      every binary of the run
//! ```
//!
//! `<results>` is `TESTKIT_RESULTS_DIR`, else `<target>/testkit/runs/<run id>`.
//! Every test process writes its records when each test ends, then rebuilds
//! its binary's JUnit file and the run's `junit.xml` from every record in the
//! folder (under a lock, written atomically). Under nextest each test is a
//! process of its own, so the last process to finish leaves complete files;
//! under `cargo test` the binary's one process does. Nothing else is needed:
//! a plain `cargo test` or `cargo nextest run` leaves JUnit behind.
//!
//! # The record (schema version 1)
//!
//! A JSON object, [`TestRecord`]; fields are only ever added, and a reader
//! accepts records of its own version or older:
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
//! | `started_at_ms` | integer | start, ms since the Unix epoch (0 when it never ran) |
//! | `duration_ms` | integer | body and cleanup |
//! | `known_issue`, `fails_with` | string \| null | the attribute's values |
//! | `requires`, `capabilities_missing` | array of strings | pod capabilities |
//! | `resources` | array of `{kind, name, state}` | `state`: `pending`, `created`, `deleted`, `kept`, `leaked` |
//! | `cleanup` | `nothing` \| `verified` \| `kept` \| `failed` | the cleanup as a whole |
//! | `output` | string | the test's log, redacted |
//! | `browsers` | integer, default 0 | browsers the test opened |
//! | `screenshots` | array of strings, default empty | the PNG files it saved, absolute paths |
//! | `browser_teardown_timed_out` | boolean, default false | a browser outlived its teardown cap and was killed |
//!
//! # JUnit
//!
//! [`junit_from_records`] maps records to JUnit: one `testsuite` per binary
//! (property `run_id`); one `testcase` per test, `name` its name,
//! `classname` its binary, `time` its duration, and properties `run_id`,
//! `outcome`, `description`, `known_issue` (when pinned), `cleanup`,
//! `resources` (`kind/name=state`, space-separated) and
//! `capabilities_missing` (when some were). The status:
//!
//! - failed, unexpected pass: `<failure>` with `message` the first line,
//!   `type` the failure kind (`cleanup` for a cleanup failure,
//!   `known_issue_fixed` for an unexpected pass), the full message as text;
//! - skipped: `<skipped>` with `message` the reason;
//! - expected failure: `<skipped type="xfail">` with `message`
//!   `known issue ID: <first line of the failure>`, the failure as text.
//!
//! The log goes to `system-out`, followed by one `[[ATTACHMENT|path]]`
//! line per screenshot (GitLab and Jenkins show them). Everything is passed through
//! [`crate::redact`] once more on the way out.

pub mod junit;
pub mod known_issues;
mod record;
mod summary;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use junit::{junit_from_records, merge_results, write_junit, XFAIL_TYPE};
pub use known_issues::{
    check_known_issues, KnownIssue, KnownIssues, KnownIssuesCheck, KnownIssuesError,
};
pub use record::{
    CleanupState, FailureKind, Outcome, ResourceRecord, ResourceState, TestRecord,
    RECORD_SCHEMA_VERSION,
};
pub use summary::{KnownIssueState, KnownIssueSummary, Summary};

use crate::run::Run;

/// Reading or writing results failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file or folder could not be read or written.
    #[error("failed to access {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
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
/// name. A folder without records gives none. When a test has several
/// records in one run (a nextest retry), the last one counts.
pub fn read_records(results_dir: &Path) -> Result<Vec<TestRecord>, ReportError> {
    read_records_except(results_dir, None)
}

/// [`read_records`], leaving out one record file (this process's own, whose
/// records it holds in memory).
fn read_records_except(
    results_dir: &Path,
    except: Option<&Path>,
) -> Result<Vec<TestRecord>, ReportError> {
    let root = results_dir.join("records");
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ReportError::Io { path, source }
    };
    let binaries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&root)(e)),
    };
    let mut records = Vec::new();
    for binary in binaries {
        let binary = binary.map_err(io(&root))?.path();
        if !binary.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&binary).map_err(io(&binary))? {
            let path = file.map_err(io(&binary))?.path();
            if except == Some(path.as_path()) {
                continue;
            }
            match path.extension().and_then(|e| e.to_str()) {
                Some("jsonl") => records.extend(read_record_lines(&path)?),
                Some("json") => records.push(read_record(&path)?),
                _ => {}
            }
        }
    }
    Ok(latest_per_test(records))
}

/// Sorted by binary and name, the last record of each test of each run.
fn latest_per_test(mut records: Vec<TestRecord>) -> Vec<TestRecord> {
    records.sort_by(|a, b| {
        (&a.binary, &a.name, &a.run_id, a.started_at_ms).cmp(&(
            &b.binary,
            &b.name,
            &b.run_id,
            b.started_at_ms,
        ))
    });
    // Keep the last record of each test of each run.
    let mut deduped: Vec<TestRecord> = Vec::with_capacity(records.len());
    for record in records {
        match deduped.last_mut() {
            Some(last)
                if (&last.binary, &last.name, &last.run_id)
                    == (&record.binary, &record.name, &record.run_id) =>
            {
                *last = record
            }
            _ => deduped.push(record),
        }
    }
    deduped
}

/// Reads one record file (`.json`: one record).
pub fn read_record(path: &Path) -> Result<TestRecord, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_record(&text, path)
}

/// Reads a process's record file (`.jsonl`: one record per line). A last
/// line without its newline is a record whose process died while writing
/// it, and is not a record.
fn read_record_lines(path: &Path) -> Result<Vec<TestRecord>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        source,
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
        let line = by_binary.entry(&record.binary).or_default();
        line.push_str(&crate::redact::redact(
            &serde_json::to_string(record).unwrap_or_default(),
        ));
        line.push('\n');
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
            .map_err(|source| ReportError::Io { path, source })?;
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

/// This process's record file, opened on first use. One file per process,
/// one line per test, appended with a single write: no lock, no file per
/// test (creating a file per test cost more than running a trivial test).
static RECORD_FILE: Mutex<Option<RecordFile>> = Mutex::new(None);

struct RecordFile {
    file: File,
    path: PathBuf,
    /// What this process wrote, so that rebuilding JUnit at its end need
    /// not read it back.
    records: Vec<TestRecord>,
}

/// Appends `record` to `<results>/records/<binary>/<pid>-<nanos>.jsonl` in
/// one write, so that a reader never sees half a record.
pub(crate) fn write_record(run: &Run, record: &TestRecord) {
    let mut line =
        crate::redact::redact(&serde_json::to_string(record).unwrap_or_default()).into_owned();
    line.push('\n');
    let mut file = RECORD_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let result = match &mut *file {
        Some(f) => f.file.write_all(line.as_bytes()),
        None => open_record_file(run).and_then(|(mut f, path)| {
            let written = f.write_all(line.as_bytes());
            *file = Some(RecordFile {
                file: f,
                path,
                records: Vec::new(),
            });
            written
        }),
    };
    match result {
        Ok(()) => {
            if let Some(f) = &mut *file {
                f.records.push(record.clone());
            }
        }
        Err(e) => eprintln!(
            "testkit: failed to write the record of {} under {}: {e}",
            record.name,
            run.results_dir.join("records").display()
        ),
    }
}

fn open_record_file(run: &Run) -> std::io::Result<(File, PathBuf)> {
    let dir = run.results_dir.join("records").join(&run.binary);
    std::fs::create_dir_all(&dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!("{}-{nanos}.jsonl", std::process::id()));
    let file = File::options().create(true).append(true).open(&path)?;
    Ok((file, path))
}

/// Serializes rebuilders of the JUnit files across processes.
fn lock_results(run: &Run) -> std::io::Result<nix::fcntl::Flock<File>> {
    std::fs::create_dir_all(&run.results_dir)?;
    let path = run.results_dir.join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| errno.into())
}

/// Called once per test process after its tests ran: under nextest, writes
/// the records of the binary's statically ignored tests (`ignored`: nextest
/// never starts a process for them) unless they exist, then rebuilds the
/// binary's JUnit file and the run's `junit.xml` from every record in the
/// results folder.
pub(crate) fn finish_binary(run: &Run, under_nextest: bool, ignored: &[TestRecord]) {
    let result = lock_results(run)
        .map_err(|source| ReportError::Io {
            path: run.results_dir.clone(),
            source,
        })
        .and_then(|_lock| {
            if under_nextest {
                record_ignored_under_nextest(run, ignored);
            }
            rebuild_junit(run)
        });
    if let Err(e) = result {
        eprintln!(
            "testkit: failed to write JUnit to {}: {e}",
            run.results_dir.display()
        );
    }
}

/// Nextest runs each test in its own process with `--exact`, so no process
/// sees the ignored tests: each process records them as skipped unless a
/// record exists. Under the results lock, so that a real record (nextest's
/// `--run-ignored`) is either seen here or written over this one.
fn record_ignored_under_nextest(run: &Run, ignored: &[TestRecord]) {
    let existing: std::collections::BTreeSet<String> = read_records(&run.results_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.run_id == run.id && r.binary == run.binary)
        .map(|r| r.name)
        .collect();
    for record in ignored {
        if !existing.contains(&record.name) {
            write_record(run, record);
        }
    }
}

fn rebuild_junit(run: &Run) -> Result<(), ReportError> {
    let (own_path, own) = match &*RECORD_FILE.lock().unwrap_or_else(|e| e.into_inner()) {
        Some(f) => (Some(f.path.clone()), f.records.clone()),
        None => (None, Vec::new()),
    };
    let mut records = read_records_except(&run.results_dir, own_path.as_deref())?;
    records.extend(own);
    let (mine, others): (Vec<TestRecord>, Vec<TestRecord>) =
        latest_run_per_binary(latest_per_test(records), run)
            .into_iter()
            .partition(|r| r.binary == run.binary);
    // Each testsuite is built once and serves both files: building test
    // cases (every string escaped and checked) is most of a run's reporting.
    let mine = junit::suites_from_records(&mine);
    write_junit(
        &junit::report_from_suites(&run.binary, mine.clone()),
        &run.results_dir
            .join("junit")
            .join(format!("{}.xml", run.binary)),
    )?;
    let mut all = junit::suites_from_records(&others);
    all.extend(mine);
    all.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    write_junit(
        &junit::report_from_suites(&run.id, all),
        &run.results_dir.join("junit.xml"),
    )
}

/// A results folder that outlives one run (a fixed `TESTKIT_RESULTS_DIR`)
/// holds older records too: keep, for this process's binary, the records of
/// this run, and for every other binary those of its latest run.
fn latest_run_per_binary(records: Vec<TestRecord>, run: &Run) -> Vec<TestRecord> {
    let mut latest: std::collections::BTreeMap<String, (u64, String)> =
        std::collections::BTreeMap::new();
    for record in &records {
        let slot = latest
            .entry(record.binary.clone())
            .or_insert((0, record.run_id.clone()));
        if record.started_at_ms > slot.0 {
            *slot = (record.started_at_ms, record.run_id.clone());
        }
    }
    latest.insert(run.binary.clone(), (0, run.id.clone()));
    records
        .into_iter()
        .filter(|r| latest.get(&r.binary).is_some_and(|(_, id)| *id == r.run_id))
        .collect()
}
