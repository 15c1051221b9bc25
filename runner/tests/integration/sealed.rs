//! Truth by construction: every test that began has exactly one verdict
//! (its start is written ahead of its body), the list of what runs is made
//! with every filter, and a judged run is sealed: no later reading of its
//! folder can be greener than the runner judged it. Real runs of the
//! fixture suite against sandboxd; real SIGKILLs, real lost and rewritten
//! files.

use std::path::{Path, PathBuf};

use testkit_engine::report::{read_records, Outcome};

use crate::truth::add_test_binary;
use crate::{copy_dir, fixture, junit_counts, runner, CallerPod, Ran};

/// The binary `dies`: its test SIGKILLs its own process before it creates
/// anything.
const DIES: &str = r#"
use testkit::prelude::*;

/// Kills its own process with SIGKILL, having created nothing.
#[testkit::test]
async fn killed_at_once(_cx: &mut Cx) -> testkit::Result {
    let status = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status()?;
    bail!("kill -9 of itself returned {status}")
}

testkit::main!();
"#;

/// Builds the fixture suite's tests, before a pod whose token is good for
/// minutes only is started for them.
fn build(suite: &Path) {
    let status = crate::fixture_cargo()
        .args(["test", "--workspace", "--no-run"])
        .current_dir(suite)
        .status()
        .unwrap();
    assert!(status.success(), "the fixture suite builds");
}

/// `report DIR`'s page headline: `PASSED`, `FAILED`, …
fn headline(dir: &Path) -> String {
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let at = html.find("id=\"verdict\"").expect("the page has a verdict");
    let rest = &html[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest.find('<').unwrap();
    rest[start..end].to_owned()
}

/// A test that SIGKILLs itself before it creates anything, under a plain
/// `cargo nextest run --retries 1`: nothing of it is in the journal, and
/// yet `report DIR` counts it as failed (its starts have no end), in the
/// summary, JUnit and the page.
#[test]
fn a_sigkilled_test_that_created_nothing_is_a_failure_of_the_report() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "dies", DIES);
    build(suite.path());
    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    let status = crate::fixture_cargo()
        .args(["nextest", "run", "--workspace", "--no-fail-fast"])
        .args(["--retries", "1", "-E", "binary(dies) | binary(basics)"])
        .env("TESTKIT_RESULTS_DIR", results.path())
        .env(
            "TESTKIT_SECRETS_DIR",
            results.path().with_extension("secrets"),
        )
        .env("TESTKIT_POD_HANDLE", &pod.handle_file)
        .current_dir(suite.path())
        .status()
        .unwrap();
    assert!(
        !status.success(),
        "nextest counts the killed test as failed"
    );

    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0, "the reports were written");
    assert!(report.stdout.contains("1 failed"), "{}", report.stdout);
    let (_, failures, _) = junit_counts(&results.path().join("junit.xml"));
    assert_eq!(failures, 1);
    let records = read_records(results.path()).unwrap();
    let killed = records
        .iter()
        .find(|r| r.name == "dies::killed_at_once")
        .expect("the killed test has a record");
    assert_eq!(killed.outcome, Outcome::Failed, "{killed:#?}");
    let message = killed.message.as_deref().unwrap_or("");
    assert!(message.contains("no end written"), "{message}");
    // Both attempts began, and neither ended.
    assert_eq!(killed.attempt, 2, "{killed:#?}");
    assert_eq!(killed.attempts.len(), 1, "{killed:#?}");
    assert_eq!(headline(results.path()), "FAILED");
}

/// A failing test's record lost after a plain `cargo test` (deleted, as a
/// child or the test itself could): its start has no end, and `report DIR`
/// counts it failed, never "0 failed".
#[test]
fn a_lost_record_is_a_failure_not_a_pass() {
    let suite = fixture("suite");
    build(suite.path());
    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    let status = crate::fixture_cargo()
        .args(["test", "--test", "basics"])
        .env("TESTKIT_RESULTS_DIR", results.path())
        .env("TESTKIT_RUN_ID", "lostrecord")
        .env(
            "TESTKIT_SECRETS_DIR",
            results.path().with_extension("secrets"),
        )
        .env("TESTKIT_POD_HANDLE", &pod.handle_file)
        .env("FIXTURE_MODE", "fail")
        .current_dir(suite.path())
        .status()
        .unwrap();
    assert!(!status.success(), "cargo test saw the failure");
    // The record file that holds the failure goes.
    let records_dir = results.path().join("records/basics");
    for file in std::fs::read_dir(&records_dir).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("\"outcome\":\"failed\"") {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0);
    assert!(
        !report.stdout.contains("0 failed"),
        "a lost record read as a pass: {}",
        report.stdout
    );
    let records = read_records(results.path()).unwrap();
    let lost = records
        .iter()
        .find(|r| r.name == "basics::fails_when_asked")
        .expect("the test whose record was lost is counted");
    assert_eq!(lost.outcome, Outcome::Failed);
    assert!(
        lost.message
            .as_deref()
            .unwrap_or("")
            .contains("no end written"),
        "{lost:#?}"
    );
    assert_eq!(headline(results.path()), "FAILED");
}

