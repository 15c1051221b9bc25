//! Traces: every exchange a test has with its pod, on one time axis.
//!
//! A test's [`Recorder`] collects [`Entry`]s (HTTP exchanges, resource
//! operations, logins, CLI runs, waits, browser actions), each with its
//! offset from the test's start and its duration. Texts are capped
//! ([`TEXT_CAP`]) and headers that carry credentials are blanked when an
//! entry is made; every registered secret is redacted when the trace is
//! [written](Trace::write), so a secret registered after the exchange (a
//! renewal) is redacted too. A recorder keeps at most [`MAX_ENTRIES`]
//! entries and counts those it dropped: a test's memory stays bounded
//! however many requests it makes.
//!
//! Its size is bounded too, whatever the test sends: a URL is cut at
//! [`URL_CAP`] and a title at [`TITLE_CAP`], as bodies are at
//! [`TEXT_CAP`]; past [`WHOLE_BUDGET`] bytes of entries, later entries
//! keep only their title, times and outcome ([`Trace::trimmed`] counts
//! them, and each says so in its detail); past [`MAX_BYTES`], they are
//! dropped ([`Trace::dropped`]). A trace file stays under 5 MB.
//!
//! Requests sent through the pod's [`Client`](crate::pod::Client) are
//! recorded in the trace of the test [`active`] says sent them. A UI test's
//! browser steps carry a film frame ([`Entry::frame`], at most
//! [`MAX_FRAMES`] a test), a JPEG beside the trace.
//!
//! The file format is the runner's input too (report.html): [`Trace`] is
//! its schema, `version` 1.

pub mod active;
pub(crate) mod http;
pub mod pending;
#[cfg(test)]
mod size_tests;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The largest text (a body, a header block, an output tail) kept whole;
/// the rest is counted: `… N bytes more`.
pub const TEXT_CAP: usize = 4096;

/// The most entries one test's trace keeps; later ones are counted in
/// [`Trace::dropped`].
pub const MAX_ENTRIES: usize = 2000;

/// The longest URL an HTTP entry keeps; the rest is counted: `… N bytes
/// more`. A query of kilobytes says nothing a reader needs twice.
pub const URL_CAP: usize = 2048;

/// The longest title an entry keeps (a title is one line: `GET /path?query
/// → 200`).
pub const TITLE_CAP: usize = 1024;

/// The bytes of entries one test's trace keeps whole (headers, bodies,
/// details); later entries are kept [trimmed](Trace::trimmed).
pub const WHOLE_BUDGET: usize = 3 << 20;

/// The bytes of entries one test's trace keeps at all, trimmed ones
/// included; later entries are counted in [`Trace::dropped`]. With the
/// JSON around them, a trace file stays under 5 MB.
pub const MAX_BYTES: usize = 4 << 20;

/// The longest title and URL a trimmed entry keeps.
pub(crate) const TRIMMED_TEXT_CAP: usize = 256;

/// The detail of an entry kept without its details, headers and bodies.
pub const TRIMMED_NOTE: &str =
    "(details, headers and bodies not kept: the trace's 3 MiB for whole entries was spent)";

/// The most film frames (JPEGs of a page after each browser step) one
/// test captures; later steps are counted in [`Trace::frames_dropped`].
pub const MAX_FRAMES: u32 = 50;

/// The file name of a test's film frame `n` (from 1), in its artifacts
/// folder.
pub fn frame_name(n: u32) -> String {
    format!("trace-frame-{n:03}.jpg")
}

/// The trace file's name in a test's artifacts folder.
pub const FILE_NAME: &str = "trace.json";

/// Headers whose values are credentials, whatever the registry knows.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

