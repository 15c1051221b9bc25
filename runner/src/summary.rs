//! The end-of-run summary, readable at a glance: each phase with its verdict
//! and one line of evidence, the test counts, known issues with their
//! state, leaks, failed tests, and where the results are. Printed as text,
//! and written as Markdown to `<results>/summary.md` for CI pages (and, on
//! GitHub Actions, appended to the job's step summary).

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use testkit_engine::config::FlakyPolicy;
use testkit_engine::report::{FailureCategory, Summary, TestRecord};

use crate::verdict::{PhaseResult, Verdict};

pub(crate) struct RunSummary<'a> {
    pub(crate) suite: &'a Path,
    pub(crate) run_id: &'a str,
    pub(crate) results_dir: &'a Path,
    pub(crate) phases: &'a [PhaseResult],
    pub(crate) tests: Option<&'a Summary>,
    pub(crate) failures: &'a [FailedTest],
    pub(crate) leaks: &'a [String],
    /// The residue phase listed everything: no leak means none, not unknown.
    pub(crate) leaks_known: bool,
    pub(crate) exit_code: u8,
    pub(crate) interrupted: bool,
    pub(crate) keep_note: Option<&'a str>,
    /// What a rerun reran, and how it came out ([`crate::rerun::Rerun::line`]).
    pub(crate) rerun: Option<&'a str>,
    pub(crate) took: Duration,
    /// `[suite] flaky`: what the flaky tests did to the run.
    pub(crate) flaky: FlakyPolicy,
}

/// At most this many failed tests are listed; the rest are in junit.xml.
const MAX_FAILURES: usize = 20;

/// A failed test as a summary lists it.
#[derive(Debug, Clone)]
pub(crate) struct FailedTest {
    /// `binary::name`.
    pub(crate) name: String,
    /// The first line of why.
    pub(crate) why: String,
    /// Whose fault it is.
    pub(crate) category: FailureCategory,
}

impl FailedTest {
    /// Each test of `records` that fails a run, in their order.
    pub(crate) fn of(records: &[TestRecord]) -> Vec<FailedTest> {
        records
            .iter()
            .filter(|r| r.outcome.fails())
            .map(|r| FailedTest {
                name: format!("{}::{}", r.binary, r.name),
                why: r
                    .message
                    .as_deref()
                    .and_then(|m| m.lines().next())
                    .unwrap_or("failed")
                    .to_owned(),
                category: r.category().unwrap_or(FailureCategory::Product),
            })
            .collect()
    }
}

/// `failures by category: 2 product, 1 infrastructure`: how many failed
/// tests each category has, in the categories' order; `None` without
/// failures.
pub(crate) fn categories_line(failures: &[FailedTest]) -> Option<String> {
    if failures.is_empty() {
        return None;
    }
    let counts: Vec<String> = FailureCategory::ALL
        .iter()
        .filter_map(|c| {
            let n = failures.iter().filter(|f| f.category == *c).count();
            (n > 0).then(|| format!("{n} {c}"))
        })
        .collect();
    Some(format!("failures by category: {}", counts.join(", ")))
}

/// The failed tests, category by category: the order a reader triages in.
fn by_category(failures: &[FailedTest]) -> Vec<&FailedTest> {
    let mut sorted: Vec<&FailedTest> = failures.iter().collect();
    sorted.sort_by_key(|f| f.category);
    sorted
}

