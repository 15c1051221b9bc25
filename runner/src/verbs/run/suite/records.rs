//! The per-test records of a run. The tests write their own; a test nextest
//! listed that wrote none (its process crashed or was killed, or it is a
//! plain libtest test) gets one synthesized here from what its journal and
//! reaper recorded ([`crate::killed`]) and what the engine said, so every
//! listed test is counted. A synthesized record of a test that ran carries
//! when it ran (as nextest reported it): a record without a start would
//! make the run look older than any earlier run of the same folder.

use std::collections::BTreeMap;
use std::path::Path;

use testkit_engine::config::FlakyPolicy;
use testkit_engine::report::{
    self, FailureCategory, FailureKind, Outcome, ResourceState, TestRecord,
};
use testkit_engine::resource::JournalEntry;

use crate::killed::journaled;

use super::{Listed, TestsIncomplete, TestsSpec};

/// The records of the run.
pub(super) struct Records {
    pub(super) records: Vec<TestRecord>,
    /// `binary::name` of each listed test without a record that counts as
    /// a failure.
    pub(super) crashed: Vec<String>,
    /// `binary::name` of each test that ran and that the engine did not
    /// list: the list is what the run runs, so its record came from
    /// elsewhere.
    pub(super) unlisted: Vec<String>,
}

/// Reads this run's records, and writes one for every listed test that has
/// none. The error is the tests phase's evidence.
pub(super) fn complete(
    spec: &TestsSpec<'_>,
    listed: &[Listed],
    interrupted: bool,
) -> Result<Records, TestsIncomplete> {
    let records = read_run_records(spec)?;
    let (journal, mut written, mut crashed) = if interrupted {
        let journal = testkit_engine::resource::read_journal(spec.results_dir)
            .into_iter()
            .filter(|e| e.run == spec.run_id)
            .collect();
        (journal, Vec::new(), Vec::new())
    } else {
        let (killed, crashed) = killed_records(spec, listed, &records)?;
        (Vec::new(), killed, crashed)
    };
    let have = last_attempts(records.iter().chain(&written));
    let mut testkit_binaries = BTreeMap::new();
    for t in listed {
        // A test whose last attempt (nextest's `name#N`) wrote a record is
        // recorded; one whose retry left none crashed on that attempt.
        if have
            .get(&(t.binary.clone(), t.name.clone()))
            .is_some_and(|&recorded| recorded >= t.attempt.max(1))
        {
            continue;
        }
        let testkit = *testkit_binaries
            .entry(t.binary_path.clone())
            .or_insert_with(|| is_testkit(t.binary_path.as_deref()));
        let synthetic = missing_record(spec, t, testkit, interrupted, &journal);
        if synthetic.outcome == Outcome::Failed && !interrupted {
            crashed.push(format!("{}::{}", t.binary, t.name));
        }
        written.push(synthetic);
    }
    let records = write_and_reread(spec, records, written)?;
    // A retry's record says which attempt it was: folded with the records
    // of the attempts before it, or given attempts that say they left none
    // (nextest retried them: they failed). Folding twice changes nothing.
    let mut records = report::fold_attempts(records);
    // The engine saw the test fail, and its record says it passed: a
    // record written over the test's own (by a child of it, or anything
    // else) is not the engine's word, and a pass is never taken over a
    // failure.
    for r in &mut records {
        let seen = listed.iter().find(|t| {
            t.binary == r.binary && t.name == r.name && t.attempt.max(1) == r.attempt.max(1)
        });
        if let Some(event) = seen
            .and_then(|t| t.event.as_deref())
            .filter(|e| !matches!(*e, "ok" | "ignored"))
        {
            // Under `[suite] flaky = "fail"` nextest itself reports a test
            // that passed on a retry as failed: the run fails for it anyway.
            let flaky_failed = r.is_flaky() && spec.flaky == FlakyPolicy::Fail;
            if matches!(r.outcome, Outcome::Passed) && !flaky_failed {
                r.fail(
                    FailureKind::Error,
                    format!(
                        "the engine saw the test fail (nextest: {event}), and its record says \
                         it passed: the record is not the test's own end, or the test failed \
                         after it was written; see tests.log"
                    ),
                );
                // Not the product's word: testkit's records disagree.
                r.categorize(FailureCategory::Testkit);
            }
        }
    }
    let listed_names: std::collections::BTreeSet<(&str, &str)> = listed
        .iter()
        .map(|t| (t.binary.as_str(), t.name.as_str()))
        .collect();
    // A record of a test that never started (a statically ignored one, of a
    // binary the filters left out but nextest listed) is no run of it.
    let unlisted = records
        .iter()
        .filter(|r| r.started_at_ms > 0 || r.attempt > 1)
        .filter(|r| !listed_names.contains(&(r.binary.as_str(), r.name.as_str())))
        .map(|r| format!("{}::{}", r.binary, r.name))
        .collect();
    Ok(Records {
        records,
        crashed,
        unlisted,
    })
}

