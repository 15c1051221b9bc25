//! JUnit XML built from records, and merged across shards and binaries.
//!
//! [`junit_from_records`] maps records to JUnit: one `testsuite` per binary
//! (property `run_id`; and in a run that reran another's failures,
//! `rerun_of`, the run and its folder, and `rerun`, how many of those
//! tests now pass: see [`write_junit_files`]); one `testcase` per test, `name` its name,
//! `classname` its binary, `time` its duration, and properties `run_id`,
//! `outcome`, `category` (of a failure or an expected failure: `product`,
//! `infrastructure`, `known_issue` or `testkit`, see
//! [`FailureCategory`](testkit_engine::report::FailureCategory)),
//! `description`, `known_issue` (when pinned), `cleanup`,
//! `resources` (`kind/name=state`, space-separated),
//! `capabilities_missing` (when some were) and one `fault` per fault the
//! test injected into a node (`stop worker-1: undone after 1447 ms`, see
//! [`fault_line`]). The status:
//!
//! - failed, unexpected pass: `<failure>` with `message` the first line,
//!   `type` the failure kind (`cleanup` for a cleanup failure,
//!   `known_issue_fixed` for an unexpected pass), the full message as text;
//! - skipped: `<skipped>` with `message` the reason;
//! - expected failure: `<skipped type="xfail">` with `message`
//!   `known issue ID: <first line of the failure>`, the failure as text.
//!
//! A test nextest retried keeps every attempt, as Surefire and nextest
//! write them: a passing testcase carries one `<flakyFailure>` per failed
//! attempt before its pass, a failed one one `<rerunFailure>` per earlier
//! attempt (`message` the first line, `type` the failure kind, the full
//! message as text, the attempt's log in its `system-out`); such a
//! testcase has the properties `attempts` (how many) and, when it passed on
//! a retry, `flaky` = `true`.
//!
//! A failure's text ends with the test's faults, one a line, as
//! `system-out` does after the log: a fault not undone fails its test
//! (`type` `fault_not_undone`, the message naming the node), and the
//! faults that were undone beside it say what else the test did to the pod.
//!
//! The log goes to `system-out`, followed by one `[[ATTACHMENT|path]]`
//! line per screenshot and one for the kept trace (GitLab and Jenkins show
//! them). Everything is passed through
//! [`redact`] once more on the way out.
//!
//! Every file is XML 1.0 whatever a test wrote: quick-junit drops ANSI
//! escape sequences and the C0 controls XML forbids, and on the way out
//! every other character outside XML's `Char` production (U+FFFE, U+FFFF)
//! becomes U+FFFD (`xml_chars`). Text is escaped, so `]]>` is text too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{
    FlakyOrRerun, NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use testkit_engine::redact::redact;
use testkit_engine::report::{
    read_records, read_starts, write_records, AttemptRecord, FailureKind, FaultRecord, FaultState,
    Outcome, ReportError, TestRecord,
};
use testkit_engine::resource::read_journal;

use crate::runs::{choose, latest_records, Chosen, RunChoiceError};
use crate::seal::SealCheck;

/// The JUnit `type` of a skipped testcase that is an expected failure.
pub const XFAIL_TYPE: &str = "xfail";

/// Builds a JUnit report from records: one `testsuite` per binary (sorted),
/// one `testcase` per record (sorted by name). Records that share a binary
/// and a name are deduplicated first, the latest start winning.
///
/// See the [module docs](self) for the mapping.
pub fn junit_from_records(report_name: &str, records: &[TestRecord]) -> Report {
    report_from_suites(report_name, suites_from_records(records))
}

/// One `testsuite` per binary of `records`, sorted by binary; the latest
/// record of each test counts.
pub(crate) fn suites_from_records(records: &[TestRecord]) -> Vec<TestSuite> {
    let mut by_binary: BTreeMap<&str, BTreeMap<&str, &TestRecord>> = BTreeMap::new();
    for record in records {
        let slot = by_binary
            .entry(&record.binary)
            .or_default()
            .entry(&record.name)
            .or_insert(record);
        if (record.attempt, record.started_at_ms) > (slot.attempt, slot.started_at_ms) {
            *slot = record;
        }
    }
    let mut suites = Vec::with_capacity(by_binary.len());
    for (binary, tests) in by_binary {
        let mut suite = TestSuite::new(binary);
        let mut run_ids: Vec<&str> = tests.values().map(|r| r.run_id.as_str()).collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        suite.add_property(Property::new("run_id", run_ids.join(",")));
        let mut time = Duration::ZERO;
        for record in tests.values() {
            time += Duration::from_millis(record.duration_ms);
            suite.add_test_case(test_case(record));
        }
        suite.set_time(time);
        suites.push(suite);
    }
    suites
}

