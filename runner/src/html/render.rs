//! The page: what a person looks at first is written as HTML here (the
//! verdict, phases, counts, leaks, failures with their logs, screenshots
//! and the faults they injected, flaky tests with each failed attempt, known
//! issues, the slowest tests),
//! so it reads without scripts; the
//! timeline and the filterable list of every test are drawn by the inline
//! script from the JSON embedded beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::json;
use testkit_engine::report::{
    AttemptRecord, FaultRecord, Outcome, ResourceState, Summary, TestRecord,
};

use super::model::{outcome_word, pack_lanes, Lifetime, Part};
use super::text::{esc, printable};
use crate::junit::{fault_fate, fault_line, fault_state_name, fault_undone};

const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

/// A failure's log is cut to its last this many bytes...
const LOG_CAP: usize = 64 * 1024;
/// ...and all failures' logs together to this many: the page must open
/// fast even when every test of a large run failed.
const LOGS_BUDGET: usize = 1024 * 1024;
/// Failures shown in full; the rest are in the list of every test.
const MAX_FAILURES: usize = 200;
/// Messages in the embedded data are cut to this many bytes.
const MESSAGE_CAP: usize = 2 * 1024;
/// A screenshot larger than this is linked, not inlined.
const SCREENSHOT_CAP: u64 = 2 * 1024 * 1024;
/// At most this many bytes of screenshots are inlined in all.
const SCREENSHOTS_BUDGET: u64 = 8 * 1024 * 1024;

pub(super) struct Page<'a> {
    pub(super) title: &'a str,
    pub(super) parts: &'a [Part],
    pub(super) summary: &'a Summary,
    /// Where the page is written: screenshots too large to inline are
    /// linked relative to it.
    pub(super) out_dir: &'a Path,
}

/// The run as a whole: the worst of its parts.
pub(super) fn headline(parts: &[Part], summary: &Summary) -> &'static str {
    let rank = |c: u8| match c {
        0 => 0,
        1 => 1,
        130 => 2,
        _ => 3,
    };
    let mut worst = 0u8;
    for part in parts {
        let red = part
            .records
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed | Outcome::UnexpectedPass));
        let mut code = match part.phase("run").and_then(|r| r.exit_code) {
            Some(c) => c,
            // A plain `cargo test`, or a run killed before its end: the
            // records decide.
            None if part.phases.iter().any(|p| p.verdict == "fail") => 1,
            None => u8::from(red),
        };
        // Never greener than the runner judged, nor than the records say.
        if let Some(seal) = part.seal.seal() {
            if rank(seal.exit_code) > rank(code) {
                code = seal.exit_code;
            }
        }
        if red && code == 0 {
            code = 1;
        }
        if rank(code) > rank(worst) {
            worst = code;
        }
    }
    match worst {
        0 if summary.total() == 0 => "NO TESTS",
        0 => "PASSED",
        1 => "FAILED",
        130 => "INTERRUPTED",
        _ => "INCOMPLETE",
    }
}

/// Every string value of `value` made [`printable`], in place (the keys
/// are the page's own).
fn make_printable(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(clean) = printable(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_printable),
        Value::Object(fields) => fields.values_mut().for_each(make_printable),
        _ => {}
    }
}