/// The records of this run in the results folder.
fn read_run_records(spec: &TestsSpec<'_>) -> Result<Vec<TestRecord>, TestsIncomplete> {
    match report::read_records(spec.results_dir) {
        Ok(r) => Ok(r.into_iter().filter(|r| r.run_id == spec.run_id).collect()),
        Err(e) => Err(TestsIncomplete::Records(e)),
    }
}

/// The records of tests that began and never ended: their process died
/// (their start, their journal and their reaper say what happened), or
/// their record was lost; with what nextest said of each, and their names,
/// as crashed.
fn killed_records(
    spec: &TestsSpec<'_>,
    listed: &[Listed],
    records: &[TestRecord],
) -> Result<(Vec<TestRecord>, Vec<String>), TestsIncomplete> {
    let mut killed = crate::killed::from_journal(spec.results_dir, records, spec.run_id)
        .map_err(TestsIncomplete::Starts)?;
    for record in &mut killed {
        let event = listed
            .iter()
            .find(|t| t.binary == record.binary && t.name == record.name)
            .and_then(|t| t.event.as_ref());
        if let (Some(event), Some(message)) = (event, &mut record.message) {
            message.push_str(&format!(" (nextest: {event})"));
        }
    }
    let crashed = killed
        .iter()
        .map(|r| format!("{}::{}", r.binary, r.name))
        .collect();
    Ok((killed, crashed))
}

/// The last attempt each test recorded.
fn last_attempts<'a>(
    records: impl Iterator<Item = &'a TestRecord>,
) -> BTreeMap<(String, String), u32> {
    let mut have = BTreeMap::new();
    for r in records {
        let last = have.entry((r.binary.clone(), r.name.clone())).or_insert(0);
        *last = (*last).max(r.attempt);
    }
    have
}

/// The record of a listed test that wrote none, of the attempt nextest
/// last reported.
fn missing_record(
    spec: &TestsSpec<'_>,
    t: &Listed,
    testkit: bool,
    interrupted: bool,
    journal: &[JournalEntry],
) -> TestRecord {
    let mut synthetic = if interrupted {
        interrupted_record(spec, t, journal)
    } else if testkit && t.event.as_deref() == Some("ok") {
        exited_unrecorded(spec, t)
    } else {
        synthesize(spec, t, interrupted)
    };
    synthetic.attempt = t.attempt.max(1);
    synthetic
}

/// Writes the records made here beside the tests' own, and reads the run's
/// records again: a listing of ignored tests counts only for a run with
/// records in the folder, and this run's may all be written here. Records
/// that cannot be written are still counted.
fn write_and_reread(
    spec: &TestsSpec<'_>,
    mut records: Vec<TestRecord>,
    written: Vec<TestRecord>,
) -> Result<Vec<TestRecord>, TestsIncomplete> {
    match report::write_records(spec.results_dir, &written) {
        Ok(()) if !written.is_empty() => read_run_records(spec),
        Ok(()) => Ok(records),
        Err(e) => {
            eprintln!("testkit-runner: {e}");
            records.extend(written);
            Ok(records)
        }
    }
}

/// Whether the test binary at `path` is testkit's; an unknown or unreadable
/// binary is taken for a plain one, as before this check existed.
fn is_testkit(path: Option<&Path>) -> bool {
    path.is_some_and(|p| report::is_testkit_binary(p).unwrap_or(false))
}

