//! Checks of records and JUnit files against a fixture's expected outcomes.

use std::collections::BTreeMap;
use std::path::Path;

use testkit_engine::report::{read_records, TestRecord};

use crate::fixture::Expected;

/// The fixture's secret; it must appear in no file of a results folder.
pub const SECRET: &str = "tok-fixture-5e3d9a1c";

fn snake<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Records of `binaries`, keyed by name, each one matching `expected`.
pub fn check_records(
    results: &Path,
    run_id: &str,
    expected: &Expected,
    binaries: &[&str],
) -> BTreeMap<String, TestRecord> {
    let records: BTreeMap<String, TestRecord> = read_records(results)
        .unwrap()
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for binary in binaries {
        for want in expected.of_binary(binary) {
            names.push(&want.name);
            let got = records.get(&want.name).unwrap_or_else(|| {
                panic!(
                    "no record for {} in {}; records: {:?}",
                    want.name,
                    results.display(),
                    records.keys()
                )
            });
            let context = format!("{}: {got:#?}", want.name);
            assert_eq!(
                got.schema,
                testkit_engine::report::RECORD_SCHEMA_VERSION,
                "{context}"
            );
            assert_eq!(got.binary, want.binary, "{context}");
            assert_eq!(got.run_id, run_id, "{context}");
            assert_eq!(snake(&got.outcome), want.outcome, "{context}");
            assert_eq!(
                got.failure_kind.as_ref().map(snake),
                want.failure_kind,
                "{context}"
            );
            assert_eq!(got.known_issue, want.known_issue, "{context}");
            assert!(!got.description.is_empty(), "{context}");
            if let Some(text) = &want.message {
                let shown = got
                    .message
                    .as_deref()
                    .or(got.skip_reason.as_deref())
                    .unwrap_or_default();
                assert!(
                    shown.contains(text.as_str()),
                    "{context}\nexpected the message to contain {text:?}"
                );
            }
            if want.outcome == "skipped" {
                assert!(got.skip_reason.is_some(), "{context}");
            }
        }
    }
    let unexpected: Vec<&String> = records
        .keys()
        .filter(|n| !names.contains(&n.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "records without an expected outcome: {unexpected:?}"
    );
    records
}

/// What two runs must agree on: everything but timing and the run id.
/// `text` with every `for 1.2s` of a hang report made `for …s`.
fn without_seconds(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("for ") {
        let (before, after) = rest.split_at(at + 4);
        out.push_str(before);
        let digits = after
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        if digits > 0 && after[digits..].starts_with('s') {
            out.push('…');
            rest = &after[digits..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

pub fn comparable(record: &TestRecord) -> String {
    let mut value = serde_json::to_value(record).unwrap();
    let object = value.as_object_mut().unwrap();
    for volatile in ["run_id", "started_at_ms", "duration_ms"] {
        object.remove(volatile);
    }
    // A kept trace is under the run's own results folder: that it was kept
    // is what compares.
    if let Some(trace) = object.get_mut("trace") {
        *trace = "kept".into();
    }
    // So is a written history.
    if let Some(history) = object.get_mut("history") {
        *history = "written".into();
    }
    // A history check's drawing places and times each operation as it ran:
    // what compares is the verdict and the explanation after it.
    if let Some(message) = object.get_mut("message") {
        if let Some(text) = message.as_str() {
            if let (Some(start), Some(end)) = (
                text.find("have no legal order:"),
                text.find("\n\nthe longest legal order"),
            ) {
                let kept = format!("{}{}", &text[..start], &text[end..]);
                *message = kept.into();
            }
        }
    }
    // A hang report says how long each thing was pending: timing.
    if let Some(message) = object.get_mut("message") {
        if let Some(text) = message.as_str() {
            *message = without_seconds(text).into();
        }
    }
    // Of the pod lock, the mode; when and how long are timing.
    if let Some(lock) = object.get_mut("lock").and_then(|l| l.as_object_mut()) {
        lock.retain(|key, _| key == "mode");
    }
    // Log lines start with the time since the test started.
    let output = record
        .output
        .lines()
        .map(|l| l.split_once("s] ").map_or(l, |(_, rest)| rest))
        .collect::<Vec<_>>();
    object.insert("output".into(), output.join("\n").into());
    serde_json::to_string_pretty(&value).unwrap()
}

/// No file under `dir` holds the fixture's secret.
pub fn assert_no_secret(dir: &Path) {
    for entry in walk(dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        assert!(
            !text.contains(SECRET),
            "{} holds the secret:\n{text}",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Checks a JUnit file against the records it was built from: counts add up,
/// every testcase carries its outcome's element, message, type and
/// properties.
pub fn check_junit(path: &Path, records: &BTreeMap<String, TestRecord>, binaries: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        !text.contains(SECRET),
        "{} holds the secret",
        path.display()
    );
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}\n{text}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let count = |node: roxmltree::Node, attr: &str| -> usize {
        node.attribute(attr)
            .unwrap_or_else(|| panic!("no {attr} on {node:?}"))
            .parse()
            .unwrap()
    };
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    let suite_names: Vec<&str> = suites
        .iter()
        .map(|s| s.attribute("name").unwrap())
        .collect();
    assert_eq!(suite_names, binaries, "{}", path.display());
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    let mut seen = 0;
    for suite in &suites {
        let binary = suite.attribute("name").unwrap();
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let has = |case: &roxmltree::Node, tag: &str| case.children().any(|c| c.has_tag_name(tag));
        assert_eq!(count(*suite, "tests"), cases.len());
        assert_eq!(
            count(*suite, "failures"),
            cases.iter().filter(|c| has(c, "failure")).count()
        );
        assert_eq!(
            count(*suite, "skipped"),
            cases.iter().filter(|c| has(c, "skipped")).count()
        );
        assert_eq!(count(*suite, "errors"), 0);
        tests += count(*suite, "tests");
        failures += count(*suite, "failures");
        skipped += count(*suite, "skipped");
        let suite_props = properties(*suite);
        assert!(
            suite_props.contains_key("run_id"),
            "{binary}: {suite_props:?}"
        );
        for case in cases {
            seen += 1;
            let name = case.attribute("name").unwrap();
            let record = &records[name];
            let context = format!("{}: testcase {name}", path.display());
            assert_eq!(case.attribute("classname"), Some(binary), "{context}");
            let time: f64 = case.attribute("time").unwrap().parse().unwrap();
            assert!(
                (time - record.duration_ms as f64 / 1000.0).abs() < 0.002,
                "{context}: time {time}"
            );
            let props = properties(case);
            assert_eq!(props.get("run_id"), Some(&record.run_id), "{context}");
            assert_eq!(
                props.get("outcome"),
                Some(&snake(&record.outcome)),
                "{context}"
            );
            assert_eq!(
                props.get("description"),
                Some(&record.description),
                "{context}"
            );
            assert_eq!(
                props.get("known_issue"),
                record.known_issue.as_ref(),
                "{context}"
            );
            assert_eq!(
                props.get("cleanup"),
                Some(&snake(&record.cleanup)),
                "{context}"
            );
            assert_eq!(
                props.get("resources").map(String::as_str),
                Some("none"),
                "{context}"
            );
            let child = |tag: &str| case.children().find(|c| c.has_tag_name(tag));
            let first_line = |s: &str| s.lines().next().unwrap_or("").to_owned();
            match snake(&record.outcome).as_str() {
                "passed" => assert!(
                    child("failure").is_none() && child("skipped").is_none(),
                    "{context}"
                ),
                "failed" | "unexpected_pass" => {
                    let failure =
                        child("failure").unwrap_or_else(|| panic!("{context}: no <failure>"));
                    let message = record.message.as_deref().unwrap();
                    assert_eq!(
                        failure.attribute("message"),
                        Some(first_line(message).as_str()),
                        "{context}"
                    );
                    assert_eq!(
                        failure.attribute("type"),
                        record.failure_kind.as_ref().map(snake).as_deref(),
                        "{context}"
                    );
                    assert_eq!(failure.text(), Some(message), "{context}");
                }
                "skipped" => {
                    let skip =
                        child("skipped").unwrap_or_else(|| panic!("{context}: no <skipped>"));
                    assert_eq!(
                        skip.attribute("message"),
                        record.skip_reason.as_deref(),
                        "{context}"
                    );
                    assert_eq!(skip.attribute("type"), None, "{context}");
                }
                "expected_failure" => {
                    let skip =
                        child("skipped").unwrap_or_else(|| panic!("{context}: no <skipped>"));
                    assert_eq!(skip.attribute("type"), Some("xfail"), "{context}");
                    let id = record.known_issue.as_deref().unwrap();
                    let want = format!(
                        "known issue {id}: {}",
                        first_line(record.message.as_deref().unwrap())
                    );
                    assert_eq!(skip.attribute("message"), Some(want.as_str()), "{context}");
                }
                other => panic!("{context}: unknown outcome {other}"),
            }
            let out = child("system-out").and_then(|n| n.text()).unwrap_or("");
            // The log, then the kept trace (a failed test keeps it by
            // default) as an attachment.
            let mut want = record.output.clone();
            if let Some(trace) = &record.trace {
                if !want.is_empty() && !want.ends_with('\n') {
                    want.push('\n');
                }
                want.push_str(&format!("[[ATTACHMENT|{trace}]]\n"));
            }
            assert_eq!(out, want, "{context}");
        }
    }
    assert_eq!(
        seen,
        records
            .values()
            .filter(|r| binaries.contains(&r.binary.as_str()))
            .count(),
        "{}",
        path.display()
    );
    assert_eq!(
        (
            count(root, "tests"),
            count(root, "failures"),
            count(root, "skipped")
        ),
        (tests, failures, skipped)
    );
    assert_eq!(count(root, "errors"), 0);
}

fn properties(node: roxmltree::Node) -> BTreeMap<String, String> {
    node.children()
        .filter(|n| n.has_tag_name("properties"))
        .flat_map(|p| p.children().filter(|n| n.has_tag_name("property")))
        .map(|p| {
            (
                p.attribute("name").unwrap().to_owned(),
                p.attribute("value").unwrap().to_owned(),
            )
        })
        .collect()
}

/// The pinned junitparser, the JUnit reader of Python's CI tools.
const JUNITPARSER: &str = "junitparser==3.2.0";

/// A Python with [`JUNITPARSER`] (see [`test_support::python_with`]).
fn junitparser_python() -> std::path::PathBuf {
    test_support::python_with("junitparser-venv", JUNITPARSER, "junitparser")
}

/// Reads the file with Python's junitparser, and checks its counts.
pub fn check_with_junitparser(path: &Path, tests: usize, failures: usize, skipped: usize) {
    let python = junitparser_python();
    let script = "import sys, junitparser\n\
        x = junitparser.JUnitXml.fromfile(sys.argv[1])\n\
        t = f = s = 0\n\
        for suite in x:\n\
        \x20   for case in suite:\n\
        \x20       t += 1\n\
        \x20       kinds = [type(r).__name__ for r in case.result]\n\
        \x20       f += 'Failure' in kinds\n\
        \x20       s += 'Skipped' in kinds\n\
        print(t, f, s, x.tests, x.failures, x.skipped)\n";
    let out = std::process::Command::new(&python)
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "junitparser failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = format!("{tests} {failures} {skipped} {tests} {failures} {skipped}");
    assert_eq!(
        stdout.trim(),
        want,
        "junitparser's counts of {}",
        path.display()
    );
}
