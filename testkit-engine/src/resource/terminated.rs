//! The note a test process leaves when a signal (SIGTERM, SIGINT) ended
//! it: which tests were running, and whether their cleanup finished. The
//! process exits before its tests write their records, so the runner
//! builds them; the note is what tells a test that was terminated and
//! cleaned up after itself from one that was SIGKILLed, whose reaper
//! cleaned up after it. It lies beside the process's journal, as
//! `<binary>-<pid>.terminated.json`, written once, by the process itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What ends a note's name.
pub const SUFFIX: &str = "terminated.json";

/// A test process's last word after a signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Terminated {
    /// The run the process was a part of.
    pub run: String,
    /// The signal: `SIGTERM` or `SIGINT`.
    pub signal: String,
    /// The tests (full names) that were running when it came.
    pub tests: Vec<String>,
    /// Whether every resource and fault of the process was settled
    /// (verified gone, undone and proven, or known leaked) within the
    /// grace.
    pub cleanup_finished: bool,
    /// How many were not verified gone or undone when the process exited.
    pub left: usize,
    /// When it was written, in ms since the epoch.
    pub time: u64,
}

impl Terminated {
    /// A note of `signal`, for the tests `tests` of the run `run`,
    /// written now.
    pub fn new(
        run: &str,
        signal: &str,
        tests: Vec<String>,
        cleanup_finished: bool,
        left: usize,
    ) -> Self {
        Terminated {
            run: run.to_owned(),
            signal: signal.to_owned(),
            tests,
            cleanup_finished,
            left,
            time: super::journal::now_ms(),
        }
    }

    /// Whether the cleanup was done, all of it, by the process itself.
    pub fn cleanup_verified(&self) -> bool {
        self.cleanup_finished && self.left == 0
    }
}

/// Where the note of the process whose journal is `journal` lies.
pub fn path_for(journal: &Path) -> PathBuf {
    journal.with_extension(SUFFIX)
}

/// Writes the note beside `journal`.
pub fn write(journal: &Path, note: &Terminated) -> std::io::Result<()> {
    let text = serde_json::to_string(note).map_err(std::io::Error::other)?;
    std::fs::write(path_for(journal), text)
}

/// The note at `path`, when there is a readable one.
pub fn read(path: &Path) -> Option<Terminated> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_beside_its_journal() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("faults-42.jsonl");
        let note = Terminated::new("r1", "SIGTERM", vec!["faults::hold".into()], true, 0);
        write(&journal, &note).unwrap();
        assert_eq!(
            path_for(&journal),
            dir.path().join("faults-42.terminated.json")
        );
        assert_eq!(read(&path_for(&journal)), Some(note.clone()));
        assert!(note.cleanup_verified());
    }
}