/// The record of a test of a testkit binary that the engine saw pass but
/// that wrote no record: its process ended before the harness could record
/// it (`std::process::exit`, an abort at exit). It did not pass.
fn exited_unrecorded(spec: &TestsSpec<'_>, t: &Listed) -> TestRecord {
    let mut record = TestRecord::new(spec.run_id, &t.binary, &t.name);
    record.fail(
        FailureKind::Error,
        "no record: the engine says it passed, but its process exited before testkit recorded \
         it (a call to std::process::exit, or a crash on the way out); a testkit test that \
         passes always writes its record; see tests.log"
            .to_owned(),
    );
    record.categorize(FailureCategory::Infrastructure);
    record
}

/// The record of a listed test that wrote none: a plain (non-testkit) test
/// takes nextest's word; anything else is a failure named as a crash.
fn synthesize(spec: &TestsSpec<'_>, t: &Listed, interrupted: bool) -> TestRecord {
    let (outcome, message, skip) = match t.event.as_deref() {
        Some("ok") => (Outcome::Passed, None, None),
        Some("ignored") => (
            Outcome::Skipped,
            None,
            Some("ignored (nextest)".to_owned()),
        ),
        Some(event) => (
            Outcome::Failed,
            Some(format!(
                "no record: the test process crashed or was killed before it wrote one (nextest: {event}); see tests.log"
            )),
            None,
        ),
        None if interrupted => (
            Outcome::Skipped,
            None,
            Some("not run: the run was interrupted".to_owned()),
        ),
        None => (
            Outcome::Failed,
            Some("no record and no result: the test never reported (its binary crashed or was killed); see tests.log".to_owned()),
            None,
        ),
    };
    let mut record = TestRecord::new(spec.run_id, &t.binary, &t.name);
    match (outcome, message) {
        (Outcome::Failed, Some(message)) => {
            // Its process died under it, or never reported.
            record.fail(FailureKind::Error, message);
            record.categorize(FailureCategory::Infrastructure);
        }
        (outcome, _) => record.outcome = outcome,
    }
    record.skip_reason = skip;
    stamp(&mut record, t);
    record
}

/// When a test that ran (its record is not a skip) ran: from nextest's
/// `started` to its result, as they arrived; a test nextest never reported
/// is stamped now, when it is known to have been lost.
fn stamp(record: &mut TestRecord, t: &Listed) {
    if record.outcome == Outcome::Skipped {
        return;
    }
    let now = testkit_engine::resource::journal::now_ms();
    let started = t.started_ms.or(t.ended_ms).unwrap_or(now);
    record.started_at_ms = started;
    record.duration_ms = t.ended_ms.unwrap_or(now).saturating_sub(started);
}

/// The record of a listed test that wrote none in an interrupted run: one
/// that was running (nextest reported it, or the journal has its resources)
/// was interrupted, with what the journal knows of its resources; one that
/// never started was not run.
fn interrupted_record(spec: &TestsSpec<'_>, t: &Listed, journal: &[JournalEntry]) -> TestRecord {
    let resources = journaled(journal, &t.name);
    let ran = resources.is_some() || t.event.as_deref().is_some_and(|e| e != "ignored");
    if !ran || t.event.as_deref() == Some("ok") {
        return synthesize(spec, t, true);
    }
    let (resources, cleanup) = resources.unwrap_or_default();
    let count = |state: ResourceState| resources.iter().filter(|r| r.state == state).count();
    let known = if resources.is_empty() {
        "the journal has no resource of it".to_owned()
    } else {
        format!(
            "the journal has {} resource(s) of it: {} deleted and verified gone, {} gone before its delete (something else deleted them), {} left (created or pending), {} leaked, {} kept",
            resources.len(),
            count(ResourceState::Deleted),
            count(ResourceState::GoneBeforeDelete),
            count(ResourceState::Created) + count(ResourceState::Pending),
            count(ResourceState::Leaked),
            count(ResourceState::Kept),
        )
    };
    let seen = t
        .event
        .as_deref()
        .map(|e| format!(" (nextest: {e})"))
        .unwrap_or_default();
    let mut record = TestRecord::new(spec.run_id, &t.binary, &t.name);
    record.fail(
        FailureKind::Error,
        format!("interrupted: the run was interrupted while the test ran{seen}; {known}"),
    );
    record.categorize(FailureCategory::Infrastructure);
    record.resources = resources;
    record.cleanup = cleanup;
    stamp(&mut record, t);
    record
}

/// Tests recorded so far.
pub(super) fn count_records(results_dir: &Path) -> usize {
    report::count_records(results_dir)
}
