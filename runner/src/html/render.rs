//! The page: what a person looks at first is written as HTML here (the
//! verdict, phases, counts, leaks, failures with their logs, screenshots
//! and the faults they injected, flaky tests with each failed attempt, known
//! issues, the slowest tests),
//! so it reads without scripts; the
//! timeline and the filterable list of every test are drawn by the inline
//! script from the JSON embedded beside it.
//!
//! Every part is a maud template: a value spliced into one is escaped by
//! the engine, and every text the page did not write itself goes in as a
//! [`Text`], made printable first. The only text not escaped so is the
//! page's own CSS and script, and the JSON the script reads, which
//! [`script_json`] writes for its `<script>` element.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde::Serialize as _;
use serde_json::json;
use testkit_engine::report::{
    AttemptRecord, FailureCategory, FailureKind, FaultRecord, Outcome, ResourceState, Summary,
    TestRecord,
};

use super::model::{pack_lanes, Lifetime, Part};
use super::text::{printable, Text};
use crate::junit::{fault_fate, fault_line, fault_undone};

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

/// The outcomes the list of every test filters by, in the order offered.
const FILTER_OUTCOMES: [Outcome; 5] = [
    Outcome::Failed,
    Outcome::UnexpectedPass,
    Outcome::ExpectedFailure,
    Outcome::Skipped,
    Outcome::Passed,
];

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
        let red = part.records.iter().any(|r| r.outcome.fails());
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

/// serde_json's compact output, with what could end or confuse the
/// `<script>` element it sits in written as `\u` escapes inside strings
/// (outside them JSON has none of these characters): `<` (no
/// `</script>`, no `<!--`), `>`, `&`, and the line separators older
/// parsers choke on.
struct ScriptSafe;

impl serde_json::ser::Formatter for ScriptSafe {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut from = 0;
        for (at, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[from..at])?;
            writer.write_all(escaped.as_bytes())?;
            from = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[from..])
    }
}

/// JSON that can sit inside `<script>` ([`ScriptSafe`]), every string
/// [`printable`], as the page's text is.
fn script_json(mut value: serde_json::Value) -> String {
    make_printable(&mut value);
    let mut out = Vec::new();
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, ScriptSafe,
        ))
        .expect("a JSON value serializes into memory");
    String::from_utf8(out).expect("serde_json writes UTF-8")
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

/// A failed test's tag: its failure kind, `failed` when it has none.
fn failure_kind_word(r: &TestRecord) -> &'static str {
    r.failure_kind.map_or("failed", FailureKind::as_str)
}