impl RunSummary<'_> {
    fn headline(&self) -> String {
        let what = match self.exit_code {
            0 => "PASSED",
            1 => "FAILED",
            2 => "INCOMPLETE",
            130 => "INTERRUPTED",
            _ => "ERROR",
        };
        let _ = self.interrupted;
        format!(
            "{what}: {} (run {}) in {}, exit code {}",
            self.suite.display(),
            self.run_id,
            humantime::format_duration(Duration::from_secs(self.took.as_secs())),
            self.exit_code
        )
    }

    fn counts(&self) -> Option<String> {
        self.tests
            .map(|s| format!("{} tests: {}", s.total(), s.counts()))
    }

    /// The line that names tests whose resources something else deleted
    /// before their cleanup could (`gone_before_delete`), when any did.
    fn gone_before_delete(&self) -> Option<String> {
        let s = self.tests.filter(|s| !s.gone_before_delete.is_empty())?;
        Some(gone_before_delete_line(s))
    }

    /// The browser phase's line, when a test opened a browser.
    fn browser(&self) -> Option<String> {
        let s = self.tests.filter(|s| s.browser_tests > 0)?;
        Some(format!(
            "browser: {} tests, {} screenshots, {} teardowns timed out",
            s.browser_tests, s.screenshots, s.browser_teardowns_timed_out
        ))
    }

    /// The text printed at the end of a run.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "\n{}", self.headline());
        if let Some(rerun) = self.rerun {
            let _ = writeln!(out, "  {rerun}");
        }
        for p in self.phases {
            let mark = match p.verdict {
                Verdict::Pass => "ok  ",
                Verdict::Fail => "FAIL",
                Verdict::Skip => "skip",
            };
            match p.category {
                Some(c) => {
                    let _ = writeln!(out, "  {mark} {:<8} [{c}] {}", p.phase, p.evidence);
                }
                None => {
                    let _ = writeln!(out, "  {mark} {:<8} {}", p.phase, p.evidence);
                }
            }
        }
        if let Some(counts) = self.counts() {
            let _ = writeln!(out, "  {counts}");
        }
        if let Some(browser) = self.browser() {
            let _ = writeln!(out, "  {browser}");
        }
        if let Some(exclusive) = self.tests.and_then(Summary::exclusive_line) {
            let _ = writeln!(out, "  {exclusive}");
        }
        if let Some(gone) = self.gone_before_delete() {
            let _ = writeln!(out, "  {gone}");
        }
        if let Some(s) = self.tests {
            for flaky in &s.flaky {
                let _ = writeln!(out, "  flaky: {}: {}", flaky.test, flaky.describe());
            }
            if let Some(line) = flaky_verdict(s, Some(self.flaky)) {
                let _ = writeln!(out, "  {line}");
            }
            for issue in &s.known_issues {
                let title = issue
                    .title
                    .as_deref()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  known issue {}{title}: {}",
                    issue.id,
                    issue.state.describe()
                );
            }
        }
        if let Some(line) = categories_line(self.failures) {
            let _ = writeln!(out, "  {line}");
        }
        for f in by_category(self.failures).into_iter().take(MAX_FAILURES) {
            let _ = writeln!(out, "  failed: {} [{}]: {}", f.name, f.category, f.why);
        }
        if self.failures.len() > MAX_FAILURES {
            let _ = writeln!(
                out,
                "  ... and {} more failed tests (see junit.xml)",
                self.failures.len() - MAX_FAILURES
            );
        }
        if !self.leaks_known {
            let _ = writeln!(
                out,
                "  leaks: unknown: the residue could not be listed whole (see `residue`)"
            );
        } else if self.leaks.is_empty() {
            let _ = writeln!(out, "  leaks: none");
        }
        for leak in self.leaks {
            let _ = writeln!(out, "  LEAK: {leak}");
        }
        for line in self.tests.map(Summary::leftover_lines).unwrap_or_default() {
            let _ = writeln!(out, "  LEFT RUNNING: {line}");
        }
        if let Some(note) = self.keep_note {
            let _ = write!(out, "  {note}");
        }
        let _ = writeln!(out, "  results: {}", self.results_dir.display());
        out
    }

    /// The same, as Markdown.
    pub(crate) fn markdown(&self) -> String {
        let cell = md_cell;
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", cell(&self.headline()));
        if let Some(rerun) = self.rerun {
            let _ = writeln!(out, "{}\n", cell(rerun));
        }
        let _ = writeln!(out, "| phase | verdict | category | evidence | time |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for p in self.phases {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                p.phase,
                p.verdict.word(),
                p.category.map_or("", FailureCategory::as_str),
                cell(&p.evidence),
                humantime::format_duration(Duration::from_millis(p.duration_ms))
            );
        }
        if let Some(s) = self.tests {
            tests_markdown(&mut out, s, self.failures, Some(self.flaky));
            if let Some(browser) = self.browser() {
                let _ = writeln!(out, "\n{}", cell(&browser));
            }
        }
        let _ = writeln!(out, "\n## Leaks\n");
        if !self.leaks_known {
            let _ = writeln!(
                out,
                "Unknown: the residue could not be listed whole (see the residue phase)."
            );
        } else if self.leaks.is_empty() {
            let _ = writeln!(out, "None.");
        }
        for leak in self.leaks {
            let _ = writeln!(out, "- {}", cell(leak));
        }
        let left = self.tests.map(Summary::leftover_lines).unwrap_or_default();
        if !left.is_empty() {
            let _ = writeln!(out, "\n## Processes left running\n");
        }
        for line in left {
            let _ = writeln!(out, "- {}", cell(&line));
        }
        if let Some(note) = self.keep_note {
            let _ = writeln!(out, "\n## Kept pod\n\n```text\n{note}```");
        }
        let _ = writeln!(out, "\nResults: `{}`", self.results_dir.display());
        out
    }
}

