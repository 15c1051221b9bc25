//! The records of tests that began and never ended: their process died
//! before it wrote theirs (SIGKILL, the OOM killer, an abort, an exit
//! halfway), or their record was lost afterwards. Every test writes its
//! start before its body runs (`<results>/starts/`, see
//! [`testkit_engine::report::TestStart`]); a start with no record of its
//! attempt is a test that never ended, and fails, saying what is known.
//!
//! What is known comes from the folder: a test process journals every
//! resource before it creates it (`<results>/journal/<binary>-<pid>.jsonl`),
//! and its reaper appends to the same file what it deleted or left, and
//! logs beside it (`<binary>-<pid>.reaper.log`). A test of the journal
//! without a record of its run was killed: failed, saying so, with its
//! resources and what the reaper did with them. A test that created nothing
//! has its start alone: "no end written".
//!
//! A test process that a signal (SIGTERM, SIGINT) ended ran its cleanup
//! first, and left a note of it beside its journal (the engine's
//! `resource::terminated`): its tests are recorded "terminated (SIGTERM)",
//! with whether that cleanup was verified, not killed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use testkit_engine::report::{
    read_starts, unended, CleanupState, FailureCategory, FailureKind, ReportError, ResourceRecord,
    ResourceState, TestRecord, TestStart,
};
use testkit_engine::resource::{journal, terminated, Event, JournalEntry};

/// At most this much of a reaper's log goes into a record.
const REAPER_LOG_CAP: usize = 16 * 1024;

/// A record for every test of the run `run_id` that began and that
/// `records` (the run's) do not end: each test the folder's journals name
/// and `records` lack, and each start without a record of its attempt.
/// Starts that cannot be read are an error: without them a lost record
/// would go unseen.
pub(crate) fn from_journal(
    results_dir: &Path,
    records: &[TestRecord],
    run_id: &str,
) -> Result<Vec<TestRecord>, ReportError> {
    let have: BTreeSet<(&str, &str)> = records
        .iter()
        .map(|r| (r.binary.as_str(), r.name.as_str()))
        .collect();
    let mut out: Vec<TestRecord> = Vec::new();
    for (binary, pid, path) in journal_files(results_dir) {
        let entries = journal::read_file(&path);
        let note = terminated::read(&terminated::path_for(&path)).filter(|n| n.run == run_id);
        let mut tests: Vec<&str> = Vec::new();
        let named = entries
            .iter()
            .filter(|e| e.run == run_id && !e.test.is_empty())
            .map(|e| e.test.as_str());
        for test in named.chain(note.iter().flat_map(|n| n.tests.iter().map(String::as_str))) {
            if !tests.contains(&test) {
                tests.push(test);
            }
        }
        for test in tests {
            if have.contains(&(binary.as_str(), test)) {
                continue;
            }
            let log = std::fs::read_to_string(path.with_extension("reaper.log")).ok();
            let mut record = killed_record(run_id, &binary, test, pid, &entries, log.as_deref());
            if let Some(note) = note.as_ref().filter(|n| n.tests.iter().any(|t| t == test)) {
                terminated_record(&mut record, pid, note, &entries);
            }
            out.push(record);
        }
    }
    let starts = read_starts(results_dir)?;
    // The latest attempt first: the journal's record is of the test's last
    // process.
    for start in unended(records, &starts, run_id).into_iter().rev() {
        // The journal knows more of a killed test than its start does.
        let journaled = out
            .iter_mut()
            .find(|k| k.binary == start.binary && k.name == start.name && k.file.is_empty());
        match journaled {
            Some(killed) => {
                killed.attempt = start.attempt.max(1);
                killed.file = start.file.clone();
                killed.line = start.line;
                if killed.started_at_ms == 0 || start.at_ms < killed.started_at_ms {
                    killed.started_at_ms = start.at_ms;
                }
            }
            None => out.push(never_ended(start)),
        }
    }
    Ok(out)
}