/// Whose fault a failed test is.
fn category_of(r: &TestRecord) -> FailureCategory {
    r.category().unwrap_or(FailureCategory::Product)
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
        let verdict = headline(self.parts, self.summary);
        let mut logs_left = LOGS_BUDGET;
        // The line breaks ("\n") are where the page has always had them, so
        // that a page compares line by line with one of an older runner.
        html! {
            (DOCTYPE) "\n"
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
                        style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";
                    title { (verdict) ": " (Text(self.title)) }
                    style { (PreEscaped(CSS)) }
                }
                body {
                    "\n"
                    (self.header(verdict))
                    (self.phases())
                    (self.counts())
                    (self.leaks())
                    (self.failures(&mut logs_left))
                    (self.flaky(&mut logs_left))
                    (self.known_issues())
                    (timeline())
                    (self.slowest())
                    (every_test())
                    script id="data" type="application/json" { (PreEscaped(script_json(self.data()))) }
                    "\n"
                    script { (PreEscaped(JS)) }
                    "\n"
                }
            }
            "\n"
        }
        .into_string()
    }

    fn header(&self, verdict: &str) -> Markup {
        let class = match verdict {
            "PASSED" => "pass",
            "NO TESTS" => "skip",
            _ => "fail",
        };
        let many = self.parts.len() > 1;
        html! {
            header {
                h1 { span id="verdict" class={ "verdict " (class) } { (verdict) } " " (Text(self.title)) }
                dl class="facts" {
                    @for (i, part) in self.parts.iter().enumerate() {
                        @let pod = part
                            .phase("up")
                            .map(|p| p.evidence.clone())
                            .unwrap_or_else(|| {
                                "not recorded (no verdict.jsonl: not a testkit-runner run)".to_owned()
                            });
                        @let source = part
                            .source
                            .as_ref()
                            .map(|s| s.describe())
                            .unwrap_or_else(|| {
                                "unknown (not recorded: the results of a plain cargo test or nextest run)"
                                    .to_owned()
                            });
                        @let n = if many { format!(" {}", i + 1) } else { String::new() };
                        dt { "run" (n) } dd class="run-id" { (Text(&part.run_id())) }
                        dt { "commit" (n) } dd class="commit" { (Text(&source)) }
                        dt { "pod" (n) } dd class="pod" { (Text(&pod)) }
                        @if let Some(seal) = part.seal.describe() {
                            dt { "seal" (n) } dd class="seal" { (Text(&seal)) }
                        }
                        @if let Some(rerun) = crate::rerun::Rerun::read(&part.dir, &part.run_id()) {
                            dt { "rerun" (n) } dd class="rerun" { (Text(&rerun.line(&part.records))) }
                        }
                    }
                }
            }
            "\n"
        }
    }

    fn phases(&self) -> Markup {
        html! {
            section id="phases" {
                h2 { "Phases" }
                @for (i, part) in self.parts.iter().enumerate() {
                    @if self.parts.len() > 1 {
                        h3 { "pod " (i + 1) " (run " (Text(&part.run_id())) ")" }
                    }
                    @if part.phases.is_empty() {
                        p class="hint" {
                            "No phases: " (Text(&part.dir.display().to_string()))
                            " holds the results of a plain " code { "cargo test" } " or "
                            code { "cargo nextest run" } ", not of " code { "testkit-runner run" } "."
                        }
                    } @else {
                        table class="phases" {
                            tr { th { "phase" } th { "verdict" } th { "category" } th { "evidence" } th { "time" } }
                            @for p in part.phases.iter().filter(|p| p.phase != "run") {
                                tr class={ "phase " (Text(&p.verdict)) } data-phase=(Text(&p.phase)) {
                                    td { (Text(&p.phase)) }
                                    td class="v" { (Text(&p.verdict)) }
                                    td class="category" { (Text(p.category.as_deref().unwrap_or(""))) }
                                    td { (Text(&p.evidence)) }
                                    td { (ms(p.duration_ms)) }
                                }
                            }
                        }
                    }
                }
            }
            "\n"
        }
    }

    fn counts(&self) -> Markup {
        let s = self.summary;
        let tests = all_tests(self.parts);
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, r) in tests.iter().filter(|(_, r)| r.outcome == Outcome::Failed) {
            *kinds.entry(failure_kind_word(r)).or_default() += 1;
        }
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, r) in tests.iter().filter(|(_, r)| r.outcome == Outcome::Skipped) {
            let why = r.skip_reason.as_deref().unwrap_or("no reason given");
            *reasons.entry(why).or_default() += 1;
        }
        let by_kind = html! {
            @if !kinds.is_empty() {
                ul class="by-kind" {
                    @for (kind, n) in &kinds {
                        li data-failure-kind=(kind) { (n) " " (kind) }
                    }
                }
            }
        };
        let why = html! {
            @if !reasons.is_empty() {
                ul class="reasons" {
                    @for (why, n) in &reasons { li { (n) ": " (Text(why)) } }
                }
            }
        };
        html! {
            section id="counts" {
                h2 { (s.total()) " tests" }
                div class="cards" {
                    (card(Outcome::Passed.as_str(), "passed", s.passed, html! {}))
                    (card("flaky", "flaky (passed on a retry)", s.flaky.len(), html! {}))
                    (card(Outcome::Failed.as_str(), "failed", s.failed, by_kind))
                    (card(Outcome::Skipped.as_str(), "skipped", s.skipped, why))
                    (card(Outcome::ExpectedFailure.as_str(), "expected failures", s.expected_failures, html! {}))
                    (card(Outcome::UnexpectedPass.as_str(), "unexpected passes", s.unexpected_passes, html! {}))
                }
                @if let Some(exclusive) = s.exclusive_line() {
                    p class="exclusive" { (Text(&exclusive)) }
                }
            }
            "\n"
        }
    }

    /// Leaks: what the residue sweeps found, every resource a test's
    /// cleanup or the journal says was left behind, and every process a test
    /// left running.
    fn leaks(&self) -> Markup {
        let mut items: Vec<Markup> = Vec::new();
        for part in self.parts {
            if let Some(p) = part.phase("residue").filter(|p| p.verdict == "fail") {
                items.push(html! {
                    li class="leak residue" {
                        "residue sweep of run " (Text(&part.run_id())) ": " (Text(&p.evidence))
                    }
                });
            }
            for r in &part.records {
                // An earlier attempt's leak is a leak too.
                for res in r
                    .resources
                    .iter()
                    .chain(r.attempts.iter().flat_map(|a| a.resources.iter()))
                    .filter(|x| x.state == ResourceState::Leaked)
                {
                    items.push(html! {
                        li class="leak resource" {
                            (Text(&res.kind)) " " code { (Text(&res.name)) } ", created by "
                            code { (Text(&r.name)) } ": leaked"
                        }
                    });
                }
                // A fault left in effect is residue on the pod too: the node
                // is not what the next test expects.
                for f in r.faults.iter().filter(|f| !fault_undone(f)) {
                    items.push(html! {
                        li class="leak fault" data-node=(Text(&f.node)) {
                            "fault " code { (Text(&f.fault)) } " on node " code { (Text(&f.node)) }
                            ", injected by " code { (Text(&r.name)) } ": " (Text(&fault_fate(f)))
                        }
                    });
                }
                for p in &r.leftover_processes {
                    items.push(html! {
                        li class="leak process" {
                            "process " (p.pid) " " code { (Text(&p.command)) } ", left running by "
                            code { (Text(&r.name)) } ": " (p.fate.as_str())
                        }
                    });
                }
            }
        }
        let swept = self
            .parts
            .iter()
            .all(|p| p.phase("residue").is_some_and(|r| r.verdict != "skip"));
        html! {
            section id="leaks" {
                h2 { "Leaks" }
                @if items.is_empty() && swept {
                    p class="none" { "None: the residue sweep found nothing left on the pod." }
                } @else if items.is_empty() {
                    p class="hint" {
                        "No test's cleanup reported a leak; but no residue sweep ran over every pod \
                         (it is a phase of " code { "testkit-runner run" } "), so nothing created \
                         behind the framework's back would show here."
                    }
                } @else {
                    ul class="leaks" { @for item in &items { (item) } }
                }
            }
            "\n"
        }
    }

    fn failures(&self, logs_left: &mut usize) -> Markup {
        let mut failed: Vec<(usize, &TestRecord)> = all_tests(self.parts)
            .into_iter()
            .filter(|(_, r)| r.outcome.fails())
            .collect();
        // Grouped by whose fault they are, in triage order.
        failed.sort_by_key(|(_, r)| category_of(r));
        let shown = &failed[..failed.len().min(MAX_FAILURES)];
        let groups: Vec<(FailureCategory, usize)> = FailureCategory::ALL
            .iter()
            .map(|c| {
                (
                    *c,
                    failed.iter().filter(|(_, r)| category_of(r) == *c).count(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let mut shots_left = SCREENSHOTS_BUDGET;
        let mut frames_left = super::trace::FRAMES_BUDGET;
        html! {
            section id="failures" {
                h2 { "Failures" }
                (super::trace::timeline_hooks())
                @if failed.is_empty() {
                    p class="none" { "No test failed." }
                } @else {
                    p class="categories" {
                        "By category: "
                        @for (i, (c, n)) in groups.iter().enumerate() {
                            @if i > 0 { ", " }
                            a href={ "#failures-" (c.as_str()) } { (n) " " (c.as_str()) }
                        }
                    }
                }
                @for (i, (part, r)) in shown.iter().enumerate() {
                    @let part = &self.parts[*part];
                    @let category = category_of(r);
                    @if i == 0 || category_of(shown[i - 1].1) != category {
                        h3 class="category" id={ "failures-" (category.as_str()) } {
                            (category.as_str())
                            " (" (groups.iter().find(|(c, _)| *c == category).map_or(0, |(_, n)| *n)) ")"
                        }
                    }
                    article class="failure" data-test=(Text(&r.name)) data-category=(category.as_str()) {
                        h3 {
                            span class={ "tag " (r.outcome.as_str()) } { (failure_kind_word(r)) } " "
                            (Text(&r.name)) " " span class="bin" { (Text(&r.binary)) } " "
                            span class="dur" { (ms(r.duration_ms)) }
                        }
                        @if !r.description.is_empty() {
                            p class="desc" { (Text(&r.description)) }
                        }
                        pre class="message" { (Text(r.message.as_deref().unwrap_or("(no message)"))) }
                        (resources(part, r))
                        (faults_table(r))
                        (history_lanes(part, r))
                        (self.screenshots(part, r, &mut shots_left))
                        (super::trace::waterfall(&part.dir, r, &mut frames_left))
                        (log_box(&r.output, logs_left, true))
                        @if !r.attempts.is_empty() {
                            @let n = r.total_attempts();
                            p class="attempts" {
                                "Attempt " (n) " of " (n) " failed; the attempts before it:"
                            }
                            @for a in &r.attempts {
                                (attempt_html(a, n, logs_left))
                            }
                        }
                    }
                }
                (past_cap(failed.len(), " more failed tests: filter the list of every test by outcome."))
            }
            "\n"
        }
    }

    /// Flaky tests: each that failed and then, retried, passed (or failed as
    /// its known issue documents), with every failed attempt's message and
    /// log.
    fn flaky(&self, logs_left: &mut usize) -> Markup {
        let flaky: Vec<&TestRecord> = all_tests(self.parts)
            .into_iter()
            .map(|(_, r)| r)
            .filter(|r| r.is_flaky())
            .collect();
        html! {
            section id="flaky" {
                h2 { "Flaky" }
                @if flaky.is_empty() {
                    p class="none" { "No test failed and then passed on a retry." }
                }
                @for r in flaky.iter().take(MAX_FAILURES) {
                    @let total = r.total_attempts();
                    article class="flaky" data-test=(Text(&r.name)) {
                        h3 {
                            span class="tag flaky" { "flaky" } " " (Text(&r.name)) " "
                            span class="bin" { (Text(&r.binary)) } " "
                            span class="dur" {
                                (r.outcome.as_str().replace('_', " ")) " on attempt " (total)
                                " of " (total) ", after " (r.failed_attempts().count()) " failed"
                            }
                        }
                        @if !r.description.is_empty() {
                            p class="desc" { (Text(&r.description)) }
                        }
                        @for a in r.failed_attempts() {
                            (attempt_html(a, total, logs_left))
                        }
                    }
                }
                (past_cap(flaky.len(), " more flaky tests: filter the list of every test."))
            }
            "\n"
        }
    }

    /// Every `*.png` in the test's artifacts dir, inlined while the budget
    /// lasts, linked after.
    fn screenshots(&self, part: &Part, r: &TestRecord, left: &mut u64) -> Markup {
        let dir = testkit_engine::run::artifacts_dir(&part.dir, &r.binary, &r.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return html! {};
        };
        let mut pngs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("png")))
            .collect();
        pngs.sort();
        if pngs.is_empty() {
            return html! {};
        }
        let mut figures = Vec::with_capacity(pngs.len());
        for png in pngs {
            let name = png
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(u64::MAX);
            let bytes = (size <= SCREENSHOT_CAP && size <= *left)
                .then(|| std::fs::read(&png).ok())
                .flatten();
            figures.push(match bytes {
                Some(bytes) => {
                    *left -= size;
                    let src = format!(
                        "data:image/png;base64,{}",
                        base64::engine::general_purpose::STANDARD.encode(bytes)
                    );
                    html! {
                        figure {
                            img class="screenshot" alt=(Text(&name)) src=(src);
                            figcaption { (Text(&name)) }
                        }
                    }
                }
                None => {
                    let href = relative(self.out_dir, &png);
                    html! {
                        figure {
                            a href=(Text(&href)) { (Text(&name)) }
                            figcaption { "too large to inline" }
                        }
                    }
                }
            });
        }
        html! {
            div class="screenshots" { @for figure in &figures { (figure) } }
        }
    }

    fn known_issues(&self) -> Markup {
        let issues = &self.summary.known_issues;
        if issues.is_empty() {
            return html! {};
        }
        html! {
            section id="known-issues" {
                h2 { "Known issues" }
                table {
                    tr { th { "id" } th { "title" } th { "state" } th { "tests" } }
                    @for issue in issues {
                        tr class={ "issue" @if issue.state.fails_run() { " bad" } } {
                            td { (Text(&issue.id)) }
                            td { (Text(issue.title.as_deref().unwrap_or(""))) }
                            td { (Text(issue.state.describe())) }
                            td {
                                @for (i, (test, _)) in issue.tests.iter().enumerate() {
                                    @if i > 0 { " " }
                                    code { (Text(test)) }
                                }
                            }
                        }
                    }
                }
            }
            "\n"
        }
    }

    fn slowest(&self) -> Markup {
        let mut tests: Vec<&TestRecord> = all_tests(self.parts)
            .into_iter()
            .map(|(_, r)| r)
            .filter(|r| r.started_at_ms > 0)
            .collect();
        tests.sort_by(|a, b| b.duration_ms.cmp(&a.duration_ms).then(a.name.cmp(&b.name)));
        html! {
            section id="slowest" {
                h2 { "The 10 slowest tests" }
                table {
                    tr { th { "duration" } th { "test" } th { "outcome" } }
                    @for r in tests.iter().take(10) {
                        tr {
                            td { (ms(r.duration_ms)) }
                            td { (Text(&r.name)) " " span class="bin" { (Text(&r.binary)) } }
                            td class=(r.outcome.as_str()) { (r.outcome.as_str()) }
                        }
                    }
                }
            }
            "\n"
        }
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

/// One count of the counts section, `more` under it.
fn card(kind: &str, label: &str, n: usize, more: Markup) -> Markup {
    html! {
        div class={ "count " (kind) @if n == 0 { " zero" } } data-kind=(kind) {
            span class="n" { (n) } " " span class="label" { (label) } (more)
        }
    }
}

/// `… and N more …` under a section of `total` tests that shows only
/// [`MAX_FAILURES`] of them; nothing when it shows them all.
fn past_cap(total: usize, more: &str) -> Markup {
    html! {
        @if total > MAX_FAILURES {
            p class="hint" { "… and " (total - MAX_FAILURES) (more) }
        }
    }
}

/// Where the script draws the timeline.
fn timeline() -> Markup {
    html! {
        section id="timeline-section" {
            h2 { "Timeline" }
            p class="hint" {
                "Each test is a bar on the lane that ran it, coloured by outcome; the thin bars \
                 under it are the resources it created, from journaled to verified gone (red: \
                 leaked); a dotted line before a bar is the time its test waited for the pod lock \
                 (an " code { "exclusive" } " test had the pod). Each pod's boot, residue sweep \
                 and teardown are on its first lane. Below a pod's tests, each node a test \
                 injected faults into has a lane of its own, a bar per fault from its injection \
                 to its undo (red, to the end of the run: never undone). Hover or click a bar for \
                 its details."
            }
            div id="timeline" { noscript { "The timeline needs JavaScript." } }
            div id="details" class="details" hidden {}
        }
        "\n"
    }
}

/// Where the script lists every test, with its filter.
fn every_test() -> Markup {
    html! {
        section id="tests-section" {
            h2 { "Every test" }
            div class="filter" {
                label {
                    "Outcome "
                    select id="filter-outcome" {
                        option value="" { "all" }
                        @for o in FILTER_OUTCOMES {
                            option value=(o.as_str()) { (o.as_str().replace('_', " ")) }
                        }
                        option value="flaky" { "flaky" }
                    }
                }
                " "
                label { "Name " input id="filter-name" type="search" placeholder="part of a test's name"; }
                " "
                span id="filter-count" {}
            }
            table id="tests" {
                thead {
                    tr { th { "outcome" } th { "test" } th { "binary" } th { "duration" } th { "message" } }
                }
                tbody {}
            }
        }
        "\n"
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
        "outcome": r.outcome.as_str(),
        "kind": r.failure_kind.map(FailureKind::as_str),
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
                "state": f.state.as_str(),
                "from": f.injected_at_ms,
                "to": if open { None } else { f.undone_at_ms },
                "open": open,
                "fate": fate,
                "title": format!("{} — injected by {}, {fate}", f.fault, r.name),
            })
        })
        .collect()
}