/// JSON that can sit inside `<script>`: no `</script>`, no `<!--`, none
/// of the line separators older parsers choke on, and every string
/// [`printable`], as the page's text is.
fn script_json(mut value: serde_json::Value) -> String {
    make_printable(&mut value);
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The last `cap` bytes of `s`, on a character boundary, and how many were cut.
fn tail(s: &str, cap: usize) -> (&str, usize) {
    if s.len() <= cap {
        return (s, 0);
    }
    let mut start = s.len() - cap;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (&s[start..], start)
}

/// The first `cap` bytes of `s`, on a character boundary.
fn head(s: &str, cap: usize) -> String {
    if s.len() <= cap {
        return s.to_owned();
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn ms(d: u64) -> String {
    if d < 1000 {
        format!("{d} ms")
    } else if d < 60_000 {
        format!("{:.1} s", d as f64 / 1000.0)
    } else {
        format!("{}m {:02}s", d / 60_000, (d % 60_000) / 1000)
    }
}

fn failure_kind_word(r: &TestRecord) -> String {
    r.failure_kind
        .and_then(|k| serde_json::to_value(k).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "failed".to_owned())
}

fn is_failure(r: &TestRecord) -> bool {
    matches!(r.outcome, Outcome::Failed | Outcome::UnexpectedPass)
}

/// Every test of every part, with the part it ran in.
fn all_tests(parts: &[Part]) -> Vec<(usize, &TestRecord)> {
    parts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.records.iter().map(move |r| (i, r)))
        .collect()
}

impl Page<'_> {
    pub(super) fn html(&self) -> String {
        let mut out = String::with_capacity(64 * 1024);
        let verdict = headline(self.parts, self.summary);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
             <title>{verdict}: {}</title><style>{CSS}</style></head><body>\n",
            esc(self.title)
        );
        self.header(&mut out, verdict);
        self.phases(&mut out);
        self.counts(&mut out);
        self.leaks(&mut out);
        let mut logs_left = LOGS_BUDGET;
        self.failures(&mut out, &mut logs_left);
        self.flaky(&mut out, &mut logs_left);
        self.known_issues(&mut out);
        let _ = writeln!(
            out,
            "<section id=\"timeline-section\"><h2>Timeline</h2>\
             <p class=\"hint\">Each test is a bar on the lane that ran it, coloured by outcome; \
             the thin bars under it are the resources it created, from journaled to verified gone \
             (red: leaked); a dotted line before a bar is the time its test waited for the pod lock \
             (an <code>exclusive</code> test had the pod). Each pod's boot, residue sweep and teardown are \
             on its first lane. \
             Below a pod's tests, each node a test injected faults into has a lane of its own, \
             a bar per fault from its injection to its undo (red, to the end of the run: never \
             undone). Hover or click a bar for its details.</p>\
             <div id=\"timeline\"><noscript>The timeline needs JavaScript.</noscript></div>\
             <div id=\"details\" class=\"details\" hidden></div></section>"
        );
        self.slowest(&mut out);
        let _ = writeln!(
            out,
            "<section id=\"tests-section\"><h2>Every test</h2>\
             <div class=\"filter\"><label>Outcome <select id=\"filter-outcome\">\
             <option value=\"\">all</option><option value=\"failed\">failed</option>\
             <option value=\"unexpected_pass\">unexpected pass</option>\
             <option value=\"expected_failure\">expected failure</option>\
             <option value=\"skipped\">skipped</option><option value=\"passed\">passed</option>\
             <option value=\"flaky\">flaky</option>\
             </select></label> <label>Name <input id=\"filter-name\" type=\"search\" \
             placeholder=\"part of a test's name\"></label> <span id=\"filter-count\"></span></div>\
             <table id=\"tests\"><thead><tr><th>outcome</th><th>test</th><th>binary</th>\
             <th>duration</th><th>message</th></tr></thead><tbody></tbody></table></section>"
        );
        let _ = write!(
            out,
            "<script id=\"data\" type=\"application/json\">{}</script>\n<script>{JS}</script>\n</body></html>\n",
            script_json(self.data())
        );
        out
    }

    fn header(&self, out: &mut String, verdict: &str) {
        let class = match verdict {
            "PASSED" => "pass",
            "NO TESTS" => "skip",
            _ => "fail",
        };
        let _ = write!(
            out,
            "<header><h1><span id=\"verdict\" class=\"verdict {class}\">{verdict}</span> {}</h1><dl class=\"facts\">",
            esc(self.title)
        );
        let many = self.parts.len() > 1;
        for (i, part) in self.parts.iter().enumerate() {
            let pod = part
                .phase("up")
                .map(|p| p.evidence.clone())
                .unwrap_or_else(|| {
                    "not recorded (no verdict.jsonl: not a testkit-runner run)".to_owned()
                });
            let source = part
                .source
                .as_ref()
                .map(|s| s.describe())
                .unwrap_or_else(|| {
                    "unknown (not recorded: the results of a plain cargo test or nextest run)"
                        .to_owned()
                });
            let n = if many {
                format!(" {}", i + 1)
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<dt>run{n}</dt><dd class=\"run-id\">{}</dd><dt>commit{n}</dt><dd class=\"commit\">{}</dd>\
                 <dt>pod{n}</dt><dd class=\"pod\">{}</dd>",
                esc(&part.run_id()),
                esc(&source),
                esc(&pod)
            );
            if let Some(seal) = part.seal.describe() {
                let _ = write!(
                    out,
                    "<dt>seal{n}</dt><dd class=\"seal\">{}</dd>",
                    esc(&seal)
                );
            }
        }
        let _ = writeln!(out, "</dl></header>");
    }

    fn phases(&self, out: &mut String) {
        let _ = write!(out, "<section id=\"phases\"><h2>Phases</h2>");
        for (i, part) in self.parts.iter().enumerate() {
            if self.parts.len() > 1 {
                let _ = write!(out, "<h3>pod {} (run {})</h3>", i + 1, esc(&part.run_id()));
            }
            if part.phases.is_empty() {
                let _ = write!(
                    out,
                    "<p class=\"hint\">No phases: {} holds the results of a plain \
                     <code>cargo test</code> or <code>cargo nextest run</code>, not of \
                     <code>testkit-runner run</code>.</p>",
                    esc(&part.dir.display().to_string())
                );
                continue;
            }
            let _ = write!(
                out,
                "<table class=\"phases\"><tr><th>phase</th><th>verdict</th><th>evidence</th><th>time</th></tr>"
            );
            for p in part.phases.iter().filter(|p| p.phase != "run") {
                let _ = write!(
                    out,
                    "<tr class=\"phase {v}\" data-phase=\"{name}\"><td>{name}</td><td class=\"v\">{v}</td><td>{}</td><td>{}</td></tr>",
                    esc(&p.evidence),
                    ms(p.duration_ms),
                    v = esc(&p.verdict),
                    name = esc(&p.phase),
                );
            }
            let _ = write!(out, "</table>");
        }
        let _ = writeln!(out, "</section>");
    }

    fn counts(&self, out: &mut String) {
        let s = self.summary;
        let tests = all_tests(self.parts);
        let _ = write!(
            out,
            "<section id=\"counts\"><h2>{} tests</h2><div class=\"cards\">",
            s.total()
        );
        let card = |out: &mut String, kind: &str, label: &str, n: usize, more: String| {
            let _ = write!(
                out,
                "<div class=\"count {kind}{}\" data-kind=\"{kind}\"><span class=\"n\">{n}</span> \
                 <span class=\"label\">{label}</span>{more}</div>",
                if n == 0 { " zero" } else { "" }
            );
        };
        card(out, "passed", "passed", s.passed, String::new());
        card(
            out,
            "flaky",
            "flaky (passed on a retry)",
            s.flaky.len(),
            String::new(),
        );
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (_, r) in tests.iter().filter(|(_, r)| r.outcome == Outcome::Failed) {
            *kinds.entry(failure_kind_word(r)).or_default() += 1;
        }
        let by_kind = if kinds.is_empty() {
            String::new()
        } else {
            let items: Vec<String> = kinds
                .iter()
                .map(|(k, n)| format!("<li data-failure-kind=\"{}\">{n} {}</li>", esc(k), esc(k)))
                .collect();
            format!("<ul class=\"by-kind\">{}</ul>", items.concat())
        };
        card(out, "failed", "failed", s.failed, by_kind);
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for (_, r) in tests.iter().filter(|(_, r)| r.outcome == Outcome::Skipped) {
            let why = r
                .skip_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into());
            *reasons.entry(why).or_default() += 1;
        }
        let why = if reasons.is_empty() {
            String::new()
        } else {
            let items: Vec<String> = reasons
                .iter()
                .map(|(k, n)| format!("<li>{n}: {}</li>", esc(k)))
                .collect();
            format!("<ul class=\"reasons\">{}</ul>", items.concat())
        };
        card(out, "skipped", "skipped", s.skipped, why);
        card(
            out,
            "expected_failure",
            "expected failures",
            s.expected_failures,
            String::new(),
        );
        card(
            out,
            "unexpected_pass",
            "unexpected passes",
            s.unexpected_passes,
            String::new(),
        );
        let _ = write!(out, "</div>");
        if let Some(exclusive) = s.exclusive_line() {
            let _ = write!(out, "<p class=\"exclusive\">{}</p>", esc(&exclusive));
        }
        let _ = writeln!(out, "</section>");
    }

    /// Leaks: what the residue sweeps found, every resource a test's
    /// cleanup or the journal says was left behind, and every process a test
    /// left running.
    fn leaks(&self, out: &mut String) {
        let mut items = Vec::new();
        for part in self.parts {
            if let Some(p) = part.phase("residue").filter(|p| p.verdict == "fail") {
                items.push(format!(
                    "<li class=\"leak residue\">residue sweep of run {}: {}</li>",
                    esc(&part.run_id()),
                    esc(&p.evidence)
                ));
            }
            for r in &part.records {
                // An earlier attempt's leak is a leak too.
                for res in r
                    .resources
                    .iter()
                    .chain(r.attempts.iter().flat_map(|a| a.resources.iter()))
                    .filter(|x| x.state == ResourceState::Leaked)
                {
                    items.push(format!(
                        "<li class=\"leak resource\">{} <code>{}</code>, created by <code>{}</code>: leaked</li>",
                        esc(&res.kind),
                        esc(&res.name),
                        esc(&r.name)
                    ));
                }
                // A fault left in effect is residue on the pod too: the node
                // is not what the next test expects.
                for f in r.faults.iter().filter(|f| !fault_undone(f)) {
                    items.push(format!(
                        "<li class=\"leak fault\" data-node=\"{node}\">fault <code>{}</code> on node \
                         <code>{node}</code>, injected by <code>{}</code>: {}</li>",
                        esc(&f.fault),
                        esc(&r.name),
                        esc(&fault_fate(f)),
                        node = esc(&f.node),
                    ));
                }
                for p in &r.leftover_processes {
                    items.push(format!(
                        "<li class=\"leak process\">process {} <code>{}</code>, left running by <code>{}</code>: {}</li>",
                        p.pid,
                        esc(&p.command),
                        esc(&r.name),
                        p.fate.as_str()
                    ));
                }
            }
        }
        let _ = write!(out, "<section id=\"leaks\"><h2>Leaks</h2>");
        let swept = self
            .parts
            .iter()
            .all(|p| p.phase("residue").is_some_and(|r| r.verdict != "skip"));
        if items.is_empty() && swept {
            let _ = write!(
                out,
                "<p class=\"none\">None: the residue sweep found nothing left on the pod.</p>"
            );
        } else if items.is_empty() {
            let _ = write!(
                out,
                "<p class=\"hint\">No test's cleanup reported a leak; but no residue sweep ran over \
                 every pod (it is a phase of <code>testkit-runner run</code>), so nothing \
                 created behind the framework's back would show here.</p>"
            );
        } else {
            let _ = write!(out, "<ul class=\"leaks\">{}</ul>", items.concat());
        }
        let _ = writeln!(out, "</section>");
    }

    fn failures(&self, out: &mut String, logs_left: &mut usize) {
        let failed: Vec<(usize, &TestRecord)> = all_tests(self.parts)
            .into_iter()
            .filter(|(_, r)| is_failure(r))
            .collect();
        let _ = write!(out, "<section id=\"failures\"><h2>Failures</h2>");
        super::trace::timeline_hooks(out);
        if failed.is_empty() {
            let _ = write!(out, "<p class=\"none\">No test failed.</p>");
        }
        let mut shots_left = SCREENSHOTS_BUDGET;
        let mut frames_left = super::trace::FRAMES_BUDGET;
        for (part, r) in failed.iter().take(MAX_FAILURES) {
            let _ = write!(
                out,
                "<article class=\"failure\" data-test=\"{name}\"><h3><span class=\"tag {o}\">{kind}</span> \
                 {name} <span class=\"bin\">{bin}</span> <span class=\"dur\">{dur}</span></h3>",
                o = outcome_word(r.outcome),
                kind = esc(&failure_kind_word(r)),
                name = esc(&r.name),
                bin = esc(&r.binary),
                dur = ms(r.duration_ms),
            );
            if !r.description.is_empty() {
                let _ = write!(out, "<p class=\"desc\">{}</p>", esc(&r.description));
            }
            let _ = write!(
                out,
                "<pre class=\"message\">{}</pre>",
                esc(r.message.as_deref().unwrap_or("(no message)"))
            );
            self.resources(out, &self.parts[*part], r);
            faults_table(out, r);
            self.screenshots(out, &self.parts[*part], r, &mut shots_left);
            super::trace::waterfall(out, &self.parts[*part].dir, r, &mut frames_left);
            log_box(out, &r.output, logs_left, true);
            if !r.attempts.is_empty() {
                let _ = write!(
                    out,
                    "<p class=\"attempts\">Attempt {n} of {n} failed; the attempts before it:</p>",
                    n = r.total_attempts()
                );
                for a in &r.attempts {
                    attempt_html(out, a, r.total_attempts(), logs_left);
                }
            }
            let _ = write!(out, "</article>");
        }
        if failed.len() > MAX_FAILURES {
            let _ = write!(
                out,
                "<p class=\"hint\">… and {} more failed tests: filter the list of every test by outcome.</p>",
                failed.len() - MAX_FAILURES
            );
        }
        let _ = writeln!(out, "</section>");
    }

    /// Flaky tests: each that failed and then, retried, passed (or failed as
    /// its known issue documents), with every failed attempt's message and
    /// log.
    fn flaky(&self, out: &mut String, logs_left: &mut usize) {
        let flaky: Vec<&TestRecord> = all_tests(self.parts)
            .into_iter()
            .map(|(_, r)| r)
            .filter(|r| r.is_flaky())
            .collect();
        let _ = write!(out, "<section id=\"flaky\"><h2>Flaky</h2>");
        if flaky.is_empty() {
            let _ = write!(
                out,
                "<p class=\"none\">No test failed and then passed on a retry.</p>"
            );
        }
        for r in flaky.iter().take(MAX_FAILURES) {
            let total = r.total_attempts();
            let failed = r.failed_attempts().count();
            let _ = write!(
                out,
                "<article class=\"flaky\" data-test=\"{name}\"><h3><span class=\"tag flaky\">flaky</span> \
                 {name} <span class=\"bin\">{bin}</span> <span class=\"dur\">{o} on attempt {total} of {total}, \
                 after {failed} failed</span></h3>",
                name = esc(&r.name),
                bin = esc(&r.binary),
                o = esc(&outcome_word(r.outcome).replace('_', " ")),
            );
            if !r.description.is_empty() {
                let _ = write!(out, "<p class=\"desc\">{}</p>", esc(&r.description));
            }
            for a in r.failed_attempts() {
                attempt_html(out, a, total, logs_left);
            }
            let _ = write!(out, "</article>");
        }
        if flaky.len() > MAX_FAILURES {
            let _ = write!(
                out,
                "<p class=\"hint\">… and {} more flaky tests: filter the list of every test.</p>",
                flaky.len() - MAX_FAILURES
            );
        }
        let _ = writeln!(out, "</section>");
    }

    /// A test's resources and their fate: the record's, with the journal's
    /// times.
    fn resources(&self, out: &mut String, part: &Part, r: &TestRecord) {
        let lives: Vec<&Lifetime> = part.lifetimes.iter().filter(|l| l.test == r.name).collect();
        if r.resources.is_empty() && lives.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<table class=\"resources\"><tr><th>resource</th><th>fate</th><th>lifetime</th></tr>"
        );
        let mut seen = Vec::new();
        for res in &r.resources {
            let life = lives
                .iter()
                .find(|l| l.kind == res.kind && l.name == res.name);
            seen.push((&res.kind, &res.name));
            let _ = write!(
                out,
                "<tr class=\"res {}\"><td>{} <code>{}</code></td><td>{}</td><td>{}</td></tr>",
                res.state.as_str(),
                esc(&res.kind),
                esc(&res.name),
                res.state.as_str(),
                life.map(|l| format!("{} ({})", ms(l.to_ms - l.from_ms), esc(&l.fate)))
                    .unwrap_or_default()
            );
        }
        for l in lives.iter().filter(|l| !seen.contains(&(&l.kind, &l.name))) {
            let _ = write!(
                out,
                "<tr class=\"res\"><td>{} <code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&l.kind),
                esc(&l.name),
                esc(&l.fate),
                ms(l.to_ms - l.from_ms)
            );
        }
        let _ = write!(out, "</table>");
    }

    /// Every `*.png` in the test's artifacts dir, inlined while the budget
    /// lasts, linked after.
    fn screenshots(&self, out: &mut String, part: &Part, r: &TestRecord, left: &mut u64) {
        let dir = testkit_engine::run::artifacts_dir(&part.dir, &r.binary, &r.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut pngs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("png")))
            .collect();
        pngs.sort();
        if pngs.is_empty() {
            return;
        }
        let _ = write!(out, "<div class=\"screenshots\">");
        for png in pngs {
            let name = png
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(u64::MAX);
            let bytes = (size <= SCREENSHOT_CAP && size <= *left)
                .then(|| std::fs::read(&png).ok())
                .flatten();
            match bytes {
                Some(bytes) => {
                    *left -= size;
                    let _ = write!(
                        out,
                        "<figure><img class=\"screenshot\" alt=\"{n}\" src=\"data:image/png;base64,{}\"><figcaption>{n}</figcaption></figure>",
                        base64::engine::general_purpose::STANDARD.encode(bytes),
                        n = esc(&name)
                    );
                }
                None => {
                    let href = relative(self.out_dir, &png);
                    let _ = write!(
                        out,
                        "<figure><a href=\"{}\">{}</a><figcaption>too large to inline</figcaption></figure>",
                        esc(&href),
                        esc(&name)
                    );
                }
            }
        }
        let _ = write!(out, "</div>");
    }

    fn known_issues(&self, out: &mut String) {
        let issues = &self.summary.known_issues;
        if issues.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<section id=\"known-issues\"><h2>Known issues</h2><table><tr><th>id</th><th>title</th><th>state</th><th>tests</th></tr>"
        );
        for issue in issues {
            let tests: Vec<String> = issue
                .tests
                .iter()
                .map(|(t, _)| format!("<code>{}</code>", esc(t)))
                .collect();
            let _ = write!(
                out,
                "<tr class=\"issue{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if issue.state.fails_run() { " bad" } else { "" },
                esc(&issue.id),
                esc(issue.title.as_deref().unwrap_or("")),
                esc(issue.state.describe()),
                tests.join(" ")
            );
        }
        let _ = writeln!(out, "</table></section>");
    }

    fn slowest(&self, out: &mut String) {
        let mut tests: Vec<&TestRecord> = all_tests(self.parts)
            .into_iter()
            .map(|(_, r)| r)
            .filter(|r| r.started_at_ms > 0)
            .collect();
        tests.sort_by(|a, b| b.duration_ms.cmp(&a.duration_ms).then(a.name.cmp(&b.name)));
        let _ = write!(
            out,
            "<section id=\"slowest\"><h2>The 10 slowest tests</h2><table><tr><th>duration</th><th>test</th><th>outcome</th></tr>"
        );
        for r in tests.iter().take(10) {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{} <span class=\"bin\">{}</span></td><td class=\"{o}\">{o}</td></tr>",
                ms(r.duration_ms),
                esc(&r.name),
                esc(&r.binary),
                o = outcome_word(r.outcome)
            );
        }
        let _ = writeln!(out, "</table></section>");
    }

    /// What the script draws from: every test with its lane, resources and
    /// faults, each pod's phases on the same clock, and the lanes of the
    /// nodes its tests injected faults into.
    fn data(&self) -> serde_json::Value {
        let mut pods = Vec::new();
        let mut tests = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let refs: Vec<&TestRecord> = part.records.iter().collect();
            let (lanes, lane_count) = pack_lanes(&refs);
            let spans: Vec<serde_json::Value> = part
                .phases
                .iter()
                // The tests phase is drawn as its tests (the build before
                // them is the gap), unless no test ran.
                .filter(|p| p.phase != "tests" || part.records.is_empty())
                .filter(|p| p.phase != "run" && p.at > 0 && p.verdict != "skip")
                .map(|p| {
                    json!({
                        "phase": p.phase, "verdict": p.verdict,
                        "from": p.started_ms(), "to": p.at, "evidence": head(&p.evidence, MESSAGE_CAP),
                    })
                })
                .collect();
            let nodes = fault_nodes(part);
            pods.push(json!({
                "label": format!("pod {} · run {}", i + 1, part.run_id()),
                "lanes": lane_count,
                "spans": spans,
                "node_lanes": nodes.iter().map(|n| format!("node {n}")).collect::<Vec<_>>(),
            }));
            let mut by_test: BTreeMap<&str, Vec<&Lifetime>> = BTreeMap::new();
            for l in &part.lifetimes {
                by_test.entry(l.test.as_str()).or_default().push(l);
            }
            for (r, lane) in part.records.iter().zip(lanes) {
                let lives = by_test.get(r.name.as_str()).map(Vec::as_slice);
                tests.push(test_json(i, r, lane, lives.unwrap_or_default(), &nodes));
            }
        }
        json!({ "pods": pods, "tests": tests })
    }
}