/// What an entry was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// An HTTP request to the pod and its answer.
    Http,
    /// A resource kind's create, exists, delete or list, cleanup included.
    Resource,
    /// A login or a renewal of the credential.
    Auth,
    /// A run of the suite's CLI.
    Cli,
    /// A wait: each observation until it held or timed out.
    Wait,
    /// A browser navigation or action.
    Browser,
    /// A fault injected into a node of the pod, or its undo.
    Fault,
    /// The test's failure, last.
    Failure,
}

/// An HTTP exchange, redacted and capped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Http {
    /// `GET`, `POST`, …
    pub method: String,
    /// The URL as sent.
    pub url: String,
    /// The answer's status; absent when none came (the error is the entry's `detail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The request's headers, credentials blanked.
    #[serde(default)]
    pub request_headers: Vec<(String, String)>,
    /// The request's body, capped.
    #[serde(default)]
    pub request_body: String,
    /// The answer's headers, credentials blanked.
    #[serde(default)]
    pub response_headers: Vec<(String, String)>,
    /// The answer's body, capped.
    #[serde(default)]
    pub response_body: String,
}

/// One step of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Microseconds from the test's start (a monotonic clock).
    pub at_us: u64,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// What it was.
    pub kind: EntryKind,
    /// One line: `GET /api/sandboxes → 200`, `sandboxctl list → exit 0`.
    pub title: String,
    /// Whether it went as asked (a 2xx/3xx, exit 0, a wait that held).
    pub ok: bool,
    /// More lines: a CLI run's output tails, a wait's observations, an error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The exchange, for HTTP entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Http>,
    /// A browser step's film frame: the file name (`trace-frame-001.jpg`)
    /// of a small JPEG of the page after the step, in the test's artifacts
    /// folder next to the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}

/// A test's trace, as written to [`FILE_NAME`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The file format: 1.
    pub version: u32,
    /// The test's full name.
    pub test: String,
    /// Entries in order of their start.
    pub entries: Vec<Entry>,
    /// Entries past [`MAX_ENTRIES`] or [`MAX_BYTES`], not kept.
    #[serde(default)]
    pub dropped: u64,
    /// Entries past [`WHOLE_BUDGET`], kept with their title, times and
    /// outcome only (their detail says so).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed: u64,
    /// Film frames past [`MAX_FRAMES`], not captured.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub frames_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Trace {
    /// Writes the trace as JSON to `path`, every registered secret redacted.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut trace = self.clone();
        for e in &mut trace.entries {
            redact_entry(e);
        }
        let json = serde_json::to_string(&trace).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // The whole text once more: a secret split across fields by
        // serialization cannot be, but one the fields' JSON escaping left
        // whole is caught here too.
        std::fs::write(path, crate::redact::redact(&json).as_bytes())
    }

    /// Reads a trace file.
    pub fn read(path: &Path) -> Result<Trace, crate::json::ReadJsonError> {
        crate::json::read_json(path, "trace")
    }
}

fn redact_entry(e: &mut Entry) {
    redact_field(&mut e.title);
    redact_field(&mut e.detail);
    if let Some(h) = &mut e.http {
        redact_field(&mut h.method);
        redact_field(&mut h.url);
        redact_field(&mut h.request_body);
        redact_field(&mut h.response_body);
        for (k, v) in h
            .request_headers
            .iter_mut()
            .chain(h.response_headers.iter_mut())
        {
            redact_field(k);
            redact_field(v);
        }
    }
}

/// `text` cut to [`TEXT_CAP`] bytes (at a character boundary), saying how
/// much more there was: redacted before it is cut, so that no cut keeps
/// part of a secret ([`crate::redact::redact_then_cut`]).
pub fn cap(text: &str) -> String {
    cap_to(text, TEXT_CAP)
}

/// `text` cut to `max` bytes as [`cap`] cuts it to [`TEXT_CAP`].
pub fn cap_to(text: &str, max: usize) -> String {
    let (mut kept, more) = crate::redact::redact_then_cut(text, max);
    if more > 0 {
        kept.push_str(&format!("{CUT_END}{more}{CUT_END_UNIT}"));
    }
    kept
}