/// A test's resources and their fate: the record's, with the journal's
/// times; then what the journal has of the test that its record lacks.
fn resources(part: &Part, r: &TestRecord) -> Markup {
    let lives: Vec<&Lifetime> = part.lifetimes.iter().filter(|l| l.test == r.name).collect();
    if r.resources.is_empty() && lives.is_empty() {
        return html! {};
    }
    let life_of = |kind: &str, name: &str| {
        lives
            .iter()
            .find(|l| l.kind == kind && l.name == name)
            .copied()
    };
    let unrecorded = lives.iter().filter(|l| {
        !r.resources
            .iter()
            .any(|res| res.kind == l.kind && res.name == l.name)
    });
    html! {
        table class="resources" {
            tr { th { "resource" } th { "fate" } th { "lifetime" } }
            @for res in &r.resources {
                tr class={ "res " (res.state.as_str()) } {
                    td { (Text(&res.kind)) " " code { (Text(&res.name)) } }
                    td { (res.state.as_str()) }
                    td {
                        @if let Some(l) = life_of(&res.kind, &res.name) {
                            (ms(l.to_ms - l.from_ms)) " (" (Text(&l.fate)) ")"
                        }
                    }
                }
            }
            @for l in unrecorded {
                tr class="res" {
                    td { (Text(&l.kind)) " " code { (Text(&l.name)) } }
                    td { (Text(&l.fate)) }
                    td { (ms(l.to_ms - l.from_ms)) }
                }
            }
        }
    }
}