/// The record of a test that began (`start`) and wrote no end, and of which
/// the journal knows nothing.
fn never_ended(start: &TestStart) -> TestRecord {
    let mut record = TestRecord::new(&start.run_id, &start.binary, &start.name);
    record.attempt = start.attempt.max(1);
    record.file = start.file.clone();
    record.line = start.line;
    record.started_at_ms = start.at_ms;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(start.at_ms);
    record.fail(
        FailureKind::Error,
        format!(
            "no end written (no record): the test started (attempt {}, pid {}, at {}) and its \
             record was never written or was lost afterwards: its process was killed (SIGKILL, the OOM \
             killer), crashed or exited before testkit recorded it, or something deleted the \
             record; it created no resource",
            start.attempt.max(1),
            start.pid,
            humantime::format_rfc3339_millis(at),
        ),
    );
    // Its process died under it: nothing says the product did it.
    record.categorize(FailureCategory::Infrastructure);
    record
}

/// Makes the record of a test whose process `pid` a signal ended (its
/// note `note`) say so: terminated, not killed, and whether its own
/// cleanup was verified or its reaper took over.
fn terminated_record(
    record: &mut TestRecord,
    pid: u32,
    note: &terminated::Terminated,
    entries: &[JournalEntry],
) {
    let signal = &note.signal;
    let how = if note.cleanup_verified() {
        "cleanup verified".to_owned()
    } else {
        format!(
            "cleanup unfinished ({} not settled within the grace; its reaper took over)",
            note.left
        )
    };
    let mut message = format!(
        "terminated ({signal}), {how}: the test process (pid {pid}) received {signal} before \
         its test ended, ran its cleanup and exited before it wrote its record; this record is \
         built from its journal and the note it left"
    );
    if record.resources.is_empty() {
        message.push_str("; it journaled no resource");
    } else {
        message.push_str(&format!(
            "; it created {}",
            record
                .resources
                .iter()
                .map(what)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if !note.cleanup_verified() {
            message.push_str(&what_the_reaper_did(pid, entries, &record.resources));
        }
    }
    record.message = Some(message);
}

/// The journal files of test processes: `(binary, pid, path)`. The
/// janitor's journals name no test.
fn journal_files(results_dir: &Path) -> Vec<(String, u32, PathBuf)> {
    let Ok(dir) = std::fs::read_dir(journal::dir(results_dir)) else {
        return Vec::new();
    };
    let mut files: Vec<(String, u32, PathBuf)> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter_map(|p| {
            // A process that journaled nothing may still have left a note.
            let name = p.file_name()?.to_str()?;
            let stem = name
                .strip_suffix(".jsonl")
                .or_else(|| name.strip_suffix(&format!(".{}", terminated::SUFFIX)))?;
            let (binary, pid) = stem.rsplit_once('-')?;
            Some((
                binary.to_owned(),
                pid.parse().ok()?,
                p.with_file_name(format!("{stem}.jsonl")),
            ))
        })
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The record of the test `name` of `binary`, whose process `pid` died
/// before it wrote one: `entries` is that process's journal, the reaper's
/// entries included; `reaper_log` what the reaper logged.
pub(crate) fn killed_record(
    run_id: &str,
    binary: &str,
    name: &str,
    pid: u32,
    entries: &[JournalEntry],
    reaper_log: Option<&str>,
) -> TestRecord {
    let (resources, cleanup) = journaled(entries, name).unwrap_or_default();
    let own: Vec<&JournalEntry> = entries.iter().filter(|e| e.test == name).collect();
    let mut record = TestRecord::new(run_id, binary, name);
    if let (Some(first), Some(last)) = (own.first(), own.last()) {
        record.started_at_ms = first.time;
        record.duration_ms = last.time.saturating_sub(first.time);
    }
    record.fail(FailureKind::Error, killed_message(pid, entries, &resources));
    record.categorize(FailureCategory::Infrastructure);
    record.resources = resources;
    record.cleanup = cleanup;
    if let Some(log) = reaper_log.filter(|l| !l.trim().is_empty()) {
        record.output = format!("the reaper's log:\n{}", log_tail(log));
    }
    record
}

/// A resource as the messages name it: its kind, then its name in backticks.
fn what(r: &ResourceRecord) -> String {
    format!("{} `{}`", r.kind, r.name)
}

/// The failure of a test whose process `pid` was killed: that it was, what
/// it created (`resources`), and what its reaper did with them.
fn killed_message(pid: u32, entries: &[JournalEntry], resources: &[ResourceRecord]) -> String {
    let mut message = format!(
        "killed: the test process (pid {pid}) was killed before it wrote its record (by a signal such as SIGKILL, or it crashed); this record is built from its journal"
    );
    if resources.is_empty() {
        message.push_str("; it journaled no resource");
    } else {
        message.push_str(&format!(
            "; it created {}",
            resources.iter().map(what).collect::<Vec<_>>().join(", ")
        ));
        message.push_str(&what_the_reaper_did(pid, entries, resources));
    }
    message
}

/// What the reaper of the process `pid` did with `resources`, as the
/// journal says: `; its reaper deleted and verified gone …`.
fn what_the_reaper_did(pid: u32, entries: &[JournalEntry], resources: &[ResourceRecord]) -> String {
    let names: BTreeSet<(&str, &str)> = resources
        .iter()
        .map(|r| (r.kind.as_str(), r.name.as_str()))
        .collect();
    // The reaper writes without a test name, from a process of its own.
    let reaped: Vec<&JournalEntry> = entries
        .iter()
        .filter(|e| e.test.is_empty() && e.pid != pid)
        .filter(|e| names.contains(&(e.kind.as_str(), e.name.as_str())))
        .collect();
    if reaped.is_empty() {
        return "; its reaper journaled nothing (it had not finished, or could not run): see `testkit-runner janitor`".to_owned();
    }
    let of_state = |states: &[ResourceState]| -> Vec<String> {
        resources
            .iter()
            .filter(|r| states.contains(&r.state))
            .map(what)
            .collect()
    };
    let deleted = of_state(&[ResourceState::Deleted]);
    let left = of_state(&[ResourceState::Created, ResourceState::Pending]);
    let leaked = leaked_and_why(entries, resources);
    let mut did = Vec::new();
    if !deleted.is_empty() {
        did.push(format!(" deleted and verified gone {}", deleted.join(", ")));
    }
    if !leaked.is_empty() {
        did.push(format!(" could not delete {}", leaked.join(", ")));
    }
    if !left.is_empty() {
        did.push(format!(" had not settled {}", left.join(", ")));
    }
    format!("; its reaper{}", did.join(";"))
}

/// Each leaked resource of `resources`, with why when its last `leaked`
/// entry says.
fn leaked_and_why(entries: &[JournalEntry], resources: &[ResourceRecord]) -> Vec<String> {
    resources
        .iter()
        .filter(|r| r.state == ResourceState::Leaked)
        .map(|r| {
            let why = entries
                .iter()
                .rev()
                .find(|e| e.kind == r.kind && e.name == r.name && e.event == Event::Leaked)
                .and_then(|e| e.detail.as_deref())
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            format!("{}{why}", what(r))
        })
        .collect()
}

/// The last [`REAPER_LOG_CAP`] bytes of a reaper's log, from a character
/// boundary.
fn log_tail(log: &str) -> &str {
    let start = log.len().saturating_sub(REAPER_LOG_CAP);
    let start = (start..=log.len())
        .find(|&i| log.is_char_boundary(i))
        .unwrap_or(log.len());
    &log[start..]
}

/// What the journal knows of the resources of the test `name`: each with
/// the state its last entry (the test's, or a reaper's) gives it, and the
/// cleanup as a whole. `None` when the journal has nothing of the test.
pub(crate) fn journaled(
    journal: &[JournalEntry],
    name: &str,
) -> Option<(Vec<ResourceRecord>, CleanupState)> {
    let mut resources: Vec<ResourceRecord> = Vec::new();
    for e in journal.iter().filter(|e| e.test == name) {
        if !resources
            .iter()
            .any(|r| r.kind == e.kind && r.name == e.name)
        {
            resources.push(ResourceRecord {
                kind: e.kind.clone(),
                name: e.name.clone(),
                state: ResourceState::Pending,
            });
        }
    }
    if resources.is_empty() {
        return None;
    }
    for r in &mut resources {
        let last = journal
            .iter()
            .filter(|e| e.kind == r.kind && e.name == r.name)
            .max_by_key(|e| e.time);
        r.state = match last.map(|e| e.event) {
            Some(Event::Verified | Event::Reaped | Event::Forgotten) => ResourceState::Deleted,
            Some(Event::GoneBeforeDelete) => ResourceState::GoneBeforeDelete,
            Some(Event::Kept) => ResourceState::Kept,
            Some(Event::Leaked) => ResourceState::Leaked,
            Some(Event::Created | Event::Deleted) => ResourceState::Created,
            _ => ResourceState::Pending,
        };
    }
    let gone = |r: &ResourceRecord| {
        matches!(
            r.state,
            ResourceState::Deleted | ResourceState::GoneBeforeDelete
        )
    };
    let cleanup = if resources.iter().all(|r| r.state == ResourceState::Deleted) {
        CleanupState::Verified
    } else if resources.iter().all(gone) {
        CleanupState::GoneBeforeDelete
    } else if resources.iter().all(|r| r.state == ResourceState::Kept) {
        CleanupState::Kept
    } else {
        CleanupState::Failed
    };
    Some((resources, cleanup))
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit_engine::resource::terminated::Terminated;
    use testkit_engine::resource::Journal;

    /// A process that a SIGTERM ended after it undid its fault, and one
    /// that journaled nothing before its SIGTERM: both are terminated with
    /// their cleanup verified, never killed; a note of another run names
    /// no test of this one.
    #[test]
    fn a_note_of_a_sigterm_makes_the_record_terminated_not_killed() {
        let dir = tempfile::tempdir().unwrap();
        let journals = journal::dir(dir.path());
        std::fs::create_dir_all(&journals).unwrap();
        let with_fault = journals.join("faults-41.jsonl");
        let journal = Journal::at(with_fault.clone());
        for event in [Event::Pending, Event::Created, Event::Verified] {
            let entry = JournalEntry::new(event, "fault", "fault-01-pause-w", "r1", "t::a", None);
            journal.append(&entry).unwrap();
        }
        let note = Terminated::new("r1", "SIGTERM", vec!["t::a".into()], true, 0);
        terminated::write(&with_fault, &note).unwrap();
        let quiet = journals.join("faults-42.jsonl");
        let note = Terminated::new("r1", "SIGTERM", vec!["t::b".into()], true, 0);
        terminated::write(&quiet, &note).unwrap();
        let other_run = journals.join("faults-43.jsonl");
        let note = Terminated::new("r0", "SIGTERM", vec!["t::c".into()], true, 0);
        terminated::write(&other_run, &note).unwrap();

        let records = from_journal(dir.path(), &[], "r1").unwrap();
        let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["t::a", "t::b"]);
        for r in &records {
            let message = r.message.as_deref().unwrap_or_default();
            assert!(
                message.starts_with("terminated (SIGTERM), cleanup verified")
                    && !message.contains("SIGKILL"),
                "{message}"
            );
        }
        assert_eq!(records[0].cleanup, CleanupState::Verified);
    }

    /// A note that says the cleanup did not finish says the reaper took
    /// over, and what it did.
    #[test]
    fn an_unfinished_cleanup_after_a_sigterm_names_the_reaper() {
        let dir = tempfile::tempdir().unwrap();
        let journals = journal::dir(dir.path());
        std::fs::create_dir_all(&journals).unwrap();
        let path = journals.join("faults-41.jsonl");
        let journal = Journal::at(path.clone());
        let entry = JournalEntry::new(Event::Pending, "sandbox", "ct-r1-01", "r1", "t::a", None);
        journal.append(&entry).unwrap();
        let note = Terminated::new("r1", "SIGTERM", vec!["t::a".into()], false, 1);
        terminated::write(&path, &note).unwrap();
        let records = from_journal(dir.path(), &[], "r1").unwrap();
        let message = records[0].message.as_deref().unwrap_or_default();
        assert!(
            message.starts_with("terminated (SIGTERM), cleanup unfinished (1 not settled")
                && message.contains("its reaper"),
            "{message}"
        );
    }
}
