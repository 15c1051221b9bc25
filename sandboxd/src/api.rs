//! Wire types shared by the server, `sandboxctl` and clients.
//!
//! Everything here crosses a process boundary: field names and shapes are
//! part of the API and change only deliberately.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The single JSON line `sandboxd serve` prints on stdout when it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handle {
    /// Instance name, `sandboxd-<short id>`, stable across restarts with the same HOME.
    pub name: String,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The port the server listens on.
    pub port: u16,
    /// The bearer token (a secret: never print or log it).
    pub token: String,
}

/// `GET /api/health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// Always `"ok"`.
    pub status: String,
    /// Instance name.
    pub name: String,
    /// Milliseconds since this process started.
    pub uptime_ms: u64,
}

/// `GET /api/capabilities`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Capabilities {
    /// Supported features: `exec`, `files`, `processes`, `signals`.
    pub capabilities: Vec<String>,
    /// Budgets of this instance.
    pub limits: Limits,
}

/// Budgets advertised in [`Capabilities`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limits {
    /// `--max-sandboxes`, or `null` when unlimited.
    pub max_sandboxes: Option<usize>,
}

/// Lifecycle state of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    /// Usable.
    Ready,
    /// Deletion accepted; processes and files are being removed.
    Deleting,
}

/// A sandbox as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// DNS label, unique per instance.
    pub name: String,
    /// Free-form labels, filterable with `label=key=value`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Environment added to every command run in the sandbox.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `ready` or `deleting`.
    pub state: SandboxState,
    /// Creation time, unix milliseconds.
    pub created_at: u64,
}

/// `POST /api/sandboxes` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSandbox {
    /// DNS label: 1–63 of `a-z`, `0-9`, `-`, not starting or ending with `-`.
    pub name: String,
    /// Optional labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Optional environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// `GET /api/sandboxes` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxList {
    /// One page of sandboxes, sorted by name.
    pub items: Vec<Sandbox>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    pub next_page_token: Option<String>,
}

/// `POST /api/sandboxes/{name}/exec` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// Program and arguments; the program is looked up in `PATH`.
    pub argv: Vec<String>,
    /// Per-call environment, applied over the sandbox's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kill the command after this many milliseconds (default 30000, max 600000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `POST /api/sandboxes/{name}/exec` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecResult {
    /// Exit code, `null` when killed by a signal.
    pub exit_code: Option<i32>,
    /// Signal that killed the command, if any.
    pub signal: Option<i32>,
    /// True when the command ran over its timeout and was killed.
    pub timed_out: bool,
    /// Standard output (lossy UTF-8, capped at 1 MiB).
    pub stdout: String,
    /// Standard error (lossy UTF-8, capped at 1 MiB).
    pub stderr: String,
}

/// `POST /api/sandboxes/{name}/processes` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartProcess {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Per-process environment, applied over the sandbox's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// `POST /api/sandboxes/{name}/processes` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    /// Process id; also the id of its process group.
    pub pid: i32,
}

/// State of a background process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessState {
    /// Still running.
    Running,
    /// Exited (see `exit_code` / `signal`).
    Exited,
}

/// A background process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id (and process group id).
    pub pid: i32,
    /// What was started.
    pub argv: Vec<String>,
    /// `running` or `exited`.
    pub state: ProcessState,
    /// Exit code once exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal once killed.
    pub signal: Option<i32>,
}

/// `GET /api/sandboxes/{name}/processes` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessList {
    /// Processes, by pid.
    pub items: Vec<ProcessInfo>,
}

/// `POST .../processes/{pid}/signal` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// One of `TERM`, `INT`, `KILL`, `HUP`, `USR1` (a `SIG` prefix is accepted).
    pub signal: String,
}

/// Answer of a successful `PUT .../files/{path}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileWritten {
    /// The path as given, relative to the sandbox root.
    pub path: String,
    /// Bytes written.
    pub size: u64,
}

/// `GET /api/sandboxes/{name}/files`: the tree under the sandbox root,
/// depth first in path order, symlinks listed but not followed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileList {
    /// At most [`FileList::MAX_ITEMS`] entries.
    pub items: Vec<FileEntry>,
    /// True when the tree has more entries than were listed.
    pub truncated: bool,
}

impl FileList {
    /// The most entries one answer lists.
    pub const MAX_ITEMS: usize = 1000;
}

/// One entry of a [`FileList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the sandbox root, `/`-separated.
    pub path: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    /// Bytes (files only; 0 otherwise).
    pub size: u64,
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an [`ErrorBody`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Machine-readable code, e.g. `not_found`, `token_expired`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "sandboxd_session";

/// Whether `name` is a valid sandbox name (a DNS label).
pub fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for ok in ["a", "a-b", "ct-abc-01", &"x".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"x".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
