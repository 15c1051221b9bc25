//! The harness's own proof: fixture suites (real Cargo workspaces under
//! `tests/fixtures`, each with an `expected.toml`) run under `cargo test`
//! and `cargo nextest run`; the same per-test outcomes, records and JUnit
//! come out of both, with the right exit codes; libtest's flags work on the
//! built test binaries.

#[path = "harness/checks.rs"]
mod checks;
#[path = "harness/config.rs"]
mod config;
#[path = "harness/exclusive.rs"]
mod exclusive;
#[path = "harness/fixture.rs"]
mod fixture;
#[path = "harness/listing.rs"]
mod listing;

use std::collections::BTreeMap;
use std::path::Path;

use checks::{assert_no_secret, check_junit, check_records, check_with_junitparser, comparable};
use fixture::{fixture, nextest_available, results_dir};
use testkit_engine::report::{
    check_known_issues, read_records, KnownIssueState, KnownIssues, Summary,
};
use testkit_runner::junit::{junit_from_records, merge_results, write_junit, write_results_junit};

/// The record lines in a results folder, whoever wrote them.
fn record_lines(results: &Path) -> usize {
    let mut lines = 0;
    for binary in std::fs::read_dir(results.join("records")).unwrap() {
        for file in std::fs::read_dir(binary.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                lines += std::fs::read_to_string(&path).unwrap().lines().count();
            }
        }
    }
    lines
}

const BINARIES: &[&str] = &["basic", "green"];

fn require_nextest() {
    assert!(
        nextest_available(),
        "cargo-nextest is required by these tests: install it with `cargo install cargo-nextest --locked`"
    );
}

/// Runs every binary of the basic fixture under `cargo test`, checks the exit
/// codes, and returns the results folder.
fn run_cargo_test(tag: &str) -> (tempfile::TempDir, String) {
    let fx = fixture("basic");
    let (results, run_id) = results_dir(tag);
    for binary in BINARIES {
        let out = fx.run_cargo(&["test", "--test", binary], results.path(), &run_id);
        let want = fx.expected.binaries[*binary].cargo_test_exit;
        assert_eq!(
            out.code,
            want,
            "cargo test --test {binary}: {}",
            out.describe()
        );
    }
    (results, run_id)
}

fn run_nextest(tag: &str, extra: &[&str]) -> (tempfile::TempDir, String, fixture::Output) {
    let fx = fixture("basic");
    let (results, run_id) = results_dir(tag);
    let mut args = vec!["nextest", "run", "--no-fail-fast"];
    args.extend_from_slice(extra);
    let out = fx.run_cargo(&args, results.path(), &run_id);
    (results, run_id, out)
}

#[test]
fn cargo_test_gives_the_expected_outcomes_records_and_junit() {
    let fx = fixture("basic");
    let (results, run_id) = run_cargo_test("cargotest");
    let records = check_records(results.path(), &run_id, &fx.expected, BINARIES);
    check_histories(&records);
    // A test that timed out says what it was waiting on: its hang report.
    let hung = records["basic::times_out"].message.as_deref().unwrap();
    assert!(
        hung.contains("when its time ran out it had been in its body for ")
            && hung.contains(", in step `wait for the flag` for ")
            && hung.contains("\n    waiting for the flag to be set for ")
            && hung.contains("; last saw: flag=unset"),
        "{hung}"
    );
    // No test process builds JUnit, not even a binary's one process under
    // `cargo test`: it is built on demand, as `testkit-runner report` does.
    assert!(
        !results.path().join("junit").exists(),
        "a test process built its binary's JUnit"
    );
    let run_junit = results.path().join("junit.xml");
    assert!(
        !run_junit.exists(),
        "a test process built the run's junit.xml"
    );
    let built = write_results_junit(results.path(), None).unwrap();
    assert_eq!(built.records.len(), records.len());
    for binary in BINARIES {
        check_junit(
            &results.path().join(format!("junit/{binary}.xml")),
            &records,
            &[binary],
        );
    }
    check_junit(&run_junit, &records, BINARIES);
    check_with_junitparser(&run_junit, 17, 8, 6);
    assert_no_secret(results.path());

    let known = KnownIssues::load(&fx.dir).unwrap();
    let all: Vec<_> = records.values().cloned().collect();
    let summary = Summary::from_records(&all, Some(&known));
    assert_eq!(
        (
            summary.passed,
            summary.failed,
            summary.skipped,
            summary.expected_failures,
            summary.unexpected_passes
        ),
        (3, 7, 4, 2, 1),
        "{summary}"
    );
    assert!(!summary.is_green());
    let states: BTreeMap<&str, KnownIssueState> = summary
        .known_issues
        .iter()
        .map(|k| (k.id.as_str(), k.state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("FIX-1", KnownIssueState::FailingAsDocumented),
            ("FIX-2", KnownIssueState::FailingDifferently),
            ("FIX-3", KnownIssueState::Fixed),
            ("FIX-404", KnownIssueState::Unlisted),
            ("FIX-STALE", KnownIssueState::NotPinned),
        ])
    );
    let text = summary.to_string();
    assert!(
        text.contains("FIX-404: not checked: KNOWN-ISSUES.md does not list it, or cannot be read"),
        "{text}"
    );
    assert!(
        text.contains("FIX-3 (deletes are refused): appears fixed: remove the marker"),
        "{text}"
    );
}

