//! Write-ahead starts: a test's start is on disk before its body runs.
//!
//! A record is written when a test ends. A test whose process is killed,
//! exits halfway, or whose record is lost afterwards (deleted by a child,
//! by the test itself, by anything) leaves no record, and a reader that
//! only counts records would count nothing of it: a run with one failure
//! and one lost record would read green. So every test appends a start
//! before it runs, to a file of its own process under `starts/`, apart from
//! the records:
//!
//! ```text
//! <results>/starts/<binary>/<pid>-<n>.jsonl   one TestStart per line, one line per test attempt
//! ```
//!
//! A start without a record of the same run, test and attempt is a test
//! that never ended: every reader (the runner, `report`, `merge`) counts it
//! as failed ([`unended`]).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{ReportError, TestRecord};
use crate::run::Run;

/// The folder of the starts, beside `records/`.
pub const STARTS_DIR: &str = "starts";

/// A test attempt that began: written before its body runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestStart {
    /// The run's id.
    pub run_id: String,
    /// The test binary, without cargo's hash.
    pub binary: String,
    /// The test's full name, as listed.
    pub name: String,
    /// Which attempt (nextest's `NEXTEST_ATTEMPT`; 1 otherwise).
    pub attempt: u32,
    /// The test process.
    pub pid: u32,
    /// When it began, in ms since the Unix epoch.
    pub at_ms: u64,
    /// Where the test is defined.
    #[serde(default)]
    pub file: String,
    /// The line of its definition.
    #[serde(default)]
    pub line: u32,
}

/// A test process's start file, opened on first use: one line per test, one
/// write each, like the record file beside it.
#[derive(Debug, Default)]
pub struct StartFile {
    file: Mutex<Option<File>>,
}

impl StartFile {
    /// A start file not opened yet.
    pub const fn new() -> StartFile {
        StartFile {
            file: Mutex::new(None),
        }
    }

    /// Appends `start` in one write. No sync: a killed process's writes are
    /// in the page cache, which is what the readers see.
    pub fn write(&self, run: &Run, start: &TestStart) -> Result<(), ReportError> {
        let mut line = serde_json::to_string(start).unwrap_or_default();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let dir = run.results_dir.join(STARTS_DIR).join(&run.binary);
        let result = match &mut *file {
            Some(f) => f.write_all(line.as_bytes()),
            None => super::open_process_file(&dir).and_then(|mut f| {
                let written = f.write_all(line.as_bytes());
                *file = Some(f);
                written
            }),
        };
        result.map_err(|cause| ReportError::Io { path: dir, cause })
    }
}

/// Every start under `<results_dir>/starts`. A line cut short (its process
/// died while writing it) is no start; a line that is not a start is an
/// error naming its file.
pub fn read_starts(results_dir: &Path) -> Result<Vec<TestStart>, ReportError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |cause| ReportError::Io { path, cause }
    };
    let mut starts = Vec::new();
    for path in super::files_per_binary(&results_dir.join(STARTS_DIR))? {
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        for line in text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n') && !l.trim().is_empty())
        {
            let start: TestStart = serde_json::from_str(line).map_err(|e| ReportError::Record {
                path: path.clone(),
                message: format!("not a test start: {e}"),
            })?;
            starts.push(start);
        }
    }
    starts.sort_by(|a, b| {
        (&a.binary, &a.name, a.attempt, a.at_ms).cmp(&(&b.binary, &b.name, b.attempt, b.at_ms))
    });
    Ok(starts)
}

/// The starts of the run `run_id` that no record of `records` ends: a
/// record of the same test and attempt that started no earlier than the
/// start (a record written before it is of an earlier run of the test
/// under the same run id, and ends nothing of this one). A test that
/// started twice in one attempt (a rerun under a fixed run id) is ended
/// by a record of its latest start.
pub fn unended<'a>(
    records: &[TestRecord],
    starts: &'a [TestStart],
    run_id: &str,
) -> Vec<&'a TestStart> {
    // The latest start of each record's test and attempt, the earlier
    // attempts a folded record holds included.
    let mut ended: std::collections::BTreeMap<(&str, &str, u32), u64> = Default::default();
    for r in records.iter().filter(|r| r.run_id == run_id) {
        let attempts = std::iter::once((r.attempt.max(1), r.started_at_ms))
            .chain(r.attempts.iter().map(|a| (a.attempt, a.started_at_ms)));
        for (n, at) in attempts {
            let slot = ended.entry((&r.binary, &r.name, n)).or_default();
            *slot = (*slot).max(at);
        }
    }
    // Of several starts of one test and attempt, the latest counts.
    let mut latest: std::collections::BTreeMap<(&str, &str, u32), &TestStart> = Default::default();
    for s in starts.iter().filter(|s| s.run_id == run_id) {
        let slot = latest
            .entry((&s.binary, &s.name, s.attempt.max(1)))
            .or_insert(s);
        if s.at_ms > slot.at_ms {
            *slot = s;
        }
    }
    latest
        .into_iter()
        .filter(|(key, start)| ended.get(key).is_none_or(|&at| at < start.at_ms))
        .map(|(_, start)| start)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(name: &str, attempt: u32) -> TestStart {
        TestStart {
            run_id: "r".to_owned(),
            binary: "b".to_owned(),
            name: name.to_owned(),
            attempt,
            pid: 7,
            at_ms: 1000,
            file: String::new(),
            line: 0,
        }
    }

    #[test]
    fn a_start_without_a_record_of_its_attempt_is_unended() {
        let mut retried = TestRecord::new("r", "b", "retried");
        retried.attempt = 2;
        retried.started_at_ms = 1000;
        let mut ended = TestRecord::new("r", "b", "ended");
        ended.started_at_ms = 1000;
        // Passed before the start of a later run under the same id, which
        // then never ended.
        let mut earlier = TestRecord::new("r", "b", "rerun");
        earlier.started_at_ms = 10;
        let records = vec![ended, retried, earlier];
        let starts = vec![
            start("ended", 1),
            start("lost", 1),
            // Its first attempt left no record; its second did.
            start("retried", 1),
            start("retried", 2),
            start("ended", 1),
            start("rerun", 1),
        ];
        let names: Vec<(&str, u32)> = unended(&records, &starts, "r")
            .iter()
            .map(|s| (s.name.as_str(), s.attempt))
            .collect();
        assert_eq!(names, [("lost", 1), ("rerun", 1), ("retried", 1)]);
        // Another run's starts are not this run's.
        assert!(unended(&records, &starts, "other").is_empty());
    }

    #[test]
    fn starts_are_read_back_and_a_line_cut_short_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run {
            id: "r".to_owned(),
            results_dir: dir.path().to_owned(),
            binary: "b".to_owned(),
            alone: false,
        };
        let file = StartFile::new();
        file.write(&run, &start("one", 1)).unwrap();
        file.write(&run, &start("two", 1)).unwrap();
        let folder = dir.path().join(STARTS_DIR).join("b");
        let only = std::fs::read_dir(&folder)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut text = std::fs::read_to_string(&only).unwrap();
        text.push_str("{\"run_id\":\"r\",\"bin");
        std::fs::write(&only, text).unwrap();
        let read = read_starts(dir.path()).unwrap();
        assert_eq!(read.len(), 2, "{read:?}");
        std::fs::write(folder.join("junk.jsonl"), "not json\n").unwrap();
        let e = read_starts(dir.path()).unwrap_err();
        assert!(e.to_string().contains("junk.jsonl"), "{e}");
    }
}
