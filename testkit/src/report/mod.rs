//! Reporting: one record per test, JUnit built from the records, known issues.

pub(crate) mod known_issues;
mod record;

pub use record::{CleanupState, FailureKind, Outcome, ResourceRecord, TestRecord, RECORD_SCHEMA_VERSION};

use crate::run::Run;

/// Writes `record` to `<results>/records/<binary>/<test>.json`, atomically,
/// so that a reader never sees half a record.
pub(crate) fn write_record(run: &Run, record: &TestRecord) {
    let dir = run.results_dir.join("records").join(&run.binary);
    let path = dir.join(format!("{}.json", crate::cx::sanitize(&record.name)));
    let result = std::fs::create_dir_all(&dir).and_then(|()| {
        let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
        let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
        std::fs::write(&tmp, crate::redact::redact(&String::from_utf8_lossy(&json)).as_bytes())?;
        std::fs::rename(&tmp, &path)
    });
    if let Err(e) = result {
        eprintln!("testkit: failed to write the record of {} to {}: {e}", record.name, path.display());
    }
}

/// Called once per test process after its tests ran.
pub(crate) fn finish_binary(_run: &Run) {}