/// One test for the script: its lane on its pod, its resources' lives and
/// its faults on the lanes of `nodes`.
fn test_json(
    pod: usize,
    r: &TestRecord,
    lane: Option<usize>,
    lives: &[&Lifetime],
    nodes: &[&str],
) -> serde_json::Value {
    let res: Vec<serde_json::Value> = lives
        .iter()
        .map(|l| {
            json!({"kind": l.kind, "name": l.name, "from": l.from_ms,
                "to": l.to_ms, "fate": l.fate, "settled": l.settled})
        })
        .collect();
    json!({
        "attempts": r.total_attempts(),
        "flaky": r.is_flaky(),
        "pod": pod,
        "lane": lane,
        "bin": r.binary,
        "name": r.name,
        "desc": head(&r.description, MESSAGE_CAP),
        "outcome": outcome_word(r.outcome),
        "kind": r.failure_kind.map(|_| failure_kind_word(r)),
        "msg": r.message.as_deref().or(r.skip_reason.as_deref()).map(|m| head(m, MESSAGE_CAP)),
        "start": r.started_at_ms,
        "dur": r.duration_ms,
        // Drawn apart: the bar starts when the test took the pod lock.
        "wait": r.lock.as_ref().map_or(0, |l| l.wait_ms.min(r.duration_ms)),
        "lock": r.lock.as_ref().map(|l| l.mode.as_str()),
        "res": res,
        "faults": faults_json(r, nodes),
    })
}

