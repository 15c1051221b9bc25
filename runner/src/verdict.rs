//! `verdict.jsonl`: one JSON line per phase, appended and synced as soon as
//! the phase is decided, so that a run killed halfway leaves a readable
//! record of what it got through.
//!
//! ```text
//! {"phase":"up","verdict":"pass","evidence":"…","duration_ms":412,"at":1700000000000}
//! {"phase":"health","verdict":"fail","evidence":"…","duration_ms":9,"at":1700000000000,"category":"product"}
//! …
//! {"phase":"run","verdict":"fail","exit_code":1,"at":1700000000000}
//! ```

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use testkit_engine::report::FailureCategory;

/// A phase's verdict. A phase that did not run is `Skip`, never `Pass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl Verdict {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Skip => "skip",
        }
    }
}

/// One decided phase.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhaseResult {
    pub(crate) phase: &'static str,
    pub(crate) verdict: Verdict,
    pub(crate) evidence: String,
    pub(crate) duration_ms: u64,
    pub(crate) at: u64,
    /// Whose fault a failed phase is (absent when it did not fail): see
    /// [`phase_category`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<FailureCategory>,
}

/// Whose fault the failure of `phase` is: the pod that did not come up,
/// crashed, or did not stop is the infrastructure's (a published port
/// taken, the engine failing, a node that died); a pod that came up and
/// did not answer health or auth, or left residue, is the product's. The
/// tests phase is the product's unless every failed test is another
/// category's: its tests say which ([`crate::summary::FailedTest`]).
pub(crate) fn phase_category(phase: &str) -> FailureCategory {
    match phase {
        "up" | "pod" | "down" => FailureCategory::Infrastructure,
        _ => FailureCategory::Product,
    }
}

impl PhaseResult {
    pub(crate) fn new(
        phase: &'static str,
        verdict: Verdict,
        evidence: impl Into<String>,
        took: Duration,
    ) -> PhaseResult {
        PhaseResult {
            phase,
            verdict,
            // Evidence quotes what pods and tools said: never let a token through.
            evidence: testkit_engine::redact(&evidence.into()).into_owned(),
            duration_ms: took.as_millis() as u64,
            at: now_ms(),
            category: (verdict == Verdict::Fail).then(|| phase_category(phase)),
        }
    }

    pub(crate) fn skip(phase: &'static str, why: impl Into<String>) -> PhaseResult {
        PhaseResult::new(phase, Verdict::Skip, why, Duration::ZERO)
    }
}

/// The open `verdict.jsonl` of a run.
pub(crate) struct VerdictLog {
    path: PathBuf,
    file: File,
    /// The first line that could not be written, and why.
    unwritten: Option<String>,
    /// Every line names the run: a folder reused by another run is read
    /// back as that run's.
    run_id: String,
}

impl VerdictLog {
    /// Creates or truncates `<results>/verdict.jsonl`.
    pub(crate) fn create(results_dir: &Path, run_id: &str) -> std::io::Result<VerdictLog> {
        let path = results_dir.join("verdict.jsonl");
        let file = File::create(&path)?;
        Ok(VerdictLog {
            path,
            file,
            unwritten: None,
            run_id: run_id.to_owned(),
        })
    }

    pub(crate) fn append(&mut self, result: &PhaseResult) {
        let mut line = serde_json::to_value(result).expect("serializable");
        line["run_id"] = self.run_id.clone().into();
        self.write_line(&line.to_string());
    }

    pub(crate) fn finish(&mut self, verdict: Verdict, exit_code: u8) {
        let line = serde_json::json!({
            "phase": "run",
            "verdict": verdict,
            "exit_code": exit_code,
            "at": now_ms(),
            "run_id": self.run_id,
        });
        self.write_line(&line.to_string());
    }

    fn write_line(&mut self, line: &str) {
        let result = writeln!(self.file, "{line}").and_then(|()| self.file.sync_data());
        if let Err(e) = result {
            eprintln!(
                "testkit-runner: failed to append to {}: {e}",
                self.path.display()
            );
            self.unwritten
                .get_or_insert_with(|| format!("{}: {e}", self.path.display()));
        }
    }

    /// Why a line of the log could not be written, if one could not.
    pub(crate) fn unwritten(&self) -> Option<&str> {
        self.unwritten.as_deref()
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
