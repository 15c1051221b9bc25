//! The progress line on a terminal: one line, rewritten in place, cleared
//! before anything else is printed. Nothing at all when stderr is not a
//! terminal (CI logs get the summary instead).

use std::io::{IsTerminal, Write};
use std::time::Duration;

/// `m:ss`.
pub(crate) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

/// Rewrites the progress line on a terminal; nothing elsewhere.
pub(crate) fn progress_line(text: &str) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{text}");
        let _ = std::io::stderr().flush();
    }
}

pub(crate) fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
}
