//! The per-test records of a run. The tests write their own; a test nextest
//! listed that wrote none (its process crashed or was killed, or it is a
//! plain libtest test) gets one synthesized here from what the engine said,
//! so every listed test is counted.

use std::collections::BTreeSet;
use std::path::Path;

use testkit::report::{self, FailureKind, Outcome, TestRecord};

use super::{Listed, TestsSpec};

/// The records of the run.
pub(super) struct Records {
    pub(super) records: Vec<TestRecord>,
    /// `binary::name` of each listed test without a record that counts as
    /// a failure.
    pub(super) crashed: Vec<String>,
}

/// Reads this run's records, and writes one for every listed test that has
/// none. The error is the tests phase's evidence.
pub(super) fn complete(
    spec: &TestsSpec<'_>,
    listed: &[Listed],
    interrupted: bool,
) -> Result<Records, String> {
    let mut records: Vec<TestRecord> = match report::read_records(spec.results_dir) {
        Ok(r) => r.into_iter().filter(|r| r.run_id == spec.run_id).collect(),
        Err(e) => return Err(format!("cannot read the test records: {e}")),
    };
    let have: BTreeSet<(String, String)> = records
        .iter()
        .map(|r| (r.binary.clone(), r.name.clone()))
        .collect();
    let mut crashed = Vec::new();
    let mut written = Vec::new();
    for t in listed {
        if have.contains(&(t.binary.clone(), t.name.clone())) {
            continue;
        }
        let synthetic = synthesize(spec, t, interrupted);
        if synthetic.outcome == Outcome::Failed {
            crashed.push(format!("{}::{}", t.binary, t.name));
        }
        written.push(synthetic);
    }
    if let Err(e) = report::write_records(spec.results_dir, &written) {
        eprintln!("testkit-runner: {e}");
    }
    records.extend(written);
    Ok(Records { records, crashed })
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
        (Outcome::Failed, Some(message)) => record.fail(FailureKind::Error, message),
        (outcome, _) => record.outcome = outcome,
    }
    record.skip_reason = skip;
    record
}

/// Tests recorded so far.
pub(super) fn count_records(results_dir: &Path) -> usize {
    report::count_records(results_dir)
}
