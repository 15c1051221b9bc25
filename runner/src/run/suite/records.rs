//! The per-test records of a run. The tests write their own; a test nextest
//! listed that wrote none (its process crashed or was killed, or it is a
//! plain libtest test) gets one synthesized here from what the engine said,
//! so every listed test is counted.

use std::collections::BTreeSet;
use std::path::Path;

use testkit::report;
use testkit::{Outcome, TestRecord};

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
    for t in listed {
        if have.contains(&(t.binary.clone(), t.name.clone())) {
            continue;
        }
        let synthetic = synthesize(spec, t, interrupted);
        if synthetic.outcome == Outcome::Failed {
            crashed.push(format!("{}::{}", t.binary, t.name));
        }
        write_record(spec.results_dir, &synthetic);
        records.push(synthetic);
    }
    Ok(Records { records, crashed })
}

/// The record of a listed test that wrote none: a plain (non-testkit) test
/// takes nextest's word; anything else is a failure named as a crash.
fn synthesize(spec: &TestsSpec<'_>, t: &Listed, interrupted: bool) -> TestRecord {
    let (outcome, message, skip) = match t.event.as_deref() {
        Some("ok") => ("passed", None, None),
        Some("ignored") => ("skipped", None, Some("ignored (nextest)".to_owned())),
        Some(event) => (
            "failed",
            Some(format!(
                "no record: the test process crashed or was killed before it wrote one (nextest: {event}); see tests.log"
            )),
            None,
        ),
        None if interrupted => ("skipped", None, Some("not run: the run was interrupted".to_owned())),
        None => (
            "failed",
            Some("no record and no result: the test never reported (its binary crashed or was killed); see tests.log".to_owned()),
            None,
        ),
    };
    let value = serde_json::json!({
        "schema": testkit::RECORD_SCHEMA_VERSION,
        "run_id": spec.run_id,
        "binary": t.binary,
        "name": t.name,
        "description": "",
        "file": "",
        "line": 0,
        "outcome": outcome,
        "failure_kind": if outcome == "failed" { Some("error") } else { None },
        "message": message,
        "skip_reason": skip,
        "started_at_ms": 0,
        "duration_ms": 0,
        "known_issue": null,
        "fails_with": null,
        "requires": [],
        "capabilities_missing": [],
        "resources": [],
        "cleanup": "nothing",
        "output": "",
    });
    serde_json::from_value(value).expect("a record of the documented schema")
}

fn write_record(results_dir: &Path, record: &TestRecord) {
    let file: String = record
        .name
        .replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = results_dir.join("records").join(&record.binary);
    let path = dir.join(format!("{file}.json"));
    let result = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(record).expect("serializable"),
        )
    });
    if let Err(e) = result {
        eprintln!("testkit-runner: failed to write {}: {e}", path.display());
    }
}

/// Tests recorded so far: a line per test in each process's `.jsonl`, or a
/// `.json` file per test.
pub(super) fn count_records(results_dir: &Path) -> usize {
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