/// The last [`TEXT_CAP`] bytes of `text`, saying how much came before: an
/// output's tail, where a failure shows. Redacted before it is cut.
pub fn tail(text: &str) -> String {
    let (kept, before) = crate::redact::redact_then_cut_start(text, TEXT_CAP);
    if before == 0 {
        return kept;
    }
    format!("{CUT_END}{before} bytes before\n{kept}")
}

/// Bytes as capped text: lossy UTF-8, redacted, then cut, with the length
/// of what was cut. Only what may hold a secret that straddles the cap is
/// made text: the first `WINDOW` bytes (twice the cap).
pub fn cap_bytes(bytes: &[u8]) -> String {
    cap_window(&bytes[..bytes.len().min(WINDOW)], bytes.len())
}

/// How much of a text is kept to be cut to [`TEXT_CAP`]: a secret that
/// straddles the cap is whole in it, and redacted before the cut.
pub(crate) const WINDOW: usize = 2 * TEXT_CAP;

/// The first bytes of a text of `total` bytes, as capped text: redacted,
/// cut to [`TEXT_CAP`], and where the text went on past what is kept, its
/// end masked when it is the start of a secret.
pub(crate) fn cap_window(window: &[u8], total: usize) -> String {
    let text = String::from_utf8_lossy(window);
    let (mut kept, cut) = crate::redact::redact_then_cut(&text, TEXT_CAP);
    if cut == 0 && total > window.len() {
        crate::redact::mask_cut_end(&mut kept);
    }
    let more = total - total.min(TEXT_CAP);
    if more > 0 {
        kept.push_str(&format!("{CUT_END}{more}{CUT_END_UNIT}"));
    }
    kept
}

/// What marks a cut text: `… N bytes more`.
const CUT_END: &str = "… ";
const CUT_END_UNIT: &str = " bytes more";

/// `text` redacted with every registered secret; where it was cut (it ends
/// in `… N bytes more`, or a tail starts with `… N bytes before`), the
/// start or end of a secret registered since is masked at the cut too.
fn redact_field(text: &mut String) {
    if let std::borrow::Cow::Owned(o) = crate::redact::redact(text) {
        *text = o;
    }
    if let Some(at) = text.rfind(CUT_END).filter(|&at| {
        text[at + CUT_END.len()..]
            .strip_suffix(CUT_END_UNIT)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) {
        let marker = text.split_off(at);
        crate::redact::mask_cut_end(text);
        text.push_str(&marker);
    }
    if let Some(rest) = text.strip_prefix(CUT_END) {
        if let Some((n, kept)) = rest.split_once(" bytes before\n") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                let head = format!("{CUT_END}{n} bytes before\n");
                let mut kept = kept.to_owned();
                crate::redact::mask_cut_start(&mut kept);
                *text = head + &kept;
            }
        }
    }
}

/// `(name, value)` pairs, credentials blanked.
pub fn headers<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<(String, String)> {
    let mut total = 0;
    let mut out = Vec::new();
    for (name, value) in pairs {
        let lower = name.to_ascii_lowercase();
        let value = if SECRET_HEADERS.contains(&lower.as_str()) {
            crate::redact::REDACTED.to_owned()
        } else {
            cap_bytes(value)
        };
        total += name.len() + value.len();
        if total > TEXT_CAP {
            out.push(("…".to_owned(), "more headers not kept".to_owned()));
            break;
        }
        out.push((name.to_owned(), value));
    }
    out
}

/// A step as it is kept until the trace is read.
enum Step {
    Done(Box<Entry>),
    Http(Box<http::Exchange>),
}

/// What a JSON entry costs besides its texts: its keys, numbers, quotes.
const ENTRY_OVERHEAD: usize = 200;