/// The nodes `part`'s tests injected faults into, sorted: one timeline
/// lane each, so that what was done to a node reads along one line
/// whichever test did it.
fn fault_nodes(part: &Part) -> Vec<&str> {
    let nodes: BTreeSet<&str> = part
        .records
        .iter()
        .flat_map(|r| r.faults.iter().map(|f| f.node.as_str()))
        .collect();
    nodes.into_iter().collect()
}

/// Whether a fault's bar runs to the end of the run: it was not undone, or
/// no time says when it was.
fn fault_open(f: &FaultRecord) -> bool {
    !fault_undone(f) || f.undone_at_ms.is_none()
}

/// `r`'s faults for the script, each with its lane among `nodes` and its
/// tooltip (`pause worker-2 — injected by t, undone after 812 ms`), both
/// written here so that the page says the same with or without a browser
/// that runs scripts.
fn faults_json(r: &TestRecord, nodes: &[&str]) -> Vec<serde_json::Value> {
    r.faults
        .iter()
        .map(|f| {
            let open = fault_open(f);
            let fate = head(&fault_fate(f), MESSAGE_CAP);
            json!({
                "node": f.node,
                "lane": nodes.iter().position(|n| *n == f.node),
                "fault": f.fault,
                "state": fault_state_name(f.state),
                "from": f.injected_at_ms,
                "to": if open { None } else { f.undone_at_ms },
                "open": open,
                "fate": fate,
                "title": format!("{} — injected by {}, {fate}", f.fault, r.name),
            })
        })
        .collect()
}

