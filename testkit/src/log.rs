//! A test's log: timestamped lines, shared so that everything acting for the
//! test (its `Cx`, its resource tracker, its waits) writes to one place. The
//! log is shown when the test fails, kept in its record, and echoed as it
//! happens under `--nocapture`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `--nocapture`: echo every line to stderr as it is logged.
static ECHO: AtomicBool = AtomicBool::new(false);

/// The harness calls this once it has read its arguments.
pub(crate) fn set_echo(echo: bool) {
    ECHO.store(echo, Ordering::Relaxed);
}

/// One test's log. Cloning shares it.
#[derive(Clone, Default)]
pub(crate) struct Log {
    inner: Arc<Mutex<LogInner>>,
}

#[derive(Default)]
struct LogInner {
    start: Option<Instant>,
    lines: Vec<String>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log { .. }")
    }
}

impl Log {
    pub(crate) fn push(&self, message: String) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let start = *inner.start.get_or_insert_with(Instant::now);
        let line = format!("[{:>8.3}s] {}", start.elapsed().as_secs_f64(), message);
        if ECHO.load(Ordering::Relaxed) {
            eprintln!("{}", crate::redact(&line));
        }
        inner.lines.push(line);
    }

    /// Times are relative to now from here on.
    pub(crate) fn start(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).start = Some(Instant::now());
    }

    /// The whole log, redacted.
    pub(crate) fn text(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        crate::redact(&inner.lines.join("\n")).into_owned()
    }
}