/// The faults a test injected, with what became of each and for how long
/// it was in effect; one not undone is styled as the failure it is.
fn faults_table(r: &TestRecord) -> Markup {
    if r.faults.is_empty() {
        return html! {};
    }
    let end = r.started_at_ms + r.duration_ms;
    let lasted = |f: &FaultRecord| match f.undone_at_ms {
        Some(at) if !fault_open(f) => ms(at.saturating_sub(f.injected_at_ms)),
        _ if fault_undone(f) => "until its undo (no time recorded)".to_owned(),
        _ => format!(
            "{} by the test's end; never undone",
            ms(end.saturating_sub(f.injected_at_ms))
        ),
    };
    html! {
        table class="faults" {
            tr { th { "fault" } th { "node" } th { "state" } th { "in effect" } }
            @for f in &r.faults {
                tr class={ "fault " (f.state.as_str()) @if fault_open(f) { " bad" } }
                    data-node=(Text(&f.node)) title=(Text(&fault_line(f))) {
                    td { (Text(&f.fault)) }
                    td { code { (Text(&f.node)) } }
                    td { (Text(&fault_fate(f))) }
                    td { (lasted(f)) }
                }
            }
        }
    }
}

/// The checks of a failed test's history that found it not linearizable:
/// each its smallest failing part drawn as lanes, one per client, each
/// operation a bar from its invocation to its completion (by rank, not to
/// scale: what matters is which overlap), the conflict marked. The history
/// is read from the test's own artifacts folder, never from a path a
/// record names.
fn history_lanes(part: &Part, r: &TestRecord) -> Markup {
    use testkit_engine::history::{HistorySnapshot, FILE_NAME};
    let path = testkit_engine::run::artifacts_dir(&part.dir, &r.binary, &r.name).join(FILE_NAME);
    let Ok(history) = HistorySnapshot::read(&path) else {
        return html! {};
    };
    html! {
        @for failed in &history.failed_checks {
            @let d = &failed.drawing;
            @let span = d.ops.iter().map(|o| o.end.unwrap_or(o.start) + 1).max().unwrap_or(1) + 1;
            @let pct = |rank: usize| rank as f64 * 100.0 / span as f64;
            @let clients: BTreeSet<u32> = d.ops.iter().map(|o| o.client).collect();
            figure class="history-lanes" {
                figcaption {
                    (Text(&failed.what)) ": the smallest part that cannot be linearized"
                    @if d.not_drawn > 0 { " (" (d.not_drawn) " more operations not drawn)" }
                }
                @for client in &clients {
                    div class="lane" {
                        span class="client" { "client " (client) }
                        div class="track" {
                            @for o in d.ops.iter().filter(|o| o.client == *client) {
                                @let end = o.end.unwrap_or(span);
                                div class={ "op " (o.outcome.as_str()) @if o.conflict { " conflict" } }
                                    style=(format!("left:{:.2}%;width:{:.2}%", pct(o.start), pct(end.saturating_sub(o.start).max(1))))
                                    title=(Text(&format!("{} {} ({}){}", o.number, o.label, o.outcome.as_str(),
                                        if o.conflict { ": the conflict, which no legal order can place" } else { "" }))) {
                                    (o.number) " " (Text(&o.label))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A log, its last bytes while the page's budget for logs lasts.
fn log_box(output: &str, logs_left: &mut usize, open: bool) -> Markup {
    let (log, cut) = tail(output, LOG_CAP.min(*logs_left));
    *logs_left -= log.len();
    html! {
        details class="log-box" open[open] {
            summary { "log" }
            @if cut > 0 {
                p class="hint" {
                    "The first " (cut) " bytes are cut; the whole log is in its record."
                }
            }
            pre class="log" {
                @if output.is_empty() { "(the test logged nothing)" } @else { (Text(log)) }
            }
        }
    }
}

/// One earlier attempt of a test: what it came to, its message, its log.
fn attempt_html(a: &AttemptRecord, total: u32, logs_left: &mut usize) -> Markup {
    let kind = a
        .failure_kind
        .map_or(a.outcome.as_str(), FailureKind::as_str);
    html! {
        div class="attempt" data-attempt=(a.attempt) {
            h4 {
                "attempt " (a.attempt) " of " (total) ": "
                span class={ "tag " (a.outcome.as_str()) } { (kind) } " "
                span class="dur" { (ms(a.duration_ms)) }
            }
            pre class="message" { (Text(a.message.as_deref().unwrap_or("(no message)"))) }
            (log_box(&a.output, logs_left, true))
        }
    }
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

    /// `s` as the page carries a text.
    fn text(s: &str) -> String {
        html! { (Text(s)) }.into_string()
    }

    #[test]
    fn controls_and_non_characters_are_shown_not_sent_raw() {
        assert_eq!(
            text("a\u{0}b\u{7}c\u{1b}[31mred\u{1b}[0m\td\u{7f}e\u{FFFE}\u{FFFF}]]>\n"),
            "a␀b␇cred\td␡e\u{FFFD}\u{FFFD}]]&gt;\n"
        );
        assert_eq!(text("x\u{85}y\u{1b}"), "x\u{FFFD}y");
        assert_eq!(text("\u{0}\u{7}"), "␀␇");
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            assert_eq!(
                has_unprintable(c.encode_utf8(&mut [0; 4])),
                unprintable(c),
                "{c:?}"
            );
        }
        assert_eq!(text("plain\ttext\r\n"), "plain\ttext\r\n");
        let json = script_json(json!({"m": "x\u{0}\u{7}\u{1b}[1my\u{FFFE}"}));
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["m"], "x␀␇y\u{FFFD}");
    }

    /// Markup in a text is text, in an element and in an attribute, whose
    /// value every template quotes with `"`: a `'` cannot end it.
    #[test]
    fn markup_and_script_breaking_text_is_escaped() {
        assert_eq!(
            text("<b a=\"x\">'&'</b>"),
            "&lt;b a=&quot;x&quot;&gt;'&amp;'&lt;/b&gt;"
        );
        let hostile = "x\" onclick='y' a=\"";
        assert_eq!(
            html! { div title=(Text(hostile)) {} }.into_string(),
            "<div title=\"x&quot; onclick='y' a=&quot;\"></div>"
        );
        let json = script_json(json!({"m": "</script><!-- & \u{2028}", "<k>": "\u{2029}>"}));
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        assert!(
            !json.contains('\u{2028}') && !json.contains('\u{2029}'),
            "{json}"
        );
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["m"], "</script><!-- & \u{2028}");
        assert_eq!(back["<k>"], "\u{2029}>");
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

    /// A failed test whose history a register check found not
    /// linearizable (a read of 1 after a write of 2 completed) gets that
    /// part drawn as lanes: one per client, a bar per operation, the
    /// conflict marked and said so in its tooltip, the labels escaped.
    #[test]
    fn a_failed_history_check_is_drawn_as_lanes_with_its_conflict_marked() {
        use testkit_engine::history::check::{Check, CheckError};
        use testkit_engine::history::{
            FailedCheck, HistorySnapshot, Op, Operation, Outcome, Value,
        };
        let op = |client, op, invoke_ns, complete_ns, result: Value| Operation {
            client,
            op,
            invoke_ns,
            complete_ns: Some(complete_ns),
            outcome: Outcome::Ok,
            result,
        };
        let mut history = HistorySnapshot::new(
            "faults::register",
            vec![
                op(0, Op::write("<x>", 1), 0, 10, Value::Nil),
                op(1, Op::write("<x>", 2), 20, 30, Value::Nil),
                op(2, Op::read("<x>"), 40, 50, Value::Int(1)),
            ],
        );
        let Err(CheckError::NotLinearizable(found)) = Check::register().run(&history) else {
            panic!("a stale read is not linearizable");
        };
        history.failed_checks.push(FailedCheck::of(&found));
        let results = tempfile::tempdir().unwrap();
        let mut r = TestRecord::new("run1", "faults", "faults::register");
        r.fail(
            testkit_engine::report::FailureKind::Error,
            "register check: not linearizable".to_owned(),
        );
        let artifacts = testkit_engine::run::artifacts_dir(results.path(), &r.binary, &r.name);
        std::fs::create_dir_all(&artifacts).unwrap();
        history
            .write(&artifacts.join(testkit_engine::history::FILE_NAME))
            .unwrap();
        let records = vec![r];
        let summary = Summary::from_records(&records, None);
        let parts = [Part {
            dir: results.path().to_owned(),
            run: None,
            records,
            phases: Vec::new(),
            lifetimes: Vec::new(),
            source: None,
            seal: crate::seal::SealCheck::Unsealed,
        }];
        let html = Page {
            title: "history",
            parts: &parts,
            summary: &summary,
            out_dir: results.path(),
        }
        .html();
        assert!(html.contains("figure class=\"history-lanes\""), "drawn");
        for client in 0..3 {
            assert!(
                html.contains(&format!("client {client}")),
                "a lane per client"
            );
        }
        assert_eq!(
            html.matches("class=\"op ok conflict\"").count(),
            1,
            "one conflict"
        );
        assert!(html.contains("the conflict, which no legal order can place"));
        assert!(
            html.contains("&lt;x&gt;") && !html.contains("read <x>"),
            "escaped"
        );
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

    /// Markup, controls and an escape sequence, as a test may write them.
    const HOSTILE: &str = "<hostile a=\"1\" b='2'>&amp;\u{0}\u{7}\u{1b}[31m\u{FFFE}</hostile>";

    /// Every text the page shows of a run holds [`HOSTILE`]: the records'
    /// (a failure with its resources, faults, processes, earlier attempts
    /// and trace; a skip; a flaky test), the journal's and the phases'.
    /// None of it becomes markup, and no control reaches the page: each
    /// is a splice of a template, as [`Text`].
    #[test]
    fn every_text_of_a_run_is_escaped_and_printable_on_the_page() {
        use testkit_engine::report::{
            fold_attempts, FailureKind, FaultState, LeftoverProcess, ProcessFate, ResourceRecord,
        };
        use testkit_engine::trace::{Entry, EntryKind, Http, Trace};
        let h = |what: &str| format!("{what} {HOSTILE}");
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_700_000_000_000;
        // A test's name and binary name its artifacts folder: no NUL there.
        let (name, binary) = ("t::fails <b>&amp;</b>", "bin");
        let attempt = |n: u32, outcome: Outcome| {
            let mut r = TestRecord::new("run1", binary, name);
            (r.attempt, r.started_at_ms, r.duration_ms) = (n, t0 + u64::from(n), 10);
            r.description = h("description");
            if outcome == Outcome::Failed {
                r.fail(FailureKind::Timeout, h("message"));
                r.output = h("log");
            }
            r
        };
        let mut records = fold_attempts(vec![
            attempt(1, Outcome::Failed),
            attempt(2, Outcome::Failed),
        ]);
        let failed = &mut records[0];
        failed.resources = vec![ResourceRecord {
            kind: h("kind"),
            name: h("resource"),
            state: ResourceState::Leaked,
        }];
        let mut fault = FaultRecord::injected(&h("node"), h("fault"));
        fault.state = FaultState::NotUndone;
        fault.problem = Some(h("problem"));
        failed.faults = vec![fault];
        failed.leftover_processes = vec![LeftoverProcess {
            pid: 7,
            command: h("command"),
            fate: ProcessFate::Survived,
        }];
        let artifacts = testkit_engine::run::artifacts_dir(dir.path(), binary, name);
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::write(artifacts.join("shot <b a=\"1\">&amp;'.png"), b"\x89PNG").unwrap();
        let trace = artifacts.join(testkit_engine::trace::FILE_NAME);
        Trace {
            version: 1,
            test: name.to_owned(),
            entries: vec![Entry {
                at_us: 0,
                duration_us: 5,
                kind: EntryKind::Http,
                title: h("title"),
                ok: false,
                detail: h("detail"),
                http: Some(Http {
                    method: h("method"),
                    url: h("url"),
                    status: None,
                    request_headers: vec![(h("request header"), h("value"))],
                    request_body: h("request body"),
                    response_headers: vec![(h("response header"), h("value"))],
                    response_body: h("response body"),
                }),
                frame: None,
            }],
            dropped: 1,
            trimmed: 0,
            frames_dropped: 0,
        }
        .write(&trace)
        .unwrap();
        failed.trace = Some(trace.display().to_string());
        let mut skipped = TestRecord::new("run1", binary, &h("t::skipped"));
        skipped.outcome = Outcome::Skipped;
        skipped.skip_reason = Some(h("reason"));
        records.push(skipped);
        let flaky = |n: u32| {
            let mut r = TestRecord::new("run1", &h("binary"), &h("t::flaky"));
            (r.attempt, r.started_at_ms) = (n, t0 + 100 + u64::from(n));
            if n == 1 {
                r.fail(FailureKind::Error, h("flaked"));
            }
            r
        };
        records.extend(fold_attempts(vec![flaky(1), flaky(2)]));
        let phase = |name: &str, verdict: &str| super::super::model::PhaseLine {
            phase: name.to_owned(),
            verdict: verdict.to_owned(),
            evidence: h("evidence"),
            duration_ms: 1,
            at: t0,
            exit_code: None,
            run_id: None,
            category: None,
        };
        let summary = Summary::from_records(&records, None);
        let parts = [Part {
            dir: dir.path().to_owned(),
            run: Some(h("run")),
            records,
            phases: vec![phase("up", "pass"), phase("residue", "fail")],
            lifetimes: vec![Lifetime {
                kind: h("kind"),
                name: h("journaled"),
                test: name.to_owned(),
                from_ms: t0,
                to_ms: t0 + 1,
                fate: h("fate"),
                settled: false,
            }],
            source: None,
            seal: crate::seal::SealCheck::Missing(h("seal")),
        }];
        let html = Page {
            title: &h("title"),
            parts: &parts,
            summary: &summary,
            out_dir: dir.path(),
        }
        .html();

        assert!(!html.contains("<hostile"), "a text became markup: {html}");
        assert!(
            !has_unprintable(&html),
            "a control reached the page: {html:?}"
        );
        let escaped = "&lt;hostile a=&quot;1&quot; b='2'&gt;&amp;amp;␀␇\u{FFFD}&lt;/hostile&gt;";
        for what in [
            "title",
            "run",
            "evidence",
            "seal",
            "description",
            "message",
            "log",
            "kind",
            "resource",
            "journaled",
            "fate",
            "node",
            "fault",
            "problem",
            "command",
            "method",
            "url",
            "request header",
            "value",
            "request body",
            "response header",
            "response body",
            "detail",
            "reason",
            "flaked",
            "t::flaky",
            "binary",
        ] {
            assert!(
                html.contains(&format!("{what} {escaped}")),
                "no {what:?} on the page, escaped: {html}"
            );
        }
        for text in [
            "t::fails &lt;b&gt;&amp;amp;&lt;/b&gt;",
            "shot &lt;b a=&quot;1&quot;&gt;&amp;amp;'.png",
        ] {
            assert!(html.contains(text), "no {text:?} on the page: {html}");
        }
    }

    #[test]
    fn cuts_stay_on_character_boundaries() {
        let (t, cut) = tail("ééé", 3);
        assert_eq!((t, cut), ("é", 4));
        assert_eq!(head("ééé", 3), "é…");
        assert_eq!(tail("abc", 10), ("abc", 0));
    }
}