/// The faults a test injected, with what became of each and for how long
/// it was in effect; one not undone is styled as the failure it is.
fn faults_table(out: &mut String, r: &TestRecord) {
    if r.faults.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<table class=\"faults\"><tr><th>fault</th><th>node</th><th>state</th><th>in effect</th></tr>"
    );
    let end = r.started_at_ms + r.duration_ms;
    for f in &r.faults {
        let open = fault_open(f);
        let lasted = match f.undone_at_ms {
            Some(at) if !open => ms(at.saturating_sub(f.injected_at_ms)),
            _ if fault_undone(f) => "until its undo (no time recorded)".to_owned(),
            _ => format!(
                "{} by the test's end; never undone",
                ms(end.saturating_sub(f.injected_at_ms))
            ),
        };
        let _ = write!(
            out,
            "<tr class=\"fault {state}{bad}\" data-node=\"{node}\" title=\"{line}\"><td>{}</td>\
             <td><code>{node}</code></td><td>{}</td><td>{lasted}</td></tr>",
            esc(&f.fault),
            esc(&fault_fate(f)),
            state = fault_state_name(f.state),
            bad = if open { " bad" } else { "" },
            node = esc(&f.node),
            line = esc(&fault_line(f)),
        );
    }
    let _ = write!(out, "</table>");
}

