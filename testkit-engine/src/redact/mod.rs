//! Secrets and their redaction.
//!
//! A secret (a pod's token, its session) is registered once; every place that
//! writes output a person or a CI system will read (failure messages, logs,
//! records, JUnit, artifacts) passes its text through [`redact`]. Redaction
//! happens where output is written, so a test that prints a secret by
//! mistake still leaks nothing.
//!
//! A process redacts only what it knows, and a credential obtained by one
//! process of a run (a test's renewal, a login after an expiry) is unknown
//! to the others, the runner included, which copies the pod's logs. So each
//! process that obtains one also [records](record_secret) it in the run's
//! ledger, `<secrets dir>/credentials` (mode 0600, never in the results
//! folder), and a process about to write what others may have seen
//! [registers the ledger](register_recorded) first.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::sync::RwLock;

pub mod stdio;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are not registered: replacing a two-letter
/// string everywhere would garble output and protect nothing.
const MIN_SECRET_LEN: usize = 6;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Registers `secret` so that it never appears in output.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_owned());
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    Cow::Owned(out)
}

/// The run's ledger of credentials, in its secrets dir: one JSON string a
/// line, appended by every process that obtains one.
pub const LEDGER_FILE: &str = "credentials";

/// Registers `secret` and appends it to the ledger of the secrets dir `dir`
/// (created with mode 0600), so that every process of the run can redact
/// it. One `write` on an `O_APPEND` file: lines of concurrent processes do
/// not interleave.
pub fn record_secret(dir: &Path, secret: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    register_secret(secret);
    if secret.len() < MIN_SECRET_LEN {
        return Ok(());
    }
    let mut line = serde_json::to_string(secret).map_err(std::io::Error::other)?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join(LEDGER_FILE))?
        .write_all(line.as_bytes())
}

/// Registers every secret of the ledger of the secrets dir `dir`: what any
/// process of the run obtained. Returns how many it holds; a missing ledger
/// holds none.
pub fn register_recorded(dir: &Path) -> usize {
    let Ok(text) = std::fs::read_to_string(dir.join(LEDGER_FILE)) else {
        return 0;
    };
    let mut n = 0;
    for secret in text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
    {
        register_secret(&secret);
        n += 1;
    }
    n
}

/// Redacts the text file `path` in place, when it holds a registered
/// secret.
pub fn redact_file(path: &Path) {
    if let Ok(bytes) = std::fs::read(path) {
        let text = String::from_utf8_lossy(&bytes);
        if let Cow::Owned(r) = redact(&text) {
            let _ = std::fs::write(path, r.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_occurrence_and_leaves_other_text_alone() {
        register_secret("tok-abcdef-123");
        assert_eq!(
            redact("a tok-abcdef-123 b tok-abcdef-123"),
            "a [REDACTED] b [REDACTED]"
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_recorded_secret_is_registered_by_whoever_reads_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        record_secret(dir.path(), "ledger-secret-1").unwrap();
        record_secret(dir.path(), "ledger \"secret\" 2").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(LEDGER_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the ledger is readable by others: {mode:o}"
        );
        assert_eq!(register_recorded(dir.path()), 2);
        assert_eq!(redact("a ledger \"secret\" 2 b"), "a [REDACTED] b");
    }

    #[test]
    fn short_strings_are_not_secrets() {
        register_secret("ab");
        assert_eq!(redact("about"), "about");
    }
}