/// The ways a sealed folder can change after the runner judged it, each
/// made to read greener than it was.
enum Tamper {
    DeleteFailedRecord,
    RewriteFailedRecord,
    AddPassingRecord,
    EditVerdict,
    RemoveSeal,
}

fn failed_record_file(dir: &Path) -> PathBuf {
    let records = dir.join("records/basics");
    std::fs::read_dir(&records)
        .unwrap()
        .map(|f| f.unwrap().path())
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("\"outcome\":\"failed\"")
        })
        .expect("the failed test's record file")
}

impl Tamper {
    fn apply(&self, dir: &Path) -> &'static str {
        match self {
            Tamper::DeleteFailedRecord => {
                let file = failed_record_file(dir);
                std::fs::remove_file(&file).unwrap();
                "was removed"
            }
            Tamper::RewriteFailedRecord => {
                let file = failed_record_file(dir);
                let text = std::fs::read_to_string(&file).unwrap();
                let green = text
                    .replace("\"outcome\":\"failed\"", "\"outcome\":\"passed\"")
                    .replace("\"failure_kind\":\"error\"", "\"failure_kind\":null");
                std::fs::write(&file, green).unwrap();
                "was changed"
            }
            Tamper::AddPassingRecord => {
                let file = failed_record_file(dir);
                let text = std::fs::read_to_string(&file).unwrap();
                let line = text
                    .lines()
                    .find(|l| l.contains("\"outcome\":\"failed\""))
                    .unwrap()
                    .replace("\"outcome\":\"failed\"", "\"outcome\":\"passed\"")
                    .replace("\"started_at_ms\":", "\"started_at_ms\":9");
                std::fs::write(file.with_file_name("999-1.jsonl"), format!("{line}\n")).unwrap();
                "was added"
            }
            Tamper::EditVerdict => {
                let path = dir.join("verdict.jsonl");
                let text = std::fs::read_to_string(&path).unwrap();
                let green = text
                    .replace("\"verdict\":\"fail\"", "\"verdict\":\"pass\"")
                    .replace("\"exit_code\":1", "\"exit_code\":0");
                std::fs::write(&path, green).unwrap();
                "verdict.jsonl was changed"
            }
            Tamper::RemoveSeal => {
                std::fs::remove_dir_all(dir.join("seal")).unwrap();
                "NOT SEALED"
            }
        }
    }
}

/// A run the runner judged failed is sealed; every change to its folder
/// afterwards (a record deleted, rewritten or added, the verdict edited,
/// the seal removed) is named by `report` and by `merge`, and neither, nor
/// the page, nor JUnit, reads the run greener than it was judged.
#[test]
fn results_changed_after_the_seal_are_named_and_never_read_greener() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(basics)"])
            .env("FIXTURE_MODE", "fail")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let judged = ran.results();
    let seal = judged.join(format!("seal/{}.json", ran.run_id()));
    assert!(seal.is_file(), "the run is sealed");

    // Untouched, the report says the seal holds.
    let report = Ran::from(runner().arg("report").arg(&judged).output().unwrap());
    assert!(
        report.stdout.contains("sealed: ") && report.stdout.contains("FAILED (exit 1)"),
        "{}",
        report.stdout
    );
    assert!(!report.stdout.contains("TAMPERED"), "{}", report.stdout);

    for tamper in [
        Tamper::DeleteFailedRecord,
        Tamper::RewriteFailedRecord,
        Tamper::AddPassingRecord,
        Tamper::EditVerdict,
        Tamper::RemoveSeal,
    ] {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(&judged, copy.path());
        let named = tamper.apply(copy.path());
        let report = Ran::from(runner().arg("report").arg(copy.path()).output().unwrap());
        assert_eq!(report.code, 0, "{}", report.stderr);
        assert!(
            report.stdout.contains(named),
            "the change is named ({named}): {}",
            report.stdout
        );
        assert!(
            report.stdout.contains("TAMPERED") || report.stdout.contains("NOT SEALED"),
            "{}",
            report.stdout
        );
        assert!(!report.stdout.contains(" 0 failed"), "{}", report.stdout);
        let (_, failures, _) = junit_counts(&copy.path().join("junit.xml"));
        assert!(failures >= 1, "JUnit reads green after the change");
        assert_ne!(headline(copy.path()), "PASSED");

        let merged = tempfile::tempdir().unwrap();
        let merge = Ran::from(
            runner()
                .arg("merge")
                .arg(merged.path())
                .arg(copy.path())
                .output()
                .unwrap(),
        );
        assert_eq!(merge.code, 0, "{}", merge.stderr);
        assert!(!merge.stdout.contains(" 0 failed"), "{}", merge.stdout);
        let (_, failures, _) = junit_counts(&merged.path().join("junit.xml"));
        assert!(
            failures >= 1,
            "the merged JUnit reads green after the change"
        );
        assert_ne!(headline(merged.path()), "PASSED");
    }
}