/// A test that recorded a history has its `history.json` beside its trace,
/// named in its record; a failed check's message draws the conflict.
fn check_histories(records: &BTreeMap<String, testkit_engine::report::TestRecord>) {
    use testkit_engine::history::{HistorySnapshot, Outcome};
    for (name, ops) in [
        ("basic::history_linearizable", 60),
        ("basic::history_not_linearizable", 3),
    ] {
        let record = &records[name];
        let path = record.history.as_deref().expect("a history in the record");
        let history = HistorySnapshot::read(Path::new(path)).unwrap();
        assert_eq!(history.test, name);
        assert_eq!(history.ops.len(), ops, "{path}");
        assert!(history.ops.iter().all(|o| o.outcome == Outcome::Ok));
    }
    let message = records["basic::history_not_linearizable"]
        .message
        .as_deref()
        .unwrap();
    assert!(message.contains("client 3  "), "{message}");
    assert!(message.contains("read x → 1  ok"), "{message}");
    assert!(message.contains("← conflict"), "{message}");
    assert!(records["basic::passes"].history.is_none());
}

#[test]
fn nextest_gives_the_same_records_as_cargo_test() {
    require_nextest();
    let fx = fixture("basic");
    let (cargo_results, _) = run_cargo_test("same");
    let (results, run_id, out) = run_nextest("nextest", &[]);
    assert_eq!(
        out.code,
        fx.expected.binaries["basic"].nextest_exit,
        "cargo nextest run: {}",
        out.describe()
    );
    let records = check_records(results.path(), &run_id, &fx.expected, BINARIES);
    // One record per test, each written once: every process wrote its own
    // test's, and one process per binary the ignored tests'.
    assert_eq!(record_lines(results.path()), records.len());
    // Test processes build no JUnit (that would grow with the run): it is
    // built once, at the end, as `testkit-runner report` does.
    assert!(!results.path().join("junit").exists());
    assert!(!results.path().join("junit.xml").exists());
    write_results_junit(results.path(), None).unwrap();
    for binary in BINARIES {
        check_junit(
            &results.path().join(format!("junit/{binary}.xml")),
            &records,
            &[binary],
        );
    }
    check_junit(&results.path().join("junit.xml"), &records, BINARIES);
    assert_no_secret(results.path());

    let under_cargo = read_records(cargo_results.path()).unwrap();
    assert_eq!(under_cargo.len(), records.len());
    for theirs in &under_cargo {
        assert_eq!(
            comparable(theirs),
            comparable(&records[&theirs.name]),
            "{} differs between runners",
            theirs.name
        );
    }

    // A green binary exits 0 under nextest too.
    let (_green, _, out) = run_nextest("nextgreen", &["--test", "green"]);
    assert_eq!(
        out.code,
        fx.expected.binaries["green"].nextest_exit,
        "{}",
        out.describe()
    );
}

#[test]
fn shards_merge_into_one_junit() {
    require_nextest();
    let fx = fixture("basic");
    let (one, run_one, _) = run_nextest("shardone", &["--partition", "count:1/2"]);
    let (two, run_two, _) = run_nextest("shardtwo", &["--partition", "count:2/2"]);
    let (a, b) = (
        read_records(one.path()).unwrap(),
        read_records(two.path()).unwrap(),
    );
    assert!(!a.is_empty() && !b.is_empty(), "each shard ran some tests");
    assert!(a.iter().all(|r| r.run_id == run_one) && b.iter().all(|r| r.run_id == run_two));

    let merged = merge_results("merged", &[one.path(), two.path()]).unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("junit.xml");
    write_junit(&merged, &path).unwrap();
    // Ignored tests are recorded by every shard: merged, they count once.
    // On a tie (ignored tests never start) the first input wins, as in the merge.
    let mut records = BTreeMap::new();
    for record in a.into_iter().chain(b) {
        records.entry(record.name.clone()).or_insert(record);
    }
    assert_eq!(records.len(), fx.expected.tests.len());
    check_junit(&path, &records, BINARIES);
    check_with_junitparser(&path, 17, 8, 6);

    // A JUnit file (here the merge's own output, as a stand-in for a shard
    // that left only JUnit) adds the tests no record covers, and nothing twice.
    let only_one = merge_results("partial", &[one.path(), &path]).unwrap();
    assert_eq!(only_one.tests, 17);
    assert_eq!((only_one.failures, only_one.skipped), (8, 6));
}

