//! A pod that is one process group on this host (the runner's default
//! pod, a suite's `[pod] command`): what the handle says of it, so that a
//! test process can say what state the pod was in when the test hung.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How much of the end of the pod's log is read for its last lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// The pod's process group and the log of its stderr, as the handle's
/// `process` field gives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PodProcess {
    /// The group, whose id is its leader's pid.
    pub pgid: i32,
    /// The leader's start time (clock ticks since boot), against pid reuse.
    pub start_ticks: Option<u64>,
    /// The file its stderr goes to.
    pub log: PathBuf,
}

impl PodProcess {
    /// A process group, its leader started at `start_ticks`, logging to `log`.
    pub fn new(pgid: i32, start_ticks: Option<u64>, log: PathBuf) -> PodProcess {
        PodProcess {
            pgid,
            start_ticks,
            log,
        }
    }

    /// The group leader's state: `running`, `paused` (stopped by a signal,
    /// as a frozen node is) or `exited`.
    pub fn state(&self) -> &'static str {
        match crate::process::state_of(self.pgid) {
            Some((_, ticks)) if self.start_ticks.is_some_and(|t| t != ticks) => "exited",
            Some(('T' | 't', _)) => "paused",
            Some(('Z' | 'X' | 'x', _)) | None => "exited",
            Some(_) => "running",
        }
    }

    /// `node pod: STATE; its last N lines:` and those lines of its log,
    /// indented, as a cluster's nodes are described.
    pub fn describe(&self, tail: usize) -> String {
        let lines = match last_lines(&self.log, tail) {
            Ok(lines) if lines.is_empty() => "    (it has printed nothing)".to_owned(),
            Ok(lines) => lines
                .iter()
                .map(|l| format!("    {}", capped(l)))
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => format!(
                "    (its output could not be read from {}: {e})",
                self.log.display()
            ),
        };
        format!(
            "node pod (process group {}): {}; its last {tail} lines:\n{lines}",
            self.pgid,
            self.state()
        )
    }
}

/// The last `n` lines of `path`, read from its last [`TAIL_BYTES`]. A
/// last line longer than that is given by its end, after `… `.
fn last_lines(path: &std::path::Path, n: usize) -> std::io::Result<Vec<String>> {
    // Only a regular file: a handle may name a FIFO, whose open would
    // wait for a writer, or a device that never ends. (Opened without
    // blocking too, should it be swapped for one in between.)
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let len = file.metadata()?.len();
    let from = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    // A read from the middle may start inside a character: its other
    // bytes are not text (and would hide the end of a secret from the
    // mask of a cut start below).
    let whole = if from > 0 {
        bytes
            .iter()
            .position(|b| b & 0xC0 != 0x80)
            .unwrap_or(bytes.len())
    } else {
        0
    };
    let text = String::from_utf8_lossy(&bytes[whole..]);
    let mut text: &str = &text;
    // A read from the middle of the file starts in the middle of a line:
    // drop that part, unless it is all there is.
    if from > 0 {
        match text.trim_end_matches('\n').find('\n') {
            Some(newline) => text = &text[newline + 1..],
            None => {
                // Redacted, then its cut start masked: the part of a
                // secret the cut left is no less a secret.
                let mut kept = crate::redact(text.trim_end_matches('\n')).into_owned();
                crate::redact::mask_cut_start(&mut kept);
                return Ok(vec![format!("… {kept}")]);
            }
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(n);
    Ok(lines[skip..].iter().map(|l| (*l).to_owned()).collect())
}

/// The longest a node's line may be in a report: a line as long as a
/// log can hold would swamp the failure it is part of.
const LINE_CAP: usize = 2048;

/// `line` as a report shows it: redacted, then cut at [`LINE_CAP`] bytes
/// (a secret the cut splits masked, [`crate::redact::redact_then_cut`]),
/// its control characters (a NUL, an escape sequence) shown as `�` so
/// that they reach no terminal and no XML.
pub(crate) fn capped(line: &str) -> String {
    let (kept, more) = crate::redact::redact_then_cut(line, LINE_CAP);
    let mut shown: String = kept
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect();
    if more > 0 {
        shown.push_str(&format!(" … ({more} bytes more)"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(log: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod.stderr.log");
        std::fs::write(&path, log).unwrap();
        PodProcess::new(i32::MAX, None, path).describe(20)
    }

    #[test]
    fn a_last_line_longer_than_the_tail_read_is_shown_cut_not_as_nothing() {
        let mut log = b"first\n".to_vec();
        log.extend(std::iter::repeat_n(b'x', 100 * 1024));
        log.push(b'\n');
        let said = described(&log);
        assert!(!said.contains("printed nothing"), "{said}");
        assert!(said.contains("    … xxxx"), "{said}");
        assert!(said.contains(" bytes more)"), "{said}");
        assert!(said.len() < 3 * 1024, "{} bytes", said.len());
    }

    #[test]
    fn a_log_that_is_not_a_regular_file_is_named_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pod.stderr.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // No writer: an open that blocks would never return.
        let said = PodProcess::new(i32::MAX, None, fifo).describe(20);
        assert!(said.contains("it is not a regular file"), "{said}");
    }

    #[test]
    fn a_secret_split_by_a_cut_is_masked_and_control_bytes_are_not_shown() {
        crate::redact::register_secret("SeCrEtStRaDdLe0123456789");
        let mut line = "a".repeat(LINE_CAP - 10);
        line.push_str("SeCrEtStRaDdLe0123456789\u{1b}[31mred\0");
        let said = described(line.as_bytes());
        assert!(!said.contains("SeCrEtSt"), "{said}");
        let mut long = "b".repeat(70 * 1024);
        long.push_str("SeCrEtStRaDdLe0123456789");
        long.push_str(&"c".repeat(64 * 1024 - 10));
        let said = described(long.as_bytes());
        assert!(!said.contains("0123456789"), "{said}");
        // A secret of more than one byte a character, its first one cut.
        crate::redact::register_secret("ééééé0123456789XYZ");
        for k in 0..4 {
            let mut long = "b".repeat(70 * 1024);
            long.push_str("ééééé0123456789XYZ");
            long.push_str(&"c".repeat(64 * 1024 - 23 + 1 + 2 * k));
            let said = described(long.as_bytes());
            assert!(!said.contains("0123456789"), "{k}: {}", &said[..200]);
        }
        let said = described(b"x\x1b[2Jy\0z\n");
        assert!(said.ends_with("    x\u{FFFD}[2Jy\u{FFFD}z"), "{said}");
    }

    #[test]
    fn the_last_lines_are_shown_and_a_cut_first_line_dropped() {
        let mut log = std::iter::repeat_n(b'y', 70 * 1024).collect::<Vec<u8>>();
        log.extend(b"\nsecond\nthird\n");
        let said = described(&log);
        assert!(said.ends_with("lines:\n    second\n    third"), "{said}");
        assert!(described(b"").contains("printed nothing"));
    }
}
