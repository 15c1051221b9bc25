use std::time::Instant;

use super::{cap, tail, EntryKind};

/// Observations of a wait kept in its entry, the last ones.
pub(crate) const WAIT_OBSERVATIONS: usize = 20;

/// A step of `kind` that began at `started` and ends now.
pub fn record(kind: EntryKind, started: Instant, title: String, ok: bool, detail: String) {
    if let Some(r) = super::active::current() {
        r.add(
            kind,
            started,
            started.elapsed(),
            title,
            ok,
            cap(&detail),
            None,
        );
    }
}

/// A wait for `what` that began at `started`: what it saw last, in order
/// (`seen`, after `earlier` observations it no longer holds), and how it
/// ended (`failure`: its error).
pub fn wait(
    what: &str,
    started: Instant,
    failure: Option<String>,
    seen: &[String],
    earlier: usize,
) {
    if super::active::current().is_none() {
        return;
    }
    let kept = seen.len().saturating_sub(WAIT_OBSERVATIONS);
    let skipped = earlier + kept;
    let mut detail = String::new();
    if skipped > 0 {
        detail.push_str(&format!("… {skipped} observations before\n"));
    }
    for o in &seen[kept..] {
        detail.push_str(o);
        detail.push('\n');
    }
    let ok = failure.is_none();
    let title = match &failure {
        None => format!("wait for {what}: done"),
        Some(_) => format!("wait for {what}: gave up"),
    };
    if let Some(f) = failure {
        detail.push_str(&f);
    }
    record(EntryKind::Wait, started, title, ok, detail);
}

/// A run of the CLI: its command line, exit code and output tails.
pub fn cli(line: &str, started: Instant, exit: Option<i32>, stdout: &str, stderr: &str) {
    if super::active::current().is_none() {
        return;
    }
    let code = exit.map_or("no exit code".to_owned(), |c| format!("exit {c}"));
    let detail = format!("--- stdout\n{}\n--- stderr\n{}", tail(stdout), tail(stderr));
    if let Some(r) = super::active::current() {
        r.add(
            EntryKind::Cli,
            started,
            started.elapsed(),
            format!("{line} → {code}"),
            exit == Some(0),
            detail,
            None,
        );
    }
}
