//! A failed test's trace in report.html: its steps as a waterfall on one
//! time axis (requests with status and duration, CLI runs, waits and what
//! they last saw, resource events, the failure last), each request
//! expandable to its headers and bodies; a browser step with a film frame
//! shows it as a thumbnail, embedded as a `data:` URI while the report's
//! budget for frames ([`FRAMES_BUDGET`]) lasts. Everything comes from the
//! trace file the test process wrote, redacted when it was written, and
//! the frames beside it; nothing is fetched: the page stays one file.

use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped};
use testkit_engine::report::TestRecord;
use testkit_engine::trace::{Entry, EntryKind, Trace, FILE_NAME};

use super::text::Text;

/// The most entries drawn for one test; the rest are counted.
const MAX_ROWS: usize = 500;

/// At most this many bytes of film frames are embedded in one report; the
/// frames past it are counted and left in the artifacts folders.
pub(super) const FRAMES_BUDGET: u64 = 2 * 1024 * 1024;

/// A frame larger than this is not a trace's thumbnail: left out.
const FRAME_CAP: u64 = 256 * 1024;

/// Styles of the waterfall, inlined once per page section.
const STYLE: &str = "\
.trace{margin-top:8px;font:12px ui-monospace,monospace}\
.trace .row{display:flex;align-items:flex-start;border-top:1px solid #eee}\
.trace .row>details,.trace .row>.label{flex:0 0 45%;overflow:hidden}\
.trace summary{cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\
.trace .lane{flex:1;position:relative;height:14px;margin-top:2px}\
.trace .tbar{position:absolute;height:10px;min-width:2px;background:#4a8}\
.trace .tbar.bad{background:#d44}.trace .tbar.cli{background:#68c}\
.trace .tbar.wait{background:#ca4}.trace .tbar.resource{background:#a7c}\
.trace .tbar.failure{background:#000}\
.trace .t{color:#888;margin-right:6px}\
.trace .frame{height:40px;vertical-align:middle;margin-left:6px;border:1px solid #ccc}\
.trace details[open] .frame{height:auto;max-width:100%;display:block}\
.trace pre{white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto;background:#f7f7f7;padding:4px}";

/// The trace file of `r`: the path its record names, else where a test
/// process writes it under the results folder `dir` (a folder that moved).
fn trace_path(dir: &Path, r: &TestRecord) -> Option<PathBuf> {
    let named = PathBuf::from(r.trace.as_deref()?);
    if named.is_file() {
        return Some(named);
    }
    let here = testkit_engine::run::artifacts_dir(dir, &r.binary, &r.name).join(FILE_NAME);
    here.is_file().then_some(here)
}

/// `r`'s waterfall, if it kept a trace; a trace that cannot be read says
/// so. Its frames are embedded while `frames_left` (bytes, for the whole
/// report) lasts.
pub(super) fn waterfall(dir: &Path, r: &TestRecord, frames_left: &mut u64) -> Markup {
    let Some(named) = r.trace.as_deref() else {
        return html! {};
    };
    let Some(path) = trace_path(dir, r) else {
        return html! { p class="hint" { "trace: " (Text(named)) " is missing" } };
    };
    let trace = match Trace::read(&path) {
        Ok(t) => t,
        Err(e) => {
            let e = testkit_engine::errors::error_chain(&e);
            return html! { p class="hint" { "trace: " (Text(&e)) } };
        }
    };
    let end = trace
        .entries
        .iter()
        .map(|e| e.at_us + e.duration_us)
        .max()
        .unwrap_or(0)
        .max(1);
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut frames = Frames {
        folder,
        left: frames_left,
        left_out: 0,
    };
    let rows: Vec<Markup> = trace
        .entries
        .iter()
        .take(MAX_ROWS)
        .map(|e| row(e, end, &mut frames))
        .collect();
    let left_out = frames.left_out;
    let hidden = trace.entries.len().saturating_sub(MAX_ROWS) as u64 + trace.dropped;
    html! {
        style { (PreEscaped(STYLE)) }
        div class="trace" data-test=(Text(&r.name)) data-steps=(trace.entries.len()) {
            h4 { "Trace: " (trace.entries.len()) " steps over " (micros(end)) }
            @for row in &rows { (row) }
            @if left_out > 0 || trace.frames_dropped > 0 {
                p class="hint" {
                    "film: " (left_out) " frames left out of this report (its "
                    (bytes(FRAMES_BUDGET)) " of frames are used), " (trace.frames_dropped)
                    " not captured (a test keeps at most " (testkit_engine::trace::MAX_FRAMES)
                    "); see " (Text(&folder.display().to_string()))
                }
            }
            @if hidden > 0 {
                p class="hint" {
                    "… " (hidden) " more steps not shown (see " (Text(&path.display().to_string())) ")"
                }
            }
        }
    }
}

/// What the timeline gets from traces, once a page: each bar labelled with
/// its test's name, and a click on the bar of a test that kept a trace
/// scrolls to its waterfall and opens its failed steps. A delegated
/// listener, so that it holds for bars drawn after it.
pub(super) fn timeline_hooks() -> Markup {
    const STYLE: &str =
        "#timeline .bar{overflow:hidden;white-space:nowrap;font:10px/12px sans-serif;color:#fff;\
         text-indent:2px}#timeline .bar::after{content:attr(data-test)}\
         .trace.picked{outline:2px solid #68c}";
    const SCRIPT: &str = "document.addEventListener('click',function(e){\
         var b=e.target.closest&&e.target.closest('#timeline .bar[data-test]');if(!b)return;\
         var w=[].find.call(document.querySelectorAll('.trace[data-test]'),function(t){return t.dataset.test===b.dataset.test;});\
         if(!w)return;[].forEach.call(document.querySelectorAll('.trace.picked'),function(t){t.classList.remove('picked');});\
         w.classList.add('picked');[].forEach.call(w.querySelectorAll('.row.bad>details'),function(d){d.open=true;});\
         w.scrollIntoView();});";
    html! {
        style { (PreEscaped(STYLE)) }
        script { (PreEscaped(SCRIPT)) }
    }
}