/// A report of `suites`, in the order given, with the total time.
pub(crate) fn report_from_suites(report_name: &str, suites: Vec<TestSuite>) -> Report {
    let mut report = Report::new(report_name);
    let mut total = Duration::ZERO;
    for suite in suites {
        total += suite.time.unwrap_or_default();
        report.add_test_suite(suite);
    }
    report.set_time(total);
    report
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn test_case(record: &TestRecord) -> TestCase {
    let message = record.message.as_deref().map(|m| redact(m).into_owned());
    let mut status = match record.outcome {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::Failed | Outcome::UnexpectedPass => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let message = message.unwrap_or_else(|| "failed".to_owned());
            status.set_message(first_line(&message));
            status.set_type(record.failure_kind.map_or("error", FailureKind::as_str));
            status.set_description(format!("{message}{}", fault_block(record)));
            status
        }
        Outcome::Skipped => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(
                redact(record.skip_reason.as_deref().unwrap_or("skipped")).into_owned(),
            );
            status
        }
        Outcome::ExpectedFailure => {
            let mut status = TestCaseStatus::skipped();
            let failure = message.unwrap_or_default();
            let id = record.known_issue.as_deref().unwrap_or("?");
            status.set_message(format!("known issue {id}: {}", first_line(&failure)));
            status.set_type(XFAIL_TYPE);
            status.set_description(failure);
            status
        }
    };
    // Skipped testcases carry no reruns: quick-junit drops them there.
    status.add_reruns(record.attempts.iter().map(rerun));
    if record.outcome.fails() {
        status.set_rerun_kind(FlakyOrRerun::Rerun);
    }
    let mut case = TestCase::new(record.name.as_str(), status);
    case.set_classname(record.binary.as_str());
    case.set_time(Duration::from_millis(record.duration_ms));
    let mut property = |name: &str, value: &str| {
        case.add_property(Property::new(name, redact(value).as_ref()));
    };
    property("run_id", &record.run_id);
    property("outcome", record.outcome.as_str());
    if let Some(category) = record.category() {
        property("category", category.as_str());
    }
    property("description", &record.description);
    if let Some(id) = &record.known_issue {
        property("known_issue", id);
    }
    property("cleanup", record.cleanup.as_str());
    if record.total_attempts() > 1 {
        property("attempts", &record.total_attempts().to_string());
    }
    if record.is_flaky() {
        property("flaky", "true");
    }
    property("resources", &resources_value(record));
    if !record.capabilities_missing.is_empty() {
        property(
            "capabilities_missing",
            &record.capabilities_missing.join(" "),
        );
    }
    for fault in &record.faults {
        property("fault", &fault_line(fault));
    }
    let out = system_out(record);
    if !out.is_empty() {
        case.set_system_out(redact(&out).as_ref());
    }
    case
}

/// The `resources` property: `kind/name=state`, space-separated, or `none`.
fn resources_value(record: &TestRecord) -> String {
    let resources: Vec<String> = record
        .resources
        .iter()
        .map(|r| format!("{}/{}={}", r.kind, r.name, r.state))
        .collect();
    if resources.is_empty() {
        "none".to_owned()
    } else {
        resources.join(" ")
    }
}

/// An earlier attempt of a test, as a `<flakyFailure>` (the test passed
/// later) or `<rerunFailure>` (it never did).
fn rerun(attempt: &AttemptRecord) -> TestRerun {
    let message = redact(attempt.message.as_deref().unwrap_or("failed")).into_owned();
    let mut rerun = TestRerun::new(NonSuccessKind::Failure);
    rerun
        .set_message(format!(
            "attempt {}: {}",
            attempt.attempt,
            first_line(&message)
        ))
        .set_type(attempt.failure_kind.map_or("error", FailureKind::as_str))
        .set_time(Duration::from_millis(attempt.duration_ms))
        .set_description(message);
    if !attempt.output.is_empty() {
        rerun.set_system_out(redact(&attempt.output).as_ref());
    }
    rerun
}

