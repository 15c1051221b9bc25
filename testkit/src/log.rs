//! A test's log: timestamped lines, shared so that everything acting for the
//! test (its `Cx`, its resource tracker, its waits) writes to one place. The
//! log is shown when the test fails, kept in its record, and echoed as it
//! happens under `--nocapture`.
//!
//! A log costs bounded memory whatever a test logs: its first
//! [`HEAD_BYTES`] and its last [`TAIL_BYTES`] are kept, each line cut at
//! [`LINE_BYTES`], and what was left out between them is named.

use std::collections::VecDeque;
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

/// The most of a log's beginning that is kept.
const HEAD_BYTES: usize = 512 * 1024;
/// The most of a log's end that is kept.
const TAIL_BYTES: usize = 512 * 1024;
/// The longest a line of the log may be: a wait that observes a whole
/// listing, or a test logging a body, is cut, saying by how much.
const LINE_BYTES: usize = 8 * 1024;
/// How much past [`LINE_BYTES`] a long line keeps until the log is read:
/// it is cut only then, after redaction with the secrets known by then
/// (one another process recorded meanwhile included), and a secret the
/// cut splits is masked.
const LINE_SLACK: usize = 1024;

/// A line of the log as kept: its text (at most [`LINE_BYTES`] +
/// [`LINE_SLACK`]), unredacted, and how many bytes of it were left out.
struct Line {
    text: String,
    beyond: usize,
}

impl Line {
    fn new(mut text: String) -> Line {
        let mut beyond = 0;
        if text.len() > LINE_BYTES + LINE_SLACK {
            let mut end = LINE_BYTES + LINE_SLACK;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            beyond = text.len() - end;
            text.truncate(end);
        }
        Line { text, beyond }
    }

    fn len(&self) -> usize {
        self.text.len()
    }

    /// The line as the log shows it: redacted, cut at [`LINE_BYTES`],
    /// saying what was left out.
    fn shown(&self) -> std::borrow::Cow<'_, str> {
        if self.text.len() <= LINE_BYTES && self.beyond == 0 {
            return crate::redact(&self.text);
        }
        // Cut where it was kept too: the end of what was kept may be the
        // start of a secret, whatever redaction before it shortened.
        let (mut kept, cut) = if self.beyond > 0 {
            crate::engine::redact::redact_cut_text(&self.text, LINE_BYTES)
        } else {
            crate::engine::redact::redact_then_cut(&self.text, LINE_BYTES)
        };
        kept.push_str(&format!(
            " … ({} bytes more of this line left out)",
            cut + self.beyond
        ));
        kept.into()
    }
}

#[derive(Default)]
struct LogInner {
    start: Option<Instant>,
    /// The first lines, up to [`HEAD_BYTES`].
    head: Vec<Line>,
    head_bytes: usize,
    /// The last lines after the head, up to [`TAIL_BYTES`].
    tail: VecDeque<Line>,
    tail_bytes: usize,
    /// Lines dropped between head and tail, and their bytes.
    dropped: usize,
    dropped_bytes: usize,
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
        let line = Line::new(line);
        if inner.head_bytes + line.len() <= HEAD_BYTES && inner.tail.is_empty() {
            inner.head_bytes += line.len();
            inner.head.push(line);
            return;
        }
        inner.tail_bytes += line.len();
        inner.tail.push_back(line);
        while inner.tail_bytes > TAIL_BYTES {
            let Some(gone) = inner.tail.pop_front() else {
                break;
            };
            inner.tail_bytes -= gone.len();
            inner.dropped += 1;
            inner.dropped_bytes += gone.len();
        }
    }

    /// Times are relative to now from here on.
    pub(crate) fn start(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).start = Some(Instant::now());
    }

    /// The whole log, redacted.
    pub(crate) fn text(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines: Vec<std::borrow::Cow<'_, str>> =
            inner.head.iter().map(Line::shown).collect();
        if inner.dropped > 0 {
            lines.push(
                format!(
                    "… {} lines ({} bytes) of this log left out here: a log keeps its first and last 512 KiB",
                    inner.dropped, inner.dropped_bytes
                )
                .into(),
            );
        }
        lines.extend(inner.tail.iter().map(Line::shown));
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_keeps_its_first_and_last_part_and_names_what_it_left_out() {
        let log = Log::default();
        for i in 0..20_000 {
            log.push(format!("line {i} {}", "x".repeat(100)));
        }
        log.push("y".repeat(100_000));
        let text = log.text();
        assert!(
            text.len() < HEAD_BYTES + TAIL_BYTES + LINE_BYTES + 1024,
            "{}",
            text.len()
        );
        assert!(text.contains("] line 0 xxx"), "the first line is kept");
        assert!(text.contains("] line 19999 xxx"), "the last lines are kept");
        assert!(text.contains(" lines ("), "the gap is named");
        assert!(text.contains("bytes) of this log left out here"));
        assert!(
            text.ends_with("bytes more of this line left out)"),
            "the long line is cut"
        );
    }

    #[test]
    fn a_secret_known_only_when_the_log_is_read_is_hidden_where_a_cut_splits_it() {
        let log = Log::default();
        let mut line = "a".repeat(LINE_BYTES - 20);
        line.push_str("LaTeSeCrEt0123456789abcdef");
        line.push_str(&"b".repeat(LINE_BYTES));
        log.push(line);
        crate::register_secret("LaTeSeCrEt0123456789abcdef");
        let text = log.text();
        assert!(!text.contains("LaTeSeC"), "{}", &text[text.len() - 200..]);
        assert!(text.contains("[REDACTE"), "{}", &text[text.len() - 200..]);
    }

    #[test]
    fn a_secret_at_the_cut_of_a_line_that_redaction_shortened_is_hidden() {
        let jwt = format!("eyJhx{}JWTEND", "A".repeat(600));
        crate::register_secret(&jwt);
        let log = Log::default();
        let line = format!(
            "{jwt} {jwt} {}{jwt}{}",
            "p".repeat(LINE_BYTES + LINE_SLACK - 12 - 1220 - 40 - 13),
            "q".repeat(5000)
        );
        log.push(line);
        let text = log.text();
        assert!(!text.contains("eyJhxAAA"), "{}", &text[text.len() - 200..]);
    }

    #[test]
    fn a_short_log_is_kept_whole() {
        let log = Log::default();
        log.push("one".into());
        log.push("two".into());
        let text = log.text();
        assert!(
            text.contains("] one\n[") && text.ends_with("] two"),
            "{text}"
        );
        assert!(!text.contains("left out"));
    }
}