/// A filter after `--` (nextest's own `-E`) selects the tests the runner
/// lists and counts: the tests it left out are not failures.
#[test]
fn a_filter_after_the_double_dash_is_counted_as_the_runners_own() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["--", "-E", "test(capabilities_answer)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "pass", "{evidence}");
    assert!(evidence.contains("1 passed, 0 failed"), "{evidence}");
    assert!(!evidence.contains("no record"), "{evidence}");
}

/// Under `--runner cargo-test`, cargo's own options after `--` (`-p PKG
/// --test NAME`) go to cargo, not to the test binaries as name filters
/// (two of which a test binary's `--list` refuses).
#[test]
fn cargo_test_options_after_the_double_dash_go_to_cargo() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args([
                "--runner",
                "cargo-test",
                "--",
                "-p",
                "runner-fixture",
                "--test",
                "basics",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let records = read_records(&ran.results()).unwrap();
    assert!(
        records.iter().all(|r| r.binary == "basics"),
        "only the basics binary ran: {:?}",
        records.iter().map(|r| &r.name).collect::<Vec<_>>()
    );
    assert!(
        records
            .iter()
            .any(|r| r.name == "basics::capabilities_answer" && r.outcome == Outcome::Passed),
        "{records:#?}"
    );
}

/// The binary `forger`: its test writes a passing record for a test that
/// does not exist, as a process outside the run's tests could.
const FORGER: &str = r#"
use testkit::prelude::*;

/// Writes a record of a test no binary has, beside its own.
#[testkit::test]
async fn writes_a_foreign_record(_cx: &mut Cx) -> testkit::Result {
    let results = std::env::var("TESTKIT_RESULTS_DIR")?;
    let run = std::env::var("TESTKIT_RUN_ID")?;
    let dir = std::path::Path::new(&results).join("records/forger");
    std::fs::create_dir_all(&dir)?;
    let line = format!(
        "{{\"schema\":1,\"run_id\":\"{run}\",\"binary\":\"forger\",\"name\":\"forger::imaginary\",\
         \"description\":\"\",\"file\":\"\",\"line\":0,\"outcome\":\"passed\",\"failure_kind\":null,\
         \"message\":null,\"skip_reason\":null,\"started_at_ms\":1,\"duration_ms\":1,\
         \"known_issue\":null,\"fails_with\":null,\"requires\":[],\"capabilities_missing\":[],\
         \"resources\":[],\"cleanup\":\"nothing\",\"output\":\"\"}}\n"
    );
    std::fs::write(dir.join("1-1.jsonl"), line)?;
    Ok(())
}

testkit::main!();
"#;

/// A record of a test the run did not list fails the tests phase, naming
/// it: the list is what the run runs, so the record came from elsewhere.
#[test]
fn a_record_of_a_test_the_run_did_not_list_fails_the_tests_phase() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "forger", FORGER);
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(forger)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(
        evidence.contains("did not list") && evidence.contains("forger::imaginary"),
        "{evidence}"
    );
}

/// `"run_id":"ID"` of `text` with the id's first character written as a
/// JSON escape (`\u00XX`): the same value to every JSON reader, and no
/// longer the text `"ID"`.
fn escape_run_id(text: &str, run_id: &str) -> String {
    let first = run_id.chars().next().unwrap();
    let escaped = format!(
        "\"run_id\":\"\\u{:04x}{}\"",
        first as u32,
        &run_id[first.len_utf8()..]
    );
    text.replace(&format!("\"run_id\":\"{run_id}\""), &escaped)
}

