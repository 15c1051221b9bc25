//! Bounds on what the runner holds and keeps of the tests' output, whatever
//! a test prints. nextest reports a failed test's whole output in one
//! libtest-json event, one line: a test that prints 200 MB makes a 200 MB
//! line. [`EventLine`] reads such a line as it arrives and keeps its
//! structure, every field whole but a long string, of which it keeps the
//! first and last [`OUTPUT_CAP`]` / 2` bytes around a `… N bytes dropped …`
//! marker; [`CappedLog`] keeps the first and last [`LOG_CAP`]` / 2` bytes
//! of `tests.log`. What the runner holds at once is then a few times these
//! caps, never a multiple of what the tests printed.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// What the runner keeps of each long string of an event (a failed test's
/// output, in its `stdout`): its first and last half of this, in bytes.
pub(crate) const OUTPUT_CAP: usize = 1 << 20;

/// What the runner keeps of `tests.log` (the engine's own output, and under
/// `cargo test` the tests' output too): its first and last half of this.
pub(crate) const LOG_CAP: usize = 8 << 20;

/// The most of one event line kept outside its capped strings: a line of
/// more (not an event of nextest's) is cut there and counted.
const LINE_CAP: usize = OUTPUT_CAP + (64 << 10);

/// `… N bytes dropped …`, as the text between a kept head and tail: the
/// same words as the pod's kept logs.
pub(crate) use testkit_engine::redact::dropped_marker as marker;

/// Where a string's bytes go: the head is kept as it comes, the tail in two
/// alternating buffers, so that the last `OUTPUT_CAP / 2` or more bytes
/// are at hand when the string ends and nothing before them is.
#[derive(Default)]
struct Tail {
    /// The earlier of the two buffers, starting where an escape or a
    /// character does, or empty.
    earlier: Vec<u8>,
    /// The buffer being filled.
    current: Vec<u8>,
    /// The bytes of output (an escape counts as the one byte it stands
    /// for) dropped from the string so far.
    dropped: u64,
}

impl Tail {
    fn push(&mut self, byte: u8, starts_unit: bool) {
        if starts_unit && self.current.len() >= OUTPUT_CAP / 2 {
            self.dropped += output_bytes(&self.earlier);
            self.earlier = std::mem::take(&mut self.current);
        }
        self.current.push(byte);
    }

    /// Appends the marker and the kept tail to `out`, JSON-escaped as the
    /// string they close.
    fn close_into(&mut self, out: &mut Vec<u8>) {
        // Only the last half cap is kept: the earlier buffer loses its
        // start, up to where an escape or a character does.
        let excess = (self.earlier.len() + self.current.len()).saturating_sub(OUTPUT_CAP / 2);
        let cut = unit_start_from(&self.earlier, excess);
        self.dropped += output_bytes(&self.earlier[..cut]);
        self.earlier.drain(..cut);
        if self.dropped > 0 {
            let marker = serde_json::to_string(&marker(self.dropped)).unwrap_or_default();
            out.extend_from_slice(marker.trim_matches('"').as_bytes());
        }
        out.append(&mut self.earlier);
        out.append(&mut self.current);
        self.dropped = 0;
    }
}

/// The length of the escape at the start of `escaped` (JSON string
/// content), or 1 for any other byte.
fn escape_len(escaped: &[u8]) -> usize {
    match escaped {
        [b'\\', b'u', ..] => 6,
        [b'\\', ..] => 2,
        _ => 1,
    }
}

/// How many bytes of output the JSON string content `escaped` stands for,
/// taking each escape for one byte (nextest escapes only quotes,
/// backslashes and control characters).
fn output_bytes(escaped: &[u8]) -> u64 {
    let mut n = 0;
    let mut i = 0;
    while i < escaped.len() {
        i += escape_len(&escaped[i..]);
        n += 1;
    }
    n
}

/// The first offset at or after `from` where an escape or a character of
/// `escaped` (JSON string content that starts with one) starts.
fn unit_start_from(escaped: &[u8], from: usize) -> usize {
    let mut i = 0;
    while i < escaped.len() && (i < from || escaped[i] & 0xC0 == 0x80) {
        i += escape_len(&escaped[i..]);
    }
    i.min(escaped.len())
}