/// Where a waterfall's frames are, and the report's budget for them.
struct Frames<'a> {
    folder: &'a Path,
    left: &'a mut u64,
    left_out: u64,
}

impl Frames<'_> {
    /// The `<img>` of the frame `name`, or nothing when it is missing, not
    /// a plain file name, or past the budget.
    fn img(&mut self, name: &str) -> Option<Markup> {
        // A trace names a file beside it; anything else is not read.
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return None;
        }
        let path = self.folder.join(name);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size == 0 {
            return None;
        }
        let bytes = (size <= FRAME_CAP && size <= *self.left)
            .then(|| std::fs::read(&path).ok())
            .flatten();
        let Some(bytes) = bytes else {
            self.left_out += 1;
            return None;
        };
        *self.left -= size;
        use base64::Engine as _;
        let src = format!(
            "data:image/jpeg;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        );
        Some(html! {
            img class="frame" alt=(Text(name)) title=(Text(name)) src=(src);
        })
    }
}

/// The word of a step's kind, as its row's class and `data-kind` say it.
fn kind_word(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Http => "http",
        EntryKind::Resource => "resource",
        EntryKind::Auth => "auth",
        EntryKind::Cli => "cli",
        EntryKind::Wait => "wait",
        EntryKind::Browser => "browser",
        EntryKind::Fault => "fault",
        EntryKind::Failure => "failure",
    }
}

fn row(e: &Entry, end: u64, frames: &mut Frames) -> Markup {
    let kind = kind_word(e.kind);
    let left = e.at_us as f64 * 100.0 / end as f64;
    let width = (e.duration_us as f64 * 100.0 / end as f64).max(0.2);
    let bad = if e.ok { "" } else { " bad" };
    let frame = e.frame.as_deref().and_then(|f| frames.img(f));
    html! {
        div class={ "row step-" (kind) (bad) } data-kind=(kind) {
            details {
                summary {
                    span class="t" { "+" (micros(e.at_us)) } (Text(&e.title)) " "
                    span class="t" { (micros(e.duration_us)) } @if let Some(img) = &frame { (img) }
                }
                @if let Some(h) = &e.http {
                    pre class="req" {
                        (Text(&h.method)) " " (Text(&h.url)) "\n"
                        @for (k, v) in &h.request_headers { (Text(k)) ": " (Text(v)) "\n" }
                        "\n" (Text(&h.request_body))
                    }
                    pre class="resp" {
                        @match h.status { Some(s) => (s), None => "no answer" } "\n"
                        @for (k, v) in &h.response_headers { (Text(k)) ": " (Text(v)) "\n" }
                        "\n" (Text(&h.response_body))
                    }
                }
                @if !e.detail.is_empty() {
                    pre class="detail" { (Text(&e.detail)) }
                }
            }
            div class="lane" {
                div class={ "tbar " (kind) (bad) } style=(format!("left:{left:.2}%;width:{width:.2}%")) {}
            }
        }
    }
}

/// `2 MB`, `512 KB`.
fn bytes(n: u64) -> String {
    if n >= 1024 * 1024 {
        format!("{} MB", n / (1024 * 1024))
    } else {
        format!("{} KB", n / 1024)
    }
}

/// `1.234 s`, `56 ms`, `789 µs`.
fn micros(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.3} s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{} ms", us / 1_000)
    } else {
        format!("{us} µs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(frame: Option<&str>) -> Entry {
        Entry {
            at_us: 0,
            duration_us: 1000,
            kind: EntryKind::Browser,
            title: "click #go".into(),
            ok: true,
            detail: String::new(),
            http: None,
            frame: frame.map(str::to_owned),
        }
    }

    #[test]
    fn a_step_with_a_frame_shows_it_embedded_while_the_budget_lasts() {
        let dir = tempfile::tempdir().unwrap();
        let jpeg = b"\xFF\xD8\xFF\xE0fake jpeg";
        std::fs::write(dir.path().join("trace-frame-001.jpg"), jpeg).unwrap();
        let mut left = FRAMES_BUDGET;
        let mut frames = Frames {
            folder: dir.path(),
            left: &mut left,
            left_out: 0,
        };
        let out = row(&step(Some("trace-frame-001.jpg")), 1000, &mut frames).into_string();
        use base64::Engine as _;
        let uri = format!(
            "<img class=\"frame\" alt=\"trace-frame-001.jpg\" title=\"trace-frame-001.jpg\" src=\"data:image/jpeg;base64,{}\">",
            base64::engine::general_purpose::STANDARD.encode(jpeg)
        );
        assert!(out.contains(&uri), "{out}");
        // A name that is not a file beside the trace is not read; past the
        // budget, a frame is counted, not embedded.
        let mut out = row(&step(Some("../secret.jpg")), 1000, &mut frames).into_string();
        *frames.left = 3;
        out += &row(&step(Some("trace-frame-001.jpg")), 1000, &mut frames).into_string();
        out += &row(&step(None), 1000, &mut frames).into_string();
        assert!(!out.contains("<img"), "{out}");
        assert_eq!(frames.left_out, 1);
        assert_eq!(left, 3);
    }
}