/// A log, its last bytes while the page's budget for logs lasts.
fn log_box(out: &mut String, output: &str, logs_left: &mut usize, open: bool) {
    let (log, cut) = tail(output, LOG_CAP.min(*logs_left));
    *logs_left -= log.len();
    let note = if cut > 0 {
        format!(
            "<p class=\"hint\">The first {cut} bytes are cut; the whole log is in its record.</p>"
        )
    } else {
        String::new()
    };
    let _ = write!(
        out,
        "<details class=\"log-box\"{}><summary>log</summary>{note}<pre class=\"log\">{}</pre></details>",
        if open { " open" } else { "" },
        if output.is_empty() {
            "(the test logged nothing)".to_owned()
        } else {
            esc(log)
        }
    );
}

/// One earlier attempt of a test: what it came to, its message, its log.
fn attempt_html(out: &mut String, a: &AttemptRecord, total: u32, logs_left: &mut usize) {
    let kind = a
        .failure_kind
        .and_then(|k| serde_json::to_value(k).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| outcome_word(a.outcome).to_owned());
    let _ = write!(
        out,
        "<div class=\"attempt\" data-attempt=\"{n}\"><h4>attempt {n} of {total}: \
         <span class=\"tag {o}\">{kind}</span> <span class=\"dur\">{dur}</span></h4>\
         <pre class=\"message\">{msg}</pre>",
        n = a.attempt,
        o = outcome_word(a.outcome),
        kind = esc(&kind),
        dur = ms(a.duration_ms),
        msg = esc(a.message.as_deref().unwrap_or("(no message)")),
    );
    log_box(out, &a.output, logs_left, true);
    let _ = write!(out, "</div>");
}