/// The failed test's record line, made to pass and to start later than the
/// real one (so that it is the record that counts).
fn passing_line(dir: &Path) -> String {
    let text = std::fs::read_to_string(failed_record_file(dir)).unwrap();
    text.lines()
        .find(|l| l.contains("\"outcome\":\"failed\""))
        .unwrap()
        .replace("\"outcome\":\"failed\"", "\"outcome\":\"passed\"")
        .replace("\"failure_kind\":\"error\"", "\"failure_kind\":null")
        .replace("\"started_at_ms\":", "\"started_at_ms\":9")
}

/// Changes to a sealed folder that the seal does not see.
#[derive(Debug)]
enum Forge {
    /// A passing record of the failed test, in a file whose name begins
    /// with a dot: every reader reads it, the seal skips it.
    DotFileRecord,
    /// A passing record of the failed test whose run id is JSON-escaped:
    /// every reader takes it for the run's, the seal for another run's.
    EscapedRunIdRecord,
    /// The dot file, `verdict.jsonl` rewritten to pass with its run ids
    /// escaped (the seal then skips it as another run's), and the seal's
    /// own verdict and exit code edited (no hash covers them).
    AllGreen,
    /// The failed record rewritten to pass, the seal and `verdict.jsonl`
    /// deleted: nothing says a runner judged the run.
    RemoveSealAndVerdict,
    /// One file added: the run's records, made to pass, of another run id
    /// that started later. `report DIR` reports the latest run.
    LaterFakeRun,
}

impl Forge {
    fn apply(&self, dir: &Path, run_id: &str) {
        let records = dir.join("records/basics");
        match self {
            Forge::DotFileRecord => {
                let line = passing_line(dir);
                std::fs::write(records.join(".999-1.jsonl"), format!("{line}\n")).unwrap();
            }
            Forge::EscapedRunIdRecord => {
                let line = escape_run_id(&passing_line(dir), run_id);
                std::fs::write(records.join("999-1.jsonl"), format!("{line}\n")).unwrap();
            }
            Forge::AllGreen => {
                Forge::DotFileRecord.apply(dir, run_id);
                let verdicts = dir.join("verdict.jsonl");
                let text = std::fs::read_to_string(&verdicts).unwrap();
                let green = escape_run_id(&text, run_id)
                    .replace("\"verdict\":\"fail\"", "\"verdict\":\"pass\"")
                    .replace("\"exit_code\":1", "\"exit_code\":0");
                std::fs::write(&verdicts, green).unwrap();
                let seal = dir.join(format!("seal/{run_id}.json"));
                let mut value: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&seal).unwrap()).unwrap();
                value["verdict"] = "pass".into();
                value["exit_code"] = 0.into();
                std::fs::write(&seal, value.to_string()).unwrap();
            }
            Forge::RemoveSealAndVerdict => {
                let file = failed_record_file(dir);
                let text = std::fs::read_to_string(&file).unwrap();
                let green = text
                    .replace("\"outcome\":\"failed\"", "\"outcome\":\"passed\"")
                    .replace("\"failure_kind\":\"error\"", "\"failure_kind\":null");
                std::fs::write(&file, green).unwrap();
                std::fs::remove_dir_all(dir.join("seal")).unwrap();
                std::fs::remove_file(dir.join("verdict.jsonl")).unwrap();
            }
            Forge::LaterFakeRun => {
                let line = passing_line(dir)
                    .replace(&format!("\"run_id\":\"{run_id}\""), "\"run_id\":\"zzfake\"");
                std::fs::write(records.join("999-9.jsonl"), format!("{line}\n")).unwrap();
            }
        }
    }
}

/// A sealed run's folder forged without rewriting a single hash of the
/// seal: a record in a dot file, a record whose run id is escaped, the
/// seal's verdict edited, the seal removed along with `verdict.jsonl`.
/// None of them may read greener than the run was judged.
#[test]
fn results_forged_past_the_seal_never_read_greener() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(basics)"])
            .env("FIXTURE_MODE", "fail")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let judged = ran.results();
    let run_id = ran.run_id();
    let mut greener = Vec::new();
    for forge in [
        Forge::DotFileRecord,
        Forge::EscapedRunIdRecord,
        Forge::AllGreen,
        Forge::RemoveSealAndVerdict,
        Forge::LaterFakeRun,
    ] {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(&judged, copy.path());
        forge.apply(copy.path(), &run_id);
        let report = Ran::from(runner().arg("report").arg(copy.path()).output().unwrap());
        assert_eq!(report.code, 0, "{forge:?}: {}", report.stderr);
        let (_, failures, _) = junit_counts(&copy.path().join("junit.xml"));
        let page = headline(copy.path());
        let merged = tempfile::tempdir().unwrap();
        let merge = Ran::from(
            runner()
                .arg("merge")
                .arg(merged.path())
                .arg(copy.path())
                .output()
                .unwrap(),
        );
        let (_, merged_failures, _) = junit_counts(&merged.path().join("junit.xml"));
        eprintln!(
            "== {forge:?}: JUnit failures {failures}, page {page}, merged JUnit failures \
             {merged_failures}, merged page {}\n{}",
            headline(merged.path()),
            report.stdout
        );
        if report.stdout.contains(" 0 failed")
            || failures == 0
            || page == "PASSED"
            || merge.stdout.contains(" 0 failed")
            || merged_failures == 0
        {
            greener.push(format!(
                "{forge:?} (JUnit failures {failures}, page {page})"
            ));
        }
    }
    assert!(greener.is_empty(), "read greener than judged: {greener:?}");
}