/// Inside a JSON string: where the scan is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InString {
    /// Between characters or escapes.
    Plain,
    /// After a backslash.
    Escape,
    /// This many hex digits of a `\u` escape to come.
    Hex(u8),
}

/// One line of libtest-json, read as it arrives and kept within bounds.
#[derive(Default)]
pub(super) struct EventLine {
    out: Vec<u8>,
    string: Option<InString>,
    /// Bytes of the current string so far, as escaped.
    string_len: usize,
    /// Set once the current string passed its head.
    tail: Option<Tail>,
    /// Bytes of the line dropped outside capped strings (a line that is no
    /// event of nextest's).
    overflow: u64,
}

impl EventLine {
    /// Takes the next bytes of the line (no newline among them).
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let Some(state) = self.string else {
            if b == b'"' {
                self.string = Some(InString::Plain);
                self.string_len = 0;
            }
            return self.keep(b);
        };
        let (next, starts_unit) = match state {
            InString::Plain if b == b'"' => {
                if let Some(mut tail) = self.tail.take() {
                    tail.close_into(&mut self.out);
                }
                self.string = None;
                return self.keep(b);
            }
            InString::Plain if b == b'\\' => (InString::Escape, true),
            // A UTF-8 continuation byte belongs to the character before it.
            InString::Plain => (InString::Plain, b & 0xC0 != 0x80),
            InString::Escape if b == b'u' => (InString::Hex(4), false),
            InString::Escape | InString::Hex(1) => (InString::Plain, false),
            InString::Hex(n) => (InString::Hex(n - 1), false),
        };
        self.string = Some(next);
        self.string_len += 1;
        if self.tail.is_none() && starts_unit && self.string_len > OUTPUT_CAP / 2 {
            self.tail = Some(Tail::default());
        }
        match &mut self.tail {
            Some(tail) => tail.push(b, starts_unit),
            None => self.keep(b),
        }
    }

    fn keep(&mut self, b: u8) {
        if self.out.len() < LINE_CAP {
            self.out.push(b);
        } else {
            self.overflow += 1;
        }
    }

    /// The line as kept, and starts the next one. A line cut short (still
    /// inside a string, or over its cap) is no longer JSON.
    pub(super) fn finish(&mut self) -> Vec<u8> {
        let mut taken = std::mem::take(self);
        if let Some(mut tail) = taken.tail.take() {
            tail.close_into(&mut taken.out);
        }
        if taken.overflow > 0 {
            taken
                .out
                .extend_from_slice(marker(taken.overflow).trim_end().as_bytes());
        }
        taken.out
    }

    /// Whether nothing of a line has arrived yet.
    pub(super) fn is_empty(&self) -> bool {
        self.out.is_empty() && self.tail.is_none() && self.overflow == 0
    }
}

/// `tests.log` as written: its first `LOG_CAP / 2` bytes as they come, its
/// last `LOG_CAP / 2` or more held until [`CappedLog::finish`], the rest
/// counted and named by a marker where it was cut.
pub(super) struct CappedLog {
    file: File,
    written: usize,
    earlier: Vec<u8>,
    current: Vec<u8>,
    dropped: u64,
}

impl CappedLog {
    pub(super) fn create(path: &Path, header: &str) -> std::io::Result<CappedLog> {
        let mut file = File::create(path)?;
        file.write_all(header.as_bytes())?;
        Ok(CappedLog {
            file,
            written: 0,
            earlier: Vec::new(),
            current: Vec::new(),
            dropped: 0,
        })
    }