impl Step {
    /// About what the step weighs in the trace file, erring high: the
    /// length of its texts and a share for their JSON escapes.
    fn weight(&self) -> usize {
        let texts = match self {
            Step::Done(e) => {
                let http = e.http.as_ref().map_or(0, |h| {
                    h.method.len()
                        + h.url.len()
                        + h.request_body.len()
                        + h.response_body.len()
                        + h.request_headers
                            .iter()
                            .chain(&h.response_headers)
                            .map(|(k, v)| k.len() + v.len() + 8)
                            .sum::<usize>()
                });
                e.title.len() + e.detail.len() + e.frame.as_ref().map_or(0, String::len) + http
            }
            Step::Http(x) => x.weight(),
        };
        texts + texts / 8 + ENTRY_OVERHEAD
    }

    /// The step with its title, times and outcome only.
    fn trim(self) -> Step {
        match self {
            Step::Done(mut e) => {
                e.detail = TRIMMED_NOTE.to_owned();
                cap_field(&mut e.title, TRIMMED_TEXT_CAP);
                if let Some(h) = &mut e.http {
                    cap_field(&mut h.url, TRIMMED_TEXT_CAP);
                    *h = Http {
                        method: std::mem::take(&mut h.method),
                        url: std::mem::take(&mut h.url),
                        status: h.status,
                        ..Http::default()
                    };
                }
                Step::Done(e)
            }
            Step::Http(mut x) => {
                x.trim();
                Step::Http(x)
            }
        }
    }
}

/// `text` cut to `max` when it is longer; as it is otherwise.
fn cap_field(text: &mut String, max: usize) {
    if text.len() > max {
        *text = cap_to(text, max);
    }
}

impl Recorder {
    /// Adds an HTTP exchange as it was seen.
    fn push_exchange(&self, exchange: http::Exchange) {
        self.push_step(Step::Http(Box::new(exchange)));
    }
}

/// The steps of a recording and what they weigh.
#[derive(Default)]
struct Steps {
    list: Vec<Step>,
    /// What the kept steps weigh ([`Step::weight`]).
    bytes: usize,
    trimmed: u64,
}