/// The binary `rerun`: its test passes, or with `RERUN_KILL` set SIGKILLs
/// its own process.
const RERUN: &str = r#"
use testkit::prelude::*;

/// Passes, unless asked to kill its own process.
#[testkit::test]
async fn passes_then_dies(_cx: &mut Cx) -> testkit::Result {
    if std::env::var_os("RERUN_KILL").is_some() {
        std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status()?;
    }
    Ok(())
}

testkit::main!();
"#;

/// A plain `cargo test` run twice under one `TESTKIT_RUN_ID` into one
/// folder (as a rerun of a CI job does): the test passed the first time and
/// was SIGKILLed the second. Its latest start has no end; the first run's
/// record must not end it.
#[test]
fn a_rerun_killed_after_a_pass_under_one_run_id_is_not_a_pass() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "rerun", RERUN);
    build(suite.path());
    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    for kill in [false, true] {
        let mut cargo = crate::fixture_cargo();
        cargo
            .args(["test", "--test", "rerun"])
            .env("TESTKIT_RESULTS_DIR", results.path())
            .env("TESTKIT_RUN_ID", "rerun1")
            .env(
                "TESTKIT_SECRETS_DIR",
                results.path().with_extension("secrets"),
            )
            .env("TESTKIT_POD_HANDLE", &pod.handle_file)
            .current_dir(suite.path());
        if kill {
            cargo.env("RERUN_KILL", "1");
        }
        let status = cargo.status().unwrap();
        assert_eq!(status.success(), !kill, "the second run was killed");
    }
    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(
        !report.stdout.contains(" 0 failed"),
        "a test killed in the latest run reads as passed: {}",
        report.stdout
    );
    assert_eq!(headline(results.path()), "FAILED");
}

/// The binary `forges`: its test writes a passing record of itself that
/// starts later than its real one, then fails.
const FORGES: &str = r#"
use testkit::prelude::*;

/// Fails, having written a passing record of itself beforehand.
#[testkit::test]
async fn fails_and_forges(_cx: &mut Cx) -> testkit::Result {
    let results = std::path::PathBuf::from(std::env::var_os("TESTKIT_RESULTS_DIR").unwrap());
    let mut run_id = String::new();
    for file in std::fs::read_dir(results.join("starts/forges"))? {
        for line in std::fs::read_to_string(file?.path())?.lines() {
            let start: serde_json::Value = serde_json::from_str(line)?;
            run_id = start["run_id"].as_str().unwrap_or_default().to_owned();
        }
    }
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64
        + 60_000;
    let forged = serde_json::json!({
        "schema": 1, "run_id": run_id, "binary": "forges",
        "name": "forges::fails_and_forges", "description": "", "file": "tests/forges.rs",
        "line": 5, "outcome": "passed", "failure_kind": null, "message": null,
        "skip_reason": null, "started_at_ms": later, "duration_ms": 1, "known_issue": null,
        "fails_with": null, "requires": [], "capabilities_missing": [], "resources": [],
        "cleanup": "nothing", "output": ""
    });
    let dir = results.join("records/forges");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("1-1.jsonl"), format!("{forged}\n"))?;
    bail!("the real failure")
}

testkit::main!();
"#;

/// A test that fails under the runner, having written a passing record of
/// itself (as a child of any test could): nextest saw it fail, and the
/// run fails; its JUnit and summary must not count it passed.
#[test]
fn a_passing_record_of_a_test_nextest_saw_fail_is_not_counted_a_pass() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "forges", FORGES);
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(forges)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (_, failures, _) = junit_counts(&ran.results().join("junit.xml"));
    assert!(
        !ran.stdout.contains(" 0 failed"),
        "the failed test counts as passed: {}",
        ran.stdout
    );
    assert_eq!(failures, 1, "JUnit counts the failed test as passed");
}