    pub(super) fn write(&mut self, mut bytes: &[u8]) {
        if self.written < LOG_CAP / 2 {
            let n = bytes.len().min(LOG_CAP / 2 - self.written);
            let _ = self.file.write_all(&bytes[..n]);
            self.written += n;
            bytes = &bytes[n..];
        }
        while !bytes.is_empty() {
            if self.current.len() >= LOG_CAP / 2 {
                self.dropped += self.earlier.len() as u64;
                self.earlier = std::mem::take(&mut self.current);
            }
            let n = bytes.len().min(LOG_CAP / 2 - self.current.len());
            self.current.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
    }

    /// Writes the kept tail, after the marker when anything was dropped.
    pub(super) fn finish(mut self) {
        if self.dropped > 0 {
            let _ = self.file.write_all(marker(self.dropped).as_bytes());
        }
        let _ = self.file.write_all(&self.earlier);
        let _ = self.file.write_all(&self.current);
    }
}

/// Redacts `path` line by line (a file of the tests' output may be larger
/// than what the runner should hold), through a file beside it.
pub(super) fn redact_lines(path: &Path) {
    use std::io::{BufRead, BufReader, BufWriter};
    let Ok(file) = File::open(path) else {
        return;
    };
    let partial = path.with_extension("redacting");
    let Ok(out) = File::create(&partial) else {
        return;
    };
    let mut out = BufWriter::new(out);
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut changed = false;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return drop(std::fs::remove_file(&partial)),
        }
        let text = String::from_utf8_lossy(&line);
        let redacted = testkit_engine::redact::redact(&text);
        changed |= matches!(redacted, std::borrow::Cow::Owned(_));
        if out.write_all(redacted.as_bytes()).is_err() {
            return drop(std::fs::remove_file(&partial));
        }
    }
    if changed && out.flush().is_ok() {
        let _ = std::fs::rename(&partial, path);
    } else {
        let _ = std::fs::remove_file(&partial);
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn capped(line: &[u8]) -> Vec<u8> {
        let mut event = EventLine::default();
        // In uneven pieces, as a pipe delivers them.
        for piece in line.chunks(7919) {
            event.feed(piece);
        }
        event.finish()
    }

    #[test]
    fn a_small_event_is_kept_whole() {
        let line = br#"{"type":"test","event":"failed","name":"a$b","stdout":"x\"y\\n\u0001"}"#;
        assert_eq!(capped(line), line);
    }

    #[test]
    fn a_huge_output_keeps_its_fields_its_head_and_its_tail_around_a_marker() {
        let mut output = String::from("HEAD é\n");
        output.push_str(&"line \"quoted\" é\n".repeat(400_000));
        output.push_str("TAIL é");
        let event = serde_json::json!({"type": "test", "event": "failed", "name": "bin$t", "stdout": output, "exec_time": 1.5});
        let line = serde_json::to_vec(&event).unwrap();
        let kept = capped(&line);
        assert!(kept.len() < OUTPUT_CAP + 1000, "{} bytes kept", kept.len());
        let v: serde_json::Value = serde_json::from_slice(&kept).expect("still JSON");
        assert_eq!(
            (v["type"].as_str(), v["event"].as_str(), v["name"].as_str()),
            (Some("test"), Some("failed"), Some("bin$t"))
        );
        assert_eq!(v["exec_time"], 1.5);
        let stdout = v["stdout"].as_str().unwrap();
        assert!(
            stdout.starts_with("HEAD é\n") && stdout.ends_with("é\nTAIL é"),
            "{}",
            &stdout[..100]
        );
        let dropped: usize = stdout
            .split("… ")
            .nth(1)
            .unwrap()
            .split(" bytes dropped")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let marker_len = marker(dropped as u64).len();
        assert_eq!(
            dropped + stdout.len() - marker_len,
            output.len(),
            "the marker counts the bytes dropped"
        );
    }

    #[test]
    fn a_line_that_is_no_event_is_cut_and_counted() {
        let line = vec![b'z'; 3 * LINE_CAP];
        let kept = capped(&line);
        assert!(kept.len() < LINE_CAP + 100);
        assert!(String::from_utf8_lossy(&kept)
            .ends_with(&format!("… {} bytes dropped …", 2 * LINE_CAP)));
    }

    #[test]
    fn the_log_keeps_its_head_and_tail_and_names_what_it_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tests.log");
        let mut log = CappedLog::create(&path, "header\n").unwrap();
        log.write(b"FIRST\n");
        let block = vec![b'.'; 1 << 20];
        for _ in 0..((3 * LOG_CAP) >> 20) {
            log.write(&block);
        }
        log.write(b"LAST\n");
        log.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("header\nFIRST\n") && text.ends_with("LAST\n"));
        assert!(text.len() <= LOG_CAP + LOG_CAP / 2 + 100, "{}", text.len());
        let dropped: usize = text
            .split("… ")
            .nth(1)
            .unwrap()
            .split(" bytes dropped")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let kept = text.len() - "header\n".len() - marker(dropped as u64).len();
        assert_eq!(dropped + kept, 3 * LOG_CAP + 11);
    }
}