/// One test's recording: shared by what records (the harness, the pod's
/// client)
/// and cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    test: String,
    start: Instant,
    /// Steps in the order they ended; HTTP exchanges as they were seen,
    /// made text only when the trace is read ([`Recorder::snapshot`]): a
    /// trace that is not kept costs no formatting.
    entries: Mutex<Steps>,
    dropped: AtomicU64,
    frames: AtomicU64,
    frames_dropped: AtomicU64,
    /// Bodies of answers the test let go of, still being read for the trace.
    draining: Arc<()>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Recorder {
    /// A recording of the test `test`, starting now.
    pub fn start(test: &str) -> Recorder {
        Recorder {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                test: test.to_owned(),
                start: Instant::now(),
                entries: Mutex::new(Steps::default()),
                dropped: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                frames_dropped: AtomicU64::new(0),
                draining: Arc::new(()),
            }),
        }
    }

    /// A token held while a body is read for this trace: [`settle`] waits
    /// until none is held.
    ///
    /// [`settle`]: Recorder::settle
    pub(crate) fn draining(&self) -> Arc<()> {
        self.inner.draining.clone()
    }

    /// Waits, at most `within`, for the bodies still being read for this
    /// trace (answers the test let go of unread); call it before the
    /// trace is written.
    pub fn settle(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while Arc::strong_count(&self.inner.draining) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// This recording's id in the process: how a step finds it.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Microseconds from the test's start to `at`.
    pub fn offset(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.inner.start).as_micros() as u64
    }

    /// Adds an entry that started at `started` and took `took`.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        kind: EntryKind,
        started: Instant,
        took: Duration,
        title: String,
        ok: bool,
        detail: String,
        http: Option<Http>,
    ) {
        self.push(Entry {
            at_us: self.offset(started),
            duration_us: took.as_micros() as u64,
            kind,
            title,
            ok,
            detail,
            http,
            frame: None,
        });
    }

    /// Adds `entry`, its title cut at [`TITLE_CAP`] and its URL at
    /// [`URL_CAP`] (its other texts already capped).
    pub fn push(&self, mut entry: Entry) {
        cap_field(&mut entry.title, TITLE_CAP);
        cap_field(&mut entry.detail, 2 * TEXT_CAP);
        if let Some(h) = &mut entry.http {
            cap_field(&mut h.url, URL_CAP);
        }
        self.push_step(Step::Done(Box::new(entry)));
    }

    /// Keeps `step` whole while the trace has room for it, trimmed past
    /// [`WHOLE_BUDGET`], and not at all past [`MAX_BYTES`] or
    /// [`MAX_ENTRIES`].
    fn push_step(&self, mut step: Step) {
        let mut steps = self.inner.entries.lock().unwrap_or_else(|e| e.into_inner());
        if steps.list.len() >= MAX_ENTRIES {
            self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut weight = step.weight();
        if steps.bytes + weight > WHOLE_BUDGET {
            step = step.trim();
            weight = step.weight();
            if steps.bytes + weight > MAX_BYTES {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            steps.trimmed += 1;
        }
        steps.bytes += weight;
        steps.list.push(step);
    }

    /// The number (from 1) of the test's next film frame, or `None` when it
    /// has taken [`MAX_FRAMES`] already: then the frame is counted as
    /// dropped.
    pub fn next_frame(&self) -> Option<u32> {
        let n = self.inner.frames.fetch_add(1, Ordering::Relaxed) + 1;
        if n > u64::from(MAX_FRAMES) {
            self.inner.frames_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(n as u32)
    }

    /// What was recorded until now, in order of start.
    pub fn snapshot(&self) -> Trace {
        let steps = self.inner.entries.lock().unwrap_or_else(|e| e.into_inner());
        let trimmed = steps.trimmed;
        let mut entries: Vec<Entry> = steps
            .list
            .iter()
            .map(|step| match step {
                Step::Done(entry) => (**entry).clone(),
                Step::Http(exchange) => exchange.entry(self),
            })
            .collect();
        drop(steps);
        entries.sort_by_key(|e| e.at_us);
        Trace {
            version: 1,
            test: self.inner.test.clone(),
            entries,
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            trimmed,
            frames_dropped: self.inner.frames_dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_capped_and_say_how_much_was_cut() {
        let long = "x".repeat(TEXT_CAP + 10);
        assert_eq!(
            cap(&long),
            format!("{}… 10 bytes more", "x".repeat(TEXT_CAP))
        );
        assert_eq!(cap_bytes(long.as_bytes()), cap(&long));
        assert!(tail(&long).starts_with("… 10 bytes before\n"));
        assert_eq!(cap("short"), "short");
    }

    #[test]
    fn credential_headers_are_blanked() {
        let h = headers([
            ("Authorization", b"Bearer abc".as_slice()),
            ("Set-Cookie", b"s=1".as_slice()),
            ("content-type", b"text/plain".as_slice()),
        ]);
        assert_eq!(h[0].1, crate::redact::REDACTED);
        assert_eq!(h[1].1, crate::redact::REDACTED);
        assert_eq!(h[2].1, "text/plain");
    }

    #[test]
    fn a_recorder_keeps_at_most_its_cap_and_counts_the_rest() {
        let r = Recorder::start("t");
        for i in 0..MAX_ENTRIES + 5 {
            r.add(
                EntryKind::Wait,
                Instant::now(),
                Duration::ZERO,
                format!("{i}"),
                true,
                String::new(),
                None,
            );
        }
        let t = r.snapshot();
        assert_eq!(t.entries.len(), MAX_ENTRIES);
        assert_eq!(t.dropped, 5);
    }

    #[test]
    fn a_recorder_numbers_at_most_its_cap_of_frames_and_counts_the_rest() {
        let r = Recorder::start("t");
        let taken: Vec<u32> = (0..MAX_FRAMES + 3).filter_map(|_| r.next_frame()).collect();
        assert_eq!(taken.len(), MAX_FRAMES as usize);
        assert_eq!(frame_name(taken[0]), "trace-frame-001.jpg");
        assert_eq!(r.snapshot().frames_dropped, 3);
    }

    #[test]
    fn a_written_trace_redacts_registered_secrets_everywhere() {
        // One plain, one that JSON escapes (so only the pass over the
        // fields finds it), and one registered only after the entry was
        // made and cut (a renewal), straddling the cut.
        let plain = "trace-secret-4711";
        let quoted = "trace\"secret\"4712";
        let late = "late-secret-0123456789abcdefghijklmnopqrstu";
        crate::redact::register_secret(plain);
        crate::redact::register_secret(quoted);
        let r = Recorder::start("t");
        let straddling = |s: &str| format!("{}{s}{}", "b".repeat(TEXT_CAP - 21), "a".repeat(100));
        for secret in [plain, quoted] {
            r.add(
                EntryKind::Http,
                Instant::now(),
                Duration::ZERO,
                format!("POST /login?p={secret}"),
                true,
                format!("said {secret}"),
                Some(Http {
                    method: "POST".into(),
                    url: format!("http://127.0.0.1:1/?p={secret}"),
                    status: Some(200),
                    request_headers: vec![("x-note".into(), secret.into())],
                    request_body: format!(r#"{{"password":"{secret}"}}"#),
                    response_headers: vec![("x-echo".into(), secret.into())],
                    response_body: format!(r#"{{"password":"{secret}"}}"#),
                }),
            );
            // Cut as a step's detail and a body are, the secret straddling
            // the cap.
            r.add(
                EntryKind::Cli,
                Instant::now(),
                Duration::ZERO,
                "cli".into(),
                true,
                cap(&straddling(secret)),
                Some(Http {
                    request_body: cap_bytes(straddling(secret).as_bytes()),
                    response_body: tail(&format!("{secret}{}", "c".repeat(TEXT_CAP - 5))),
                    ..Http::default()
                }),
            );
        }
        r.add(
            EntryKind::Cli,
            Instant::now(),
            Duration::ZERO,
            "cli".into(),
            true,
            cap(&straddling(late)),
            Some(Http {
                response_body: tail(&format!("{late}{}", "c".repeat(TEXT_CAP - 22))),
                ..Http::default()
            }),
        );
        crate::redact::register_secret(late);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        r.snapshot().write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let trace = Trace::read(&path).unwrap();
        assert_eq!(trace.entries.len(), 5);
        // Every field of every entry, as a reader of the trace sees it.
        let fields: Vec<String> = trace
            .entries
            .iter()
            .flat_map(|e| {
                let mut f = vec![e.title.clone(), e.detail.clone()];
                if let Some(h) = &e.http {
                    f.extend([h.method.clone(), h.url.clone()]);
                    f.extend([h.request_body.clone(), h.response_body.clone()]);
                    for (k, v) in h.request_headers.iter().chain(&h.response_headers) {
                        f.extend([k.clone(), v.clone()]);
                    }
                }
                f
            })
            .collect();
        for secret in [plain, quoted, late] {
            assert!(!text.contains(secret), "{secret}: {text}");
            // Not whole, and not the part on either side of a cut.
            for part in [&secret[..secret.len() / 2], &secret[secret.len() / 2..]] {
                for field in &fields {
                    assert!(!field.contains(part), "{part:?} of {secret:?} in {field:?}");
                }
            }
        }
        assert!(
            fields
                .iter()
                .filter(|f| f.contains(crate::redact::REDACTED))
                .count()
                >= 15,
            "each field says what was redacted: {fields:?}"
        );
    }
}

/// Entries for the steps of the running test ([`active::current`]); each
/// does nothing when no trace is being recorded.
pub mod step;