/// Whether a fault was undone, and its undo proven: only then is the pod
/// as the next test expects it.
pub(crate) fn fault_undone(fault: &FaultRecord) -> bool {
    matches!(fault.state, FaultState::Undone | FaultState::GoneBeforeUndo)
}

/// What became of a fault: `undone after 1447 ms`, `not undone: <problem>`,
/// `kept (TESTKIT_KEEP)`. Milliseconds, not a rounded duration: how long a
/// node was down is what a person compares with the test's timeouts.
pub(crate) fn fault_fate(fault: &FaultRecord) -> String {
    let problem = fault
        .problem
        .as_deref()
        .map(|p| format!(": {p}"))
        .unwrap_or_default();
    match (fault.state, fault.undone_at_ms) {
        (FaultState::Undone, Some(at)) => {
            format!(
                "undone after {} ms",
                at.saturating_sub(fault.injected_at_ms)
            )
        }
        (FaultState::Undone, None) => "undone".to_owned(),
        (FaultState::GoneBeforeUndo, _) => {
            "undone before its cleanup came (gone_before_undo): nothing of it was left to \
             undo, and the node is proven whole"
                .to_owned()
        }
        (FaultState::Kept, _) => format!("kept (TESTKIT_KEEP){problem}"),
        (FaultState::InEffect, _) => format!("still in effect, never undone{problem}"),
        _ => format!("not undone{problem}"),
    }
}

/// A fault as one line: `stop worker-1: undone after 1447 ms`; the node
/// is named when the fault's own text does not name it.
pub fn fault_line(fault: &FaultRecord) -> String {
    let on = if fault.fault.contains(&fault.node) {
        String::new()
    } else {
        format!(" (node {})", fault.node)
    };
    format!("{}{on}: {}", fault.fault, fault_fate(fault))
}

/// The test's faults, one `fault: …` line each after a blank line, for the
/// end of its failure text; empty when it injected none.
fn fault_block(record: &TestRecord) -> String {
    if record.faults.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = record
        .faults
        .iter()
        .map(|f| format!("fault: {}", fault_line(f)))
        .collect();
    format!("\n\n{}", lines.join("\n"))
}

/// The log, then one `fault: …` line per fault the test injected, then one
/// `[[ATTACHMENT|path]]` line per screenshot: the convention GitLab and
/// Jenkins show as images beside the testcase.
fn system_out(record: &TestRecord) -> String {
    let mut out = record.output.clone();
    for fault in &record.faults {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("fault: {}\n", fault_line(fault)));
    }
    // The kept trace (TESTKIT_TRACE) is attached the same way.
    for shot in record.screenshots.iter().chain(record.trace.iter()) {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[[ATTACHMENT|{shot}]]\n"));
    }
    out
}

/// Merges the results of several shards, binaries or machines into one
/// report. Each input is a results folder (its records are read) or a JUnit
/// XML file (for example nextest's own `junit.xml`).
///
/// Records are the source of truth, those of each folder's latest run (see
/// [`crate::runs`]): tests are deduplicated by binary and name, the latest
/// start winning. A testcase of a JUnit file is added only
/// when no record covers it, which is what nextest's JUnit adds: tests whose
/// process died before writing a record. A JUnit testsuite named
/// `package::binary` (nextest's naming) is matched to records of `binary`.
pub fn merge_results(
    report_name: &str,
    inputs: &[impl AsRef<Path>],
) -> Result<Report, ReportError> {
    let mut records = Vec::new();
    let mut junit_files = Vec::new();
    for input in inputs {
        let input = input.as_ref();
        if input.is_dir() {
            records.extend(latest_records(input)?);
        } else {
            let text = std::fs::read_to_string(input).map_err(|source| ReportError::Io {
                path: input.to_owned(),
                cause: source,
            })?;
            let report = Report::deserialize_from_str(&text).map_err(|e| ReportError::Junit {
                path: input.to_owned(),
                message: e.to_string(),
            })?;
            junit_files.push(report);
        }
    }
    let report = junit_from_records(report_name, &records);
    let mut suites = report.test_suites;
    for other in junit_files {
        for suite in other.test_suites {
            let binary = suite
                .name
                .rsplit("::")
                .next()
                .unwrap_or(&suite.name)
                .to_owned();
            for case in suite.test_cases {
                let covered = suites.iter().any(|s| {
                    *s.name == *binary && s.test_cases.iter().any(|c| c.name == case.name)
                });
                if covered {
                    continue;
                }
                let index = match suites.iter().position(|s| *s.name == *binary) {
                    Some(index) => index,
                    None => {
                        suites.push(TestSuite::new(binary.as_str()));
                        suites.len() - 1
                    }
                };
                let suite = &mut suites[index];
                suite.time = Some(suite.time.unwrap_or_default() + case.time.unwrap_or_default());
                suite.add_test_case(case);
            }
        }
    }
    suites.sort_by(|a, b| a.name.cmp(&b.name));
    // A fresh report recounts every suite.
    let mut merged = Report::new(report_name);
    merged.set_time(suites.iter().filter_map(|s| s.time).sum());
    merged.add_test_suites(suites);
    Ok(merged)
}