#[test]
fn junit_from_records_round_trips_through_quick_junit() {
    let (results, _) = run_cargo_test("roundtrip");
    let records = read_records(results.path()).unwrap();
    let report = junit_from_records("rt", &records);
    let xml = report.to_string().unwrap();
    let back = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let outcomes: Vec<_> = records.iter().map(|r| (&r.name, r.outcome)).collect();
    assert_eq!(
        (back.tests, back.failures, back.skipped, back.errors),
        (17, 8, 6, 0),
        "{outcomes:?}\n{xml}"
    );
    assert_eq!(back.test_suites.len(), 2);
}

#[test]
fn check_command_reports_stale_and_unlisted_known_issues() {
    let fx = fixture("basic");
    let check = check_known_issues(&fx.dir).unwrap();
    let stale: Vec<&str> = check.stale.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(stale, ["FIX-STALE"]);
    assert_eq!(check.unlisted.keys().collect::<Vec<_>>(), ["FIX-404"]);
    assert_eq!(
        check.unlisted["FIX-404"][0].file,
        fx.dir.join("tests/basic.rs")
    );
    assert!(!check.ok());
    let text = check.to_string();
    assert!(
        text.contains("FIX-STALE (a bug no test pins) is pinned by no test"),
        "{text}"
    );
    assert!(
        text.contains("tests/basic.rs:") && text.contains("add `## FIX-404: <title>`"),
        "{text}"
    );
    assert!(Path::new(&check.path).ends_with("KNOWN-ISSUES.md"));
}

/// Starts sandboxd (built from this checkout) on `home` with `faults`;
/// stopped with its process group when dropped.
fn start_sandboxd(home: &Path, faults: &[&str]) -> test_support::Sandboxd {
    let args: Vec<&str> = faults.iter().flat_map(|f| ["--fault", f]).collect();
    test_support::Sandboxd::start_in(home, &args)
}

#[test]
fn known_issue_against_sandboxd_drop_exec_env() {
    require_nextest();
    let fx = fixture("known-issues");
    for (faults, cargo_exit, nextest_exit, outcome) in [
        (
            &["drop-exec-env"][..],
            0,
            0,
            testkit_engine::report::Outcome::ExpectedFailure,
        ),
        (
            &[][..],
            101,
            100,
            testkit_engine::report::Outcome::UnexpectedPass,
        ),
    ] {
        let home = tempfile::tempdir().unwrap();
        let pod = start_sandboxd(home.path(), faults);
        let handle = pod.handle_file();
        let token = pod.token();
        let mut outcomes = Vec::new();
        for (runner, exit) in [("test", cargo_exit), ("nextest", nextest_exit)] {
            let (results, run_id) = results_dir("sbx");
            // The run's session cache goes with the test.
            let secrets = tempfile::tempdir().unwrap();
            let args: &[&str] = if runner == "test" {
                &["test"]
            } else {
                &["nextest", "run", "--no-fail-fast"]
            };
            let mut cmd = fx.cargo(args);
            cmd.env("TESTKIT_RESULTS_DIR", results.path())
                .env("TESTKIT_RUN_ID", &run_id)
                .env("TESTKIT_SECRETS_DIR", secrets.path())
                .env("TESTKIT_POD_HANDLE", handle);
            let out = fixture::run_bounded(cmd, std::time::Duration::from_secs(20 * 60));
            assert_eq!(
                out.code,
                exit,
                "{runner} with faults {faults:?}: {}",
                out.describe()
            );
            let records = read_records(results.path()).unwrap();
            assert_eq!(records.len(), 1, "{records:?}");
            let record = &records[0];
            assert_eq!(
                record.outcome, outcome,
                "{runner} with faults {faults:?}: {record:#?}"
            );
            if outcome == testkit_engine::report::Outcome::UnexpectedPass {
                let message = record.message.as_deref().unwrap();
                assert!(
                    message.contains("SBX-1 appears fixed")
                        && message.contains("remove the marker"),
                    "{message}"
                );
            }
            let summary = Summary::from_records(&records, None);
            assert_eq!(
                summary.is_green(),
                outcome == testkit_engine::report::Outcome::ExpectedFailure
            );
            // JUnit is built once, after the run, as `testkit-runner report` does.
            write_results_junit(results.path(), None).unwrap();
            for file in [
                results.path().join("junit.xml"),
                results.path().join("records/exec_env"),
            ] {
                assert!(file.exists(), "{}", file.display());
            }
            let xml = std::fs::read_to_string(results.path().join("junit.xml")).unwrap();
            assert!(!xml.contains(token), "the token leaked into junit.xml");
            outcomes.push(comparable(record));
        }
        assert_eq!(outcomes[0], outcomes[1], "cargo test and nextest disagree");
    }
}
