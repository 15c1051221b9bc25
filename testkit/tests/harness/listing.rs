//! libtest's and nextest's flags on a built fixture test binary.

use crate::fixture::{fixture, results_dir, Output};

const ALL: &[&str] = &[
    "basic::history_linearizable",
    "basic::history_not_linearizable",
    "basic::ignored_with_reason",
    "basic::known_issue_as_documented",
    "basic::known_issue_mismatch",
    "basic::known_issue_passes",
    "basic::known_issue_unlisted",
    "basic::leaks_a_secret",
    "basic::panics",
    "basic::passes",
    "basic::returns_error",
    "basic::skips_at_runtime",
    "basic::times_out",
];

fn run(args: &[&str]) -> (Output, tempfile::TempDir) {
    let (results, run_id) = results_dir("listing");
    let out = fixture("basic").run_binary("basic", args, results.path(), &run_id);
    (out, results)
}

fn terse_names(out: &Output) -> Vec<&str> {
    out.stdout
        .lines()
        .map(|line| {
            line.strip_suffix(": test")
                .unwrap_or_else(|| panic!("not a `NAME: test` line: {line:?}\n{}", out.describe()))
        })
        .collect()
}

/// Test names of a run, by libtest's result word (`ok`, `FAILED`, `ignored`).
fn results_of(out: &Output) -> Vec<(String, String)> {
    let mut results: Vec<(String, String)> = out
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test "))
        .filter_map(|rest| rest.split_once(" ... "))
        .map(|(name, result)| {
            (
                name.trim().to_owned(),
                result.split_whitespace().next().unwrap_or("").to_owned(),
            )
        })
        .collect();
    results.sort();
    results
}

#[test]
fn list_shows_every_test_and_descriptions_on_stderr() {
    let (out, _r) = run(&["--list"]);
    assert_eq!(out.code, 0, "{}", out.describe());
    for name in ALL {
        assert!(
            out.stdout.lines().any(|l| l == format!("{name}: test")),
            "{name} not listed: {}",
            out.describe()
        );
    }
    assert!(
        !out.stdout.contains("Passes."),
        "descriptions never go to stdout: {}",
        out.describe()
    );
    assert!(
        out.stderr.contains("basic::passes: Passes."),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr
            .contains("basic::times_out: Waits past its timeout and is cancelled."),
        "{}",
        out.describe()
    );
}

#[test]
fn terse_lists_hold_only_name_lines() {
    let (out, _r) = run(&["--list", "--format", "terse"]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(terse_names(&out), ALL);
    assert!(
        !out.stderr.contains("Passes."),
        "no descriptions in terse output: {}",
        out.describe()
    );

    let (out, _r) = run(&["--list", "--format", "terse", "--ignored"]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(terse_names(&out), ["basic::ignored_with_reason"]);
    assert!(
        !out.stderr.contains("GPU") && !out.stderr.contains("Never runs"),
        "{}",
        out.describe()
    );
}

#[test]
fn exact_nocapture_runs_one_test_and_shows_its_log() {
    let (out, results) = run(&["--exact", "basic::returns_error", "--nocapture"]);
    assert_eq!(out.code, 101, "{}", out.describe());
    assert_eq!(
        results_of(&out),
        [("basic::returns_error".to_owned(), "FAILED".to_owned())]
    );
    assert!(
        out.stderr.contains("about to fail"),
        "the log streams under --nocapture: {}",
        out.describe()
    );
    let records = testkit_engine::report::read_records(results.path()).unwrap();
    assert_eq!(records.len(), 1, "{records:?}");

    let (out, _r) = run(&["--exact", "basic::passes"]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        results_of(&out),
        [("basic::passes".to_owned(), "ok".to_owned())]
    );
    assert!(
        !out.stderr.contains("all good"),
        "without --nocapture the log stays in the record"
    );
}

#[test]
fn ignored_and_include_ignored_run_the_ignored_test() {
    let (out, results) = run(&["--ignored"]);
    assert_eq!(out.code, 101, "{}", out.describe());
    assert_eq!(
        results_of(&out),
        [("basic::ignored_with_reason".to_owned(), "FAILED".to_owned())]
    );
    assert!(
        out.stdout.contains("an ignored test ran"),
        "{}",
        out.describe()
    );
    let records = testkit_engine::report::read_records(results.path()).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, testkit_engine::report::Outcome::Failed);

    let (out, _r) = run(&["--include-ignored", "--test-threads", "1"]);
    assert_eq!(out.code, 101, "{}", out.describe());
    let ran: Vec<String> = results_of(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(ran, ALL);
    assert!(
        results_of(&out).contains(&("basic::ignored_with_reason".to_owned(), "FAILED".to_owned()))
    );
}

#[test]
fn skip_and_filters_select_tests() {
    let (out, _r) = run(&[
        "known_issue",
        "--skip",
        "unlisted",
        "--skip",
        "mismatch",
        "--test-threads",
        "2",
    ]);
    assert_eq!(out.code, 101, "{}", out.describe());
    assert_eq!(
        results_of(&out),
        [
            (
                "basic::known_issue_as_documented".to_owned(),
                "ignored".to_owned()
            ),
            ("basic::known_issue_passes".to_owned(), "FAILED".to_owned()),
        ]
    );
    let (out, results) = run(&["passes", "--skip", "known_issue"]);
    assert_eq!(out.code, 0, "{}", out.describe());
    assert_eq!(
        results_of(&out),
        [("basic::passes".to_owned(), "ok".to_owned())]
    );
    // One record per test that the filters selected, and no JUnit: that is
    // built once, on demand, from the records.
    assert_eq!(
        testkit_engine::report::read_records(results.path())
            .unwrap()
            .len(),
        1
    );
    assert!(!results.path().join("junit").exists());
}