/// A Markdown table cell: no pipe or newline breaks the table.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// What the flaky tests did to the run, said out loud: `None` when there
/// were none. `policy` is the suite's `[suite] flaky`, when known.
pub(crate) fn flaky_verdict(s: &Summary, policy: Option<FlakyPolicy>) -> Option<String> {
    let n = s.flaky.len();
    if n == 0 {
        return None;
    }
    let (tests, them) = if n == 1 {
        ("1 flaky test".to_owned(), "it")
    } else {
        (format!("{n} flaky tests"), "them")
    };
    Some(match policy {
        Some(FlakyPolicy::Fail) => {
            format!("{tests} failed the run ([suite] flaky = \"fail\" in testkit.toml)")
        }
        Some(_) => format!(
            "{tests} passed on a retry, and the run passes with {them} ([suite] flaky = \"pass\"; \
             set flaky = \"fail\" in testkit.toml to fail it)"
        ),
        None => format!(
            "{tests} passed on a retry (whether that fails a run is the suite's [suite] flaky)"
        ),
    })
}

/// The tests part of a Markdown summary: the counts, the failed tests, the
/// flaky tests, the known issues. A run's summary and a merge's share it.
pub(crate) fn tests_markdown(
    out: &mut String,
    s: &Summary,
    failures: &[FailedTest],
    policy: Option<FlakyPolicy>,
) {
    let _ = writeln!(out, "\n## Tests\n");
    let _ = writeln!(
        out,
        "| passed | flaky | failed | skipped | expected failures | unexpected passes |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} |",
        s.passed,
        s.flaky.len(),
        s.failed,
        s.skipped,
        s.expected_failures,
        s.unexpected_passes
    );
    if let Some(exclusive) = s.exclusive_line() {
        let _ = writeln!(out, "\n{}", md_cell(&exclusive));
    }
    if !s.gone_before_delete.is_empty() {
        let _ = writeln!(out, "\n{}", md_cell(&gone_before_delete_line(s)));
    }
    if !failures.is_empty() {
        let _ = writeln!(out, "\nFailed:\n");
        if let Some(line) = categories_line(failures) {
            let _ = writeln!(out, "{}\n", md_cell(&line));
        }
        for f in by_category(failures).into_iter().take(MAX_FAILURES) {
            let _ = writeln!(out, "- `{}` ({}): {}", f.name, f.category, md_cell(&f.why));
        }
        if failures.len() > MAX_FAILURES {
            let _ = writeln!(
                out,
                "- ... and {} more (see junit.xml)",
                failures.len() - MAX_FAILURES
            );
        }
    }
    if let Some(line) = flaky_verdict(s, policy) {
        let _ = writeln!(out, "\n## Flaky\n\n{}\n", md_cell(&line));
        for flaky in &s.flaky {
            let _ = writeln!(out, "- `{}`: {}", flaky.test, flaky.describe());
        }
    }
    if !s.known_issues.is_empty() {
        let _ = writeln!(out, "\n## Known issues\n");
        let _ = writeln!(out, "| id | title | state |");
        let _ = writeln!(out, "| --- | --- | --- |");
        for issue in &s.known_issues {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                issue.id,
                md_cell(issue.title.as_deref().unwrap_or("")),
                issue.state.describe()
            );
        }
    }
}

/// `gone before delete: …`: the tests whose cleanup found a resource already
/// gone, so that a resource someone else deleted is not taken for one the
/// test's cleanup deleted and verified.
fn gone_before_delete_line(s: &Summary) -> String {
    let n = s.gone_before_delete.len();
    format!(
        "gone before delete: {n} test{} found resources already gone when cleanup came to delete them (something else deleted them; their cleanup verified nothing): {}",
        if n == 1 { "" } else { "s" },
        s.gone_before_delete.join(", ")
    )
}

/// On GitHub Actions, the job's page shows what is appended to the file
/// `GITHUB_STEP_SUMMARY` names; elsewhere it is unset and this does nothing.
pub(crate) fn to_github_step_summary(markdown: &str) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return;
    };
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{markdown}\n").as_bytes()));
    if let Err(e) = appended {
        eprintln!(
            "testkit-runner: failed to append the summary to GITHUB_STEP_SUMMARY ({}): {e}",
            Path::new(&path).display()
        );
    }
}

/// The last lines of a run or merge: where a person looks next, so that a
/// CI log ends with it.
pub(crate) fn print_where_to_look(results_dir: &Path, report: Option<&Path>) {
    let junit = results_dir.join("junit.xml");
    if junit.is_file() {
        println!("junit: {}", junit.display());
    }
    if let Some(report) = report {
        println!("report: {}", report.display());
    }
}