/// `path` relative to `base` when it lies beneath it, else absolute as a
/// `file://` URL: a report opened from disk finds its files either way.
fn relative(base: &Path, path: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => format!("file://{}", path.display()),
    }
}

#[cfg(test)]
mod unit {
    use super::super::text::{has_unprintable, unprintable};
    use super::*;

    #[test]
    fn controls_and_non_characters_are_shown_not_sent_raw() {
        assert_eq!(
            esc("a\u{0}b\u{7}c\u{1b}[31mred\u{1b}[0m\td\u{7f}e\u{FFFE}\u{FFFF}]]>\n"),
            "a␀b␇cred\td␡e\u{FFFD}\u{FFFD}]]&gt;\n"
        );
        assert_eq!(esc("x\u{85}y\u{1b}"), "x\u{FFFD}y");
        assert_eq!(esc("\u{0}\u{7}"), "␀␇");
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            assert_eq!(
                has_unprintable(c.encode_utf8(&mut [0; 4])),
                unprintable(c),
                "{c:?}"
            );
        }
        assert_eq!(esc("plain\ttext\r\n"), "plain\ttext\r\n");
        let json = script_json(json!({"m": "x\u{0}\u{7}\u{1b}[1my\u{FFFE}"}));
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["m"], "x␀␇y\u{FFFD}");
    }

    #[test]
    fn markup_and_script_breaking_text_is_escaped() {
        assert_eq!(
            esc("<b a=\"x\">'&'</b>"),
            "&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;"
        );
        let json = script_json(json!({"m": "</script><!-- & \u{2028}"}));
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["m"], "</script><!-- & \u{2028}");
    }

    /// 5,000 tests, each with a log and a sandbox, 100 of them failed with
    /// long logs: the page stays a few MB.
    #[test]
    fn a_page_of_five_thousand_tests_is_a_few_megabytes() {
        let mut records = Vec::new();
        let mut lifetimes = Vec::new();
        for i in 0..5000u64 {
            let name = format!("module_{}::test_number_{i}", i % 40);
            let mut r = TestRecord::new("run1", &format!("binary{}", i % 8), &name);
            r.started_at_ms = 1_700_000_000_000 + i * 37;
            r.duration_ms = 200 + i % 700;
            r.description = "Creates a sandbox and checks what it answers.".into();
            r.output = "a log line of a test that passed\n".repeat(30);
            if i % 50 == 0 {
                r.fail(
                    testkit_engine::report::FailureKind::Error,
                    "expected 200, got 500\n".repeat(20),
                );
                r.output = "a log line of a test that failed\n".repeat(3000);
            }
            lifetimes.push(Lifetime {
                kind: "sandbox".into(),
                name: format!("ct-run1-{i:05}"),
                test: name,
                from_ms: r.started_at_ms + 5,
                to_ms: r.started_at_ms + r.duration_ms,
                fate: "verified gone".into(),
                settled: true,
            });
            records.push(r);
        }
        let summary = Summary::from_records(&records, None);
        let parts = [Part {
            dir: PathBuf::from("/nonexistent/results"),
            run: None,
            records,
            phases: Vec::new(),
            lifetimes,
            source: None,
            seal: crate::seal::SealCheck::Unsealed,
        }];
        let html = Page {
            title: "big",
            parts: &parts,
            summary: &summary,
            out_dir: Path::new("/nonexistent/results"),
        }
        .html();
        assert!(html.len() < 4 * 1024 * 1024, "{} bytes", html.len());
        assert_eq!(html.matches("<article class=\"failure\"").count(), 100);
    }

    /// The JSON the page's script draws from.
    fn page_data(html: &str) -> serde_json::Value {
        let open = "<script id=\"data\" type=\"application/json\">";
        let start = html.find(open).expect("the data") + open.len();
        let len = html[start..].find("</script>").unwrap();
        serde_json::from_str(&html[start..start + len]).unwrap()
    }

    /// A page of a run that faulted two nodes: one test stopped worker-1
    /// and undid it, another paused worker-2 and never undid it (its text
    /// holds markup and a NUL). Each faulted node gets a lane below the
    /// tests, each fault a bar on it with its tooltip and the test that
    /// injected it, and the fault not undone is drawn open and red, listed
    /// as a leak and styled as a failure in its test's section.
    #[test]
    fn faults_are_bars_on_their_nodes_lanes_and_one_not_undone_is_a_failure() {
        use testkit_engine::report::{FailureKind, FaultState};
        let fault = |node: &str, what: &str, at: u64, undone: Option<u64>| {
            let mut f = FaultRecord::injected(node, what.to_owned());
            f.injected_at_ms = at;
            f.undone_at_ms = undone;
            f.state = if undone.is_some() {
                FaultState::Undone
            } else {
                FaultState::NotUndone
            };
            f.problem = undone
                .is_none()
                .then(|| "still paused <after> unpause\u{0}".to_owned());
            f
        };
        let t0 = 1_700_000_000_000;
        let mut stop = TestRecord::new("run1", "cluster", "faults::stop_worker");
        stop.started_at_ms = t0;
        stop.duration_ms = 3_000;
        stop.faults = vec![fault(
            "worker-1",
            "stop worker-1",
            t0 + 500,
            Some(t0 + 1_947),
        )];
        let mut pause = TestRecord::new("run1", "cluster", "faults::pause_worker");
        pause.started_at_ms = t0 + 100;
        pause.duration_ms = 4_000;
        pause.faults = vec![fault("worker-2", "pause <worker-2>", t0 + 1_000, None)];
        pause.fail(
            FailureKind::FaultNotUndone,
            "fault not undone: node `worker-2`: pause <worker-2>".to_owned(),
        );
        let plain = TestRecord::new("run1", "cluster", "faults::none");
        let records = vec![stop, pause, plain];
        let summary = Summary::from_records(&records, None);
        let parts = [Part {
            dir: PathBuf::from("/nonexistent/results"),
            run: None,
            records,
            phases: Vec::new(),
            lifetimes: Vec::new(),
            source: None,
            seal: crate::seal::SealCheck::Unsealed,
        }];
        let html = Page {
            title: "faults",
            parts: &parts,
            summary: &summary,
            out_dir: Path::new("/nonexistent/results"),
        }
        .html();

        let data = page_data(&html);
        assert_eq!(
            data["pods"][0]["node_lanes"],
            json!(["node worker-1", "node worker-2"]),
            "one lane per faulted node, below the test lanes"
        );
        let stopped = &data["tests"][0]["faults"][0];
        assert_eq!(stopped["lane"], 0);
        assert_eq!(
            stopped["title"],
            "stop worker-1 — injected by faults::stop_worker, undone after 1447 ms"
        );
        assert_eq!(
            (stopped["open"].clone(), stopped["to"].clone()),
            (json!(false), json!(t0 + 1_947))
        );
        let paused = &data["tests"][1]["faults"][0];
        assert_eq!(paused["lane"], 1);
        assert_eq!(
            paused["title"],
            "pause <worker-2> — injected by faults::pause_worker, not undone: still paused \
             <after> unpause␀"
        );
        assert_eq!(
            (
                paused["open"].clone(),
                paused["to"].clone(),
                paused["state"].clone()
            ),
            (json!(true), json!(null), json!("not_undone")),
            "drawn to the end of the run"
        );
        assert_eq!(data["tests"][2]["faults"], json!([]));
        // The script draws them as bars, red when open; the styles are inline.
        for needle in [
            "\"bar fault \" + f.state + (f.open ? \" open\" : \"\")",
            ".bar.fault.open {",
            "tr.fault.bad td",
        ] {
            assert!(html.contains(needle), "no {needle:?} on the page");
        }
        // The failing test's section lists its fault as a failure, escaped;
        // the undone one is no failure and has no section of its own.
        assert!(
            html.contains(
                "<tr class=\"fault not_undone bad\" data-node=\"worker-2\" \
                 title=\"pause &lt;worker-2&gt;: not undone: still paused \
                 &lt;after&gt; unpause␀\"><td>pause &lt;worker-2&gt;</td><td><code>worker-2</code></td>"
            ),
            "{html}"
        );
        assert!(
            html.contains("by the test's end; never undone</td>"),
            "{html}"
        );
        assert!(!html.contains("<tr class=\"fault undone"), "{html}");
        assert!(
            html.contains(
                "<li class=\"leak fault\" data-node=\"worker-2\">fault <code>pause &lt;worker-2&gt;</code> \
                 on node <code>worker-2</code>, injected by <code>faults::pause_worker</code>"
            ),
            "{html}"
        );
        assert!(
            !html.contains('\u{0}') && !html.contains("<worker") && !html.contains("<after"),
            "raw text on the page"
        );
    }

    #[test]
    fn cuts_stay_on_character_boundaries() {
        let (t, cut) = tail("ééé", 3);
        assert_eq!((t, cut), ("é", 4));
        assert_eq!(head("ééé", 3), "é…");
        assert_eq!(tail("abc", 10), ("abc", 0));
    }
}
