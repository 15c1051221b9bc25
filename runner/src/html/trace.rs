//! A failed test's trace in report.html: its steps as a waterfall on one
//! time axis (requests with status and duration, CLI runs, waits and what
//! they last saw, resource events, the failure last), each request
//! expandable to its headers and bodies. Everything comes from the trace
//! file the test process wrote, redacted when it was written; nothing is
//! fetched: the page stays one file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use testkit_engine::report::TestRecord;
use testkit_engine::trace::{Entry, EntryKind, Trace, FILE_NAME};

use super::render::esc;

/// The most entries drawn for one test; the rest are counted.
const MAX_ROWS: usize = 500;

/// Styles of the waterfall, inlined once per page section.
const STYLE: &str = "<style>\
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
.trace pre{white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto;background:#f7f7f7;padding:4px}\
</style>";

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

/// Writes `r`'s waterfall into `out`, if it kept a trace; a trace that
/// cannot be read says so.
pub(super) fn waterfall(out: &mut String, dir: &Path, r: &TestRecord) {
    if r.trace.is_none() {
        return;
    }
    let Some(path) = trace_path(dir, r) else {
        let _ = write!(
            out,
            "<p class=\"hint\">trace: {} is missing</p>",
            esc(r.trace.as_deref().unwrap_or_default())
        );
        return;
    };
    let trace = match Trace::read(&path) {
        Ok(t) => t,
        Err(e) => {
            let _ = write!(out, "<p class=\"hint\">trace: {}</p>", esc(&e));
            return;
        }
    };
    let end = trace
        .entries
        .iter()
        .map(|e| e.at_us + e.duration_us)
        .max()
        .unwrap_or(0)
        .max(1);
    let _ = write!(
        out,
        "{STYLE}<div class=\"trace\" data-test=\"{}\" data-steps=\"{}\"><h4>Trace: {} steps over {}</h4>",
        esc(&r.name),
        trace.entries.len(),
        trace.entries.len(),
        micros(end)
    );
    for e in trace.entries.iter().take(MAX_ROWS) {
        row(out, e, end);
    }
    let hidden = trace.entries.len().saturating_sub(MAX_ROWS) as u64 + trace.dropped;
    if hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"hint\">… {hidden} more steps not shown (see {})</p>",
            esc(&path.display().to_string())
        );
    }
    let _ = write!(out, "</div>");
}

/// What the timeline gets from traces, once a page: each bar labelled with
/// its test's name, and a click on the bar of a test that kept a trace
/// scrolls to its waterfall and opens its failed steps. A delegated
/// listener, so that it holds for bars drawn after it.
pub(super) fn timeline_hooks(out: &mut String) {
    out.push_str(
        "<style>#timeline .bar{overflow:hidden;white-space:nowrap;font:10px/12px sans-serif;color:#fff;\
         text-indent:2px}#timeline .bar::after{content:attr(data-test)}\
         .trace.picked{outline:2px solid #68c}</style>\
         <script>document.addEventListener('click',function(e){\
         var b=e.target.closest&&e.target.closest('#timeline .bar[data-test]');if(!b)return;\
         var w=[].find.call(document.querySelectorAll('.trace[data-test]'),function(t){return t.dataset.test===b.dataset.test;});\
         if(!w)return;[].forEach.call(document.querySelectorAll('.trace.picked'),function(t){t.classList.remove('picked');});\
         w.classList.add('picked');[].forEach.call(w.querySelectorAll('.row.bad>details'),function(d){d.open=true;});\
         w.scrollIntoView();});</script>",
    );
}

fn row(out: &mut String, e: &Entry, end: u64) {
    let kind = match e.kind {
        EntryKind::Http => "http",
        EntryKind::Resource => "resource",
        EntryKind::Auth => "auth",
        EntryKind::Cli => "cli",
        EntryKind::Wait => "wait",
        EntryKind::Browser => "browser",
        EntryKind::Fault => "fault",
        EntryKind::Failure => "failure",
    };
    let left = e.at_us as f64 * 100.0 / end as f64;
    let width = (e.duration_us as f64 * 100.0 / end as f64).max(0.2);
    let bad = if e.ok { "" } else { " bad" };
    let _ = write!(
        out,
        "<div class=\"row step-{kind}{bad}\" data-kind=\"{kind}\"><details><summary>\
         <span class=\"t\">+{at}</span>{title} <span class=\"t\">{dur}</span></summary>",
        at = micros(e.at_us),
        title = esc(&e.title),
        dur = micros(e.duration_us),
    );
    if let Some(h) = &e.http {
        let _ = writeln!(out, "<pre class=\"req\">{} {}", esc(&h.method), esc(&h.url));
        for (k, v) in &h.request_headers {
            let _ = writeln!(out, "{}: {}", esc(k), esc(v));
        }
        let _ = write!(out, "\n{}</pre>", esc(&h.request_body));
        let _ = writeln!(
            out,
            "<pre class=\"resp\">{}",
            h.status.map_or("no answer".to_owned(), |s| s.to_string())
        );
        for (k, v) in &h.response_headers {
            let _ = writeln!(out, "{}: {}", esc(k), esc(v));
        }
        let _ = write!(out, "\n{}</pre>", esc(&h.response_body));
    }
    if !e.detail.is_empty() {
        let _ = write!(out, "<pre class=\"detail\">{}</pre>", esc(&e.detail));
    }
    let _ = write!(
        out,
        "</details><div class=\"lane\"><div class=\"tbar {kind}{bad}\" \
         style=\"left:{left:.2}%;width:{width:.2}%\"></div></div></div>"
    );
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