/// Whether XML 1.0 allows `c` anywhere in a document: its `Char`
/// production, `#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
/// [#x10000-#x10FFFF]` (a Rust `char` is never a surrogate).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// `xml` with every character XML 1.0 forbids replaced by U+FFFD: what
/// quick-junit lets through (it drops ANSI escapes and most C0 controls,
/// but not the non-characters U+FFFE and U+FFFF) would make the file one
/// that no strict parser reads. Markup is never such a character, so the
/// whole serialized document can be mended at once.
pub(crate) fn xml_chars(xml: &str) -> std::borrow::Cow<'_, str> {
    if xml.chars().all(is_xml_char) {
        return std::borrow::Cow::Borrowed(xml);
    }
    std::borrow::Cow::Owned(
        xml.chars()
            .map(|c| if is_xml_char(c) { c } else { '\u{FFFD}' })
            .collect(),
    )
}

/// Writes `report` to `path` atomically (a temporary file renamed over it),
/// creating the parent folder, every text redacted and every character
/// XML forbids replaced (`xml_chars`).
pub fn write_junit(report: &Report, path: &Path) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        path: path.to_owned(),
        cause: source,
    };
    let xml = report.to_string().map_err(|e| ReportError::Junit {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let xml = xml_chars(&xml);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("xml.tmp{}", std::process::id()));
    std::fs::write(&tmp, redact(&xml).as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// `<results>/junit/<binary>.xml`.
fn binary_junit_path(results_dir: &Path, binary: &str) -> PathBuf {
    results_dir.join("junit").join(format!("{binary}.xml"))
}

/// Writes the JUnit files of a results folder from `records`: one per
/// binary (`junit/<binary>.xml`) and `junit.xml` with every binary, named
/// `report_name`. Each testsuite is built once and serves both files. The
/// file of a binary `records` do not have (another run's, in a folder
/// reused) is removed: every JUnit file of the folder is of one run.
pub fn write_junit_files(
    results_dir: &Path,
    report_name: &str,
    records: &[TestRecord],
) -> Result<(), ReportError> {
    let mut suites = suites_from_records(records);
    // A rerun says in every file which run it reran, and how those tests
    // came out.
    if let Some(rerun) = crate::rerun::Rerun::read(results_dir, report_name) {
        for suite in &mut suites {
            suite.add_property(Property::new("rerun_of", rerun.source()));
            suite.add_property(Property::new("rerun", rerun.line(records)));
        }
    }
    let mut written = std::collections::BTreeSet::new();
    for suite in &suites {
        let path = binary_junit_path(results_dir, &suite.name);
        write_junit(&report_from_suites(&suite.name, vec![suite.clone()]), &path)?;
        written.insert(path);
    }
    let stale = std::fs::read_dir(results_dir.join("junit"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "xml") && !written.contains(p));
    for path in stale {
        std::fs::remove_file(&path).map_err(|source| ReportError::Io {
            path,
            cause: source,
        })?;
    }
    write_junit(
        &report_from_suites(report_name, suites),
        &results_dir.join("junit.xml"),
    )
}

/// Builds the JUnit files of a results folder left by a plain `cargo test`
/// or `cargo nextest run` (what `testkit-runner report` does) for one run:
/// `run` (`None`: the latest, see the `runs` module), and returns it with its
/// records. `junit.xml` is named after the run. A test of the run whose
/// process was killed before it wrote its record gets one from its journal
/// (the `killed` module), kept beside the others. A run without records is
/// left as it is.
pub fn write_results_junit(
    results_dir: &Path,
    run: Option<&str>,
) -> Result<Chosen, RunChoiceError> {
    let journal = read_journal(results_dir);
    let starts = read_starts(results_dir)?;
    let mut chosen = choose(
        results_dir,
        read_records(results_dir)?,
        &journal,
        &starts,
        run,
    )?;
    // A sealed folder is read, never written: a record added to it is
    // tampering.
    let sealed = crate::seal::check(results_dir, &chosen.run_id) != SealCheck::Unsealed;
    if !sealed {
        let killed = crate::killed::from_journal(results_dir, &chosen.records, &chosen.run_id)?;
        if !killed.is_empty() {
            write_records(results_dir, &killed)?;
            // Read again: what counts only for a run that has records (the
            // listing of its ignored tests) counts now.
            chosen.records = read_records(results_dir)?
                .into_iter()
                .filter(|r| r.run_id == chosen.run_id)
                .collect();
        }
    }
    chosen.seal = crate::runs::complete(results_dir, &chosen.run_id, &mut chosen.records, true)?;
    if chosen.records.is_empty() {
        // Not a results folder, or one whose tests never ran: no JUnit
        // that would pass for an empty, green run.
        return Ok(chosen);
    }
    write_junit_files(results_dir, &chosen.run_id, &chosen.records)?;
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text no XML reader accepts, in every field a record gives JUnit: the
    /// files written are still XML that a strict parser reads, and they say
    /// what the record says around what was mended.
    #[test]
    fn every_text_field_is_written_as_xml_a_strict_parser_reads() {
        let nasty = "a\u{FFFE}b\u{FFFF}c\u{0}d\u{1b}[31me\u{7}f]]>g\u{FFFD}";
        // The parser relied on refuses what the fix mends.
        assert!(roxmltree::Document::parse("<a>\u{FFFE}</a>").is_err());
        assert!(roxmltree::Document::parse("<a>\u{FFFF}</a>").is_err());
        assert!(roxmltree::Document::parse("<a b=\"\u{FFFE}\"/>").is_err());
        let mut failed = TestRecord::new("run1", "bin", "bin::fails");
        failed.description = format!("doc {nasty}");
        failed.fail(
            FailureKind::Error,
            format!("message {nasty}\nline 2 {nasty}"),
        );
        failed.output = format!("log {nasty}\n");
        let mut fault = testkit_engine::report::FaultRecord::injected(
            &format!("node {nasty}"),
            format!("fault {nasty}"),
        );
        fault.problem = Some(format!("problem {nasty}"));
        failed.faults.push(fault);
        let mut xfail = TestRecord::new("run1", "bin", "bin::pinned");
        xfail.outcome = Outcome::ExpectedFailure;
        xfail.known_issue = Some(format!("FIX-1{nasty}"));
        xfail.message = Some(format!("known {nasty}"));
        let mut skipped = TestRecord::new("run1", "bin", "bin::skipped");
        skipped.outcome = Outcome::Skipped;
        skipped.skip_reason = Some(format!("reason {nasty}"));
        let flaky = testkit_engine::report::fold_attempts(vec![
            {
                let mut r = TestRecord::new("run1", "bin", "bin::flaky");
                r.attempt = 1;
                r.started_at_ms = 1;
                r.fail(FailureKind::Timeout, format!("attempt {nasty}"));
                r.output = format!("attempt log {nasty}");
                r
            },
            {
                let mut r = TestRecord::new("run1", "bin", "bin::flaky");
                r.attempt = 2;
                r.started_at_ms = 2;
                r
            },
        ]);
        let mut records = vec![failed, xfail, skipped];
        records.extend(flaky);
        let dir = tempfile::tempdir().unwrap();
        write_junit_files(dir.path(), &format!("report {nasty}"), &records).unwrap();
        for file in ["junit.xml", "junit/bin.xml"] {
            let xml = std::fs::read_to_string(dir.path().join(file)).unwrap();
            let doc = roxmltree::Document::parse(&xml)
                .unwrap_or_else(|e| panic!("{file} is not XML ({e}):\n{xml}"));
            let text: String = doc
                .descendants()
                .flat_map(|n| {
                    n.attributes()
                        .map(|a| a.value().to_owned())
                        .chain(n.text().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
                .collect();
            for needle in [
                "doc a",
                "message a",
                "log a",
                "known a",
                "reason a",
                "attempt a",
                "FIX-1a",
                "fault a",
                "problem a",
            ] {
                assert!(text.contains(needle), "{file}: no {needle:?} in {text:?}");
            }
            assert!(
                text.contains("f]]>g"),
                "{file}: `]]>` is not kept as text: {xml}"
            );
            assert!(
                !xml.contains(['\u{FFFE}', '\u{FFFF}', '\u{0}', '\u{1b}', '\u{7}']),
                "{file}: {xml:?}"
            );
        }
    }

    /// nextest's own JUnit, written by the same quick-junit, holds what a
    /// test wrote; quick-junit reads a U+FFFE there, and the merged file
    /// is XML all the same.
    #[test]
    fn a_merged_junit_file_with_characters_xml_forbids_is_mended() {
        let dir = tempfile::tempdir().unwrap();
        let nextest = dir.path().join("nextest.xml");
        std::fs::write(
            &nextest,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"n\" tests=\"1\" \
             failures=\"1\" errors=\"0\"><testsuite name=\"pkg::bin\" tests=\"1\" disabled=\"0\" \
             errors=\"0\" failures=\"1\"><testcase name=\"bin::died\" classname=\"bin\">\
             <failure type=\"SIGKILL\" message=\"a\u{FFFE}b\">out \u{FFFF}</failure></testcase>\
             </testsuite></testsuites>\n",
        )
        .unwrap();
        let merged = merge_results("m", &[&nextest]).expect("quick-junit reads it");
        let out = dir.path().join("merged.xml");
        write_junit(&merged, &out).unwrap();
        let xml = std::fs::read_to_string(&out).unwrap();
        roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
        assert!(
            xml.contains("bin::died") && xml.contains("a\u{FFFD}b"),
            "{xml}"
        );
    }

    #[test]
    fn a_reused_folder_keeps_no_junit_file_of_another_run() {
        let dir = tempfile::tempdir().unwrap();
        let old = [
            TestRecord::new("old", "a", "a::t"),
            TestRecord::new("old", "b", "b::t"),
        ];
        write_junit_files(dir.path(), "old", &old).unwrap();
        assert!(dir.path().join("junit/b.xml").is_file());
        write_junit_files(dir.path(), "new", &[TestRecord::new("new", "a", "a::t")]).unwrap();
        assert!(dir.path().join("junit/a.xml").is_file());
        assert!(
            !dir.path().join("junit/b.xml").exists(),
            "the old run's JUnit of b is left beside the new run's"
        );
    }

    #[test]
    fn screenshots_follow_the_log_as_attachment_lines() {
        let mut record = TestRecord::new("run1", "ui", "ui::shows");
        record.output = "[   0.1s] opened".to_owned();
        record.browsers = 1;
        record.screenshots = vec!["/r/a/one.png".to_owned(), "/r/a/two.png".to_owned()];
        assert_eq!(
            system_out(&record),
            "[   0.1s] opened\n[[ATTACHMENT|/r/a/one.png]]\n[[ATTACHMENT|/r/a/two.png]]\n"
        );
        let xml = junit_from_records("t", &[record.clone()])
            .to_string()
            .unwrap();
        assert!(xml.contains("[[ATTACHMENT|/r/a/two.png]]"), "{xml}");
        let summary = testkit_engine::report::Summary::from_records(&[record], None);
        assert_eq!((summary.browser_tests, summary.screenshots), (1, 2));
        assert_eq!(summary.browser_teardowns_timed_out, 0);
    }

    /// A fault on `node` injected at `at`, undone `undone_after` ms later,
    /// or (`None`) not undone.
    fn fault(node: &str, what: &str, at: u64, undone_after: Option<u64>) -> FaultRecord {
        let mut f = FaultRecord::injected(node, what.to_owned());
        f.injected_at_ms = at;
        match undone_after {
            Some(d) => {
                f.undone_at_ms = Some(at + d);
                f.state = FaultState::Undone;
            }
            None => {
                f.state = FaultState::NotUndone;
                f.problem = Some("worker-2 still paused after unpause".to_owned());
            }
        }
        f
    }

    /// A test that stopped worker-1 (undone) and paused worker-2 (not
    /// undone): each fault is a `fault` property and a line of the log and
    /// of the failure's text, and the failure says, in its message, which
    /// node is left faulted.
    #[test]
    fn each_fault_is_a_property_and_a_line_and_one_not_undone_fails_naming_its_node() {
        let mut record = TestRecord::new("run1", "cluster", "faults::pause_and_stop");
        record.output = "[   0.1s] stopping worker-1".to_owned();
        record.faults = vec![
            fault("worker-1", "stop worker-1", 1_000, Some(1447)),
            fault("worker-2", "pause worker-2", 3_000, None),
            fault("gateway", "cut off worker-1", 4_000, Some(20)),
        ];
        record.fail(
            FailureKind::FaultNotUndone,
            "fault not undone: node `worker-2`: pause worker-2 (worker-2 still paused after \
             unpause)"
                .to_owned(),
        );
        let xml = junit_from_records("t", &[record]).to_string().unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
        let case = doc
            .descendants()
            .find(|n| n.has_tag_name("testcase"))
            .unwrap();
        let faults: Vec<&str> = case
            .descendants()
            .filter(|n| n.has_tag_name("property") && n.attribute("name") == Some("fault"))
            .filter_map(|n| n.attribute("value"))
            .collect();
        assert_eq!(
            faults,
            [
                "stop worker-1: undone after 1447 ms",
                "pause worker-2: not undone: worker-2 still paused after unpause",
                "cut off worker-1 (node gateway): undone after 20 ms",
            ],
            "{xml}"
        );
        let failure = case
            .children()
            .find(|n| n.has_tag_name("failure"))
            .expect(&xml);
        assert_eq!(failure.attribute("type"), Some("fault_not_undone"));
        assert!(
            failure
                .attribute("message")
                .is_some_and(|m| m.starts_with("fault not undone: node `worker-2`: pause worker-2")),
            "{xml}"
        );
        let text = failure.text().unwrap_or_default();
        assert!(
            text.ends_with(
                "\n\nfault: stop worker-1: undone after 1447 ms\n\
                 fault: pause worker-2: not undone: worker-2 still paused after unpause\n\
                 fault: cut off worker-1 (node gateway): undone after 20 ms"
            ),
            "{text:?}"
        );
        let out = case
            .children()
            .find(|n| n.has_tag_name("system-out"))
            .and_then(|n| n.text())
            .unwrap_or_default();
        assert!(
            out.starts_with(
                "[   0.1s] stopping worker-1\nfault: stop worker-1: undone after 1447 ms\n\
                 fault: pause worker-2: not undone"
            ),
            "{out:?}"
        );
    }

    fn attempt(n: u32, outcome: Outcome) -> TestRecord {
        let mut r = TestRecord::new("run1", "b", "b::t");
        r.attempt = n;
        r.started_at_ms = u64::from(n);
        if outcome == Outcome::Failed {
            r.fail(
                FailureKind::Timeout,
                format!("timed out on attempt {n}\nmore"),
            );
            r.output = format!("log {n}");
        }
        r
    }

    #[test]
    fn earlier_attempts_are_flaky_failures_of_a_pass_and_reruns_of_a_failure() {
        let flaky = testkit_engine::report::fold_attempts(vec![
            attempt(1, Outcome::Failed),
            attempt(2, Outcome::Passed),
        ]);
        let xml = junit_from_records("t", &flaky).to_string().unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let case = doc
            .descendants()
            .find(|n| n.has_tag_name("testcase"))
            .unwrap();
        assert!(!case.children().any(|n| n.has_tag_name("failure")), "{xml}");
        let run = case
            .children()
            .find(|n| n.has_tag_name("flakyFailure"))
            .expect(&xml);
        assert_eq!(
            run.attribute("message"),
            Some("attempt 1: timed out on attempt 1")
        );
        assert_eq!(run.attribute("type"), Some("timeout"));
        assert!(xml.contains("log 1"), "{xml}");
        assert!(xml.contains("name=\"flaky\" value=\"true\""), "{xml}");

        let failed = testkit_engine::report::fold_attempts(vec![
            attempt(1, Outcome::Failed),
            attempt(2, Outcome::Failed),
        ]);
        let xml = junit_from_records("t", &failed).to_string().unwrap();
        assert_eq!(xml.matches("<rerunFailure").count(), 1, "{xml}");
        assert_eq!(xml.matches("<failure").count(), 1, "{xml}");
        assert!(
            !xml.contains("flakyFailure") && !xml.contains("name=\"flaky\""),
            "{xml}"
        );
        assert!(xml.contains("name=\"attempts\" value=\"2\""), "{xml}");
    }
}
