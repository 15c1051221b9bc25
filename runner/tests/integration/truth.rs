//! A green verdict is never false: the ways a run could still report a pass
//! it did not see, and a report about a run it did not name. Real runs of
//! the fixture suite against sandboxd, real SIGKILLs, a real full disk.

use std::path::Path;
use std::time::Duration;

use testkit_engine::report::{read_records, Outcome, TestRecord};

use crate::{fixture, junit_counts, runner, wait_for, CallerPod, Ran};

/// Adds the test binary `name` (harness = false) with `source` to the
/// fixture suite copied at `suite`.
pub(crate) fn add_test_binary(suite: &Path, name: &str, source: &str) {
    std::fs::write(suite.join(format!("tests/{name}.rs")), source).unwrap();
    let manifest = suite.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&format!(
        "\n[[test]]\nname = \"{name}\"\npath = \"tests/{name}.rs\"\nharness = false\n"
    ));
    std::fs::write(&manifest, text).unwrap();
}

/// The arguments that run only the test binary `binary` under `engine`:
/// a filter expression for nextest, a name filter for cargo test (names
/// start with the binary's, as its tests are at its root).
pub(crate) fn only(binary: &str, engine: &str) -> Vec<String> {
    if engine == "nextest" {
        vec!["-E".to_owned(), format!("binary({binary})")]
    } else {
        vec!["--".to_owned(), format!("{binary}::")]
    }
}

fn record<'a>(records: &'a [TestRecord], binary: &str, name: &str) -> &'a TestRecord {
    records
        .iter()
        .find(|r| r.binary == binary && r.name == name)
        .unwrap_or_else(|| panic!("no record of {binary}::{name} in {records:#?}"))
}

const EXITS: &str = r#"
use testkit::prelude::*;

/// Ends its process halfway, with status 0: it never finished.
#[testkit::test]
async fn exits_halfway(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    std::process::exit(0)
}

testkit::main!();
"#;

/// A test that calls `std::process::exit(0)` halfway did not pass, under
/// either engine: nextest's "ok" and cargo test's silence are not records.
#[test]
fn a_test_that_exits_halfway_is_not_a_pass() {
    for engine in ["nextest", "cargo-test"] {
        let suite = fixture("suite");
        add_test_binary(suite.path(), "exits", EXITS);
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .args(["--runner", engine])
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, 1, "{engine}: {}", ran.stdout);
        assert!(ran.stdout.contains("FAILED"), "{engine}: {}", ran.stdout);
        let records = read_records(&ran.results()).unwrap();
        let exited = record(&records, "exits", "exits::exits_halfway");
        assert_eq!(exited.outcome, Outcome::Failed, "{engine}: {exited:#?}");
        assert!(
            exited
                .message
                .as_deref()
                .unwrap_or("")
                .contains("no record"),
            "{engine}: {exited:#?}"
        );
        // The rest of the suite is still counted as it ran.
        assert_eq!(
            record(&records, "basics", "basics::capabilities_answer").outcome,
            Outcome::Passed,
            "{engine}"
        );
    }
}

/// When the residue cannot be listed, what the tests left is unknown, not
/// none: the run could not complete (exit 2), and the summary says so.
#[test]
fn a_residue_listing_that_fails_is_unknown_not_none() {
    let suite = fixture("suite");
    let config = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    // A kind whose listing the pod does not serve: every list answers 404.
    text.push_str(
        "\n[resources.widget]\nexists = \"GET /api/widgets/{name}\"\n\
         delete = \"DELETE /api/widgets/{name}\"\n\
         list = \"GET /api/widgets?prefix={prefix}\"\nlist_names = \"/items/*/name\"\n",
    );
    std::fs::write(&config, text).unwrap();
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(basics)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(evidence.contains("widget"), "{evidence}");
    assert!(evidence.contains("unknown"), "{evidence}");
    assert!(!ran.stdout.contains("leaks: none"), "{}", ran.stdout);
    assert!(ran.stdout.contains("leaks: unknown"), "{}", ran.stdout);
}

/// A tmpfs of `size` mounted at a new temp dir, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount(8) runs");
        // A full disk is a guarantee this test must check: without the
        // right to mount a tmpfs (root), it fails rather than skips.
        assert!(
            status.success(),
            "mounting a {size} tmpfs needs root: {status}"
        );
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: the temp dir's own cleanup may still hold it a moment.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A results folder on a full disk: the outputs the run promised were not
/// written, so the run could not complete (exit 2), and says which.
#[test]
fn a_full_disk_fails_the_run() {
    let suite = fixture("suite");
    let disk = SmallDisk::mount("64k");
    let results = disk.dir.path().join("results");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .arg("--results")
            .arg(&results)
            .args(["-E", "binary(basics)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(!ran.stdout.contains("PASSED"), "{}", ran.stdout);
    assert!(ran.stdout.contains("INCOMPLETE"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("NOT WRITTEN") && ran.stdout.contains("No space left on device"),
        "{}",
        ran.stdout
    );
    // Read again with room to write: the run's final verdict (exit 2), not
    // the first one it wrote (exit 0, before its outputs failed).
    let verdicts = std::fs::read_to_string(results.join("verdict.jsonl")).unwrap_or_default();
    let copy = tempfile::tempdir().unwrap();
    crate::copy_dir(&results, copy.path());
    let report = Ran::from(runner().arg("report").arg(copy.path()).output().unwrap());
    assert_eq!(report.code, 0, "{}", report.stderr);
    let html = std::fs::read_to_string(copy.path().join("report.html")).unwrap();
    assert!(
        !html.contains("class=\"verdict pass\">PASSED"),
        "a run that could not complete re-reads as PASSED; verdict.jsonl:\n{verdicts}"
    );
}

/// The `run_id` property of each testcase of a `junit.xml`, with the
/// report's name.
fn junit_run_ids(path: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let name = doc
        .root_element()
        .attribute("name")
        .unwrap_or("")
        .to_owned();
    let ids = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|case| {
            case.descendants()
                .find(|p| p.has_tag_name("property") && p.attribute("name") == Some("run_id"))
                .and_then(|p| p.attribute("value"))
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    (name, ids)
}

/// The testcase `name` of a `junit.xml`, as its XML text.
fn junit_case(path: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
        .unwrap_or_else(|| panic!("no testcase {name} in {}:\n{text}", path.display()));
    text[case.range()].to_owned()
}

/// A plain `cargo nextest run` of the fixture `suite` against `pod`,
/// results in `results`; its exit status.
fn plain_nextest(
    suite: &Path,
    pod: &CallerPod,
    results: &Path,
    mode: &str,
    args: &[&str],
) -> std::process::ExitStatus {
    let secrets = results.with_extension("secrets");
    crate::fixture_cargo()
        .args(["nextest", "run", "--workspace", "--no-fail-fast"])
        .args(args)
        .env("TESTKIT_RESULTS_DIR", results)
        .env("TESTKIT_SECRETS_DIR", &secrets)
        .env("TESTKIT_POD_HANDLE", &pod.handle_file)
        .env("FIXTURE_MODE", mode)
        .current_dir(suite)
        .status()
        .unwrap()
}

/// A results folder reused by a second run (`--results DIR` twice): the
/// second run's report.html and summary are about the second run only, and
/// `testkit-runner report DIR` reports the latest run, names it in
/// junit.xml, and says which other runs the folder holds and how to pick
/// one (`--run ID`).
#[test]
fn a_reused_results_folder_reports_its_latest_run_and_names_it() {
    let suite = fixture("suite");
    let results = tempfile::tempdir().unwrap();
    let first = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .arg("--results")
            .arg(results.path())
            .output()
            .unwrap(),
    );
    assert_eq!(first.code, 0, "the first run is green");
    // Every test of the second run dies before it writes its record.
    let second = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .arg("--results")
            .arg(results.path())
            .args(["-E", "test(create_tracked)"])
            .env("FIXTURE_MODE", "sigkill")
            .output()
            .unwrap(),
    );
    assert_eq!(second.code, 1, "the second run fails");
    let (one, two) = (first.run_id(), second.run_id());
    assert_ne!(one, two);

    let html = std::fs::read_to_string(results.path().join("report.html")).unwrap();
    assert!(
        !html.contains("\"outcome\":\"passed\""),
        "the second run's report.html shows a pass, which only the first run had"
    );
    assert!(
        html.contains("\"name\":\"sandboxes::create_tracked\""),
        "the killed test is on the page"
    );
    let summary = std::fs::read_to_string(results.path().join("summary.md")).unwrap();
    assert!(summary.contains(&format!("(run {two})")), "{summary}");
    assert!(
        summary.contains("| 0 | 1 |"),
        "0 passed, 1 failed: {summary}"
    );

    // `report DIR` after the fact: the latest run, by name.
    let junit = results.path().join("junit.xml");
    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0);
    assert!(
        report.stdout.contains(&format!("run {two}")) && report.stdout.contains(&one),
        "it names the run it reports and the other one: {}",
        report.stdout
    );
    assert!(report.stdout.contains("--run"), "{}", report.stdout);
    assert!(
        !report.stdout.contains(" 4 passed") && report.stdout.contains("1 failed"),
        "{}",
        report.stdout
    );
    let (name, ids) = junit_run_ids(&junit);
    assert_eq!(name, two, "junit.xml is named after the run it reports");
    assert!(ids.iter().all(|id| *id == two), "{ids:?}");
    assert_eq!(junit_counts(&junit).1, 1, "one failure");

    // `--run ID` reports another run of the folder.
    let report = Ran::from(
        runner()
            .arg("report")
            .arg(results.path())
            .args(["--run", &one])
            .output()
            .unwrap(),
    );
    assert_eq!(report.code, 0);
    let (name, ids) = junit_run_ids(&junit);
    assert_eq!(name, one);
    assert!(ids.iter().all(|id| *id == one), "{ids:?}");
    assert_eq!(junit_counts(&junit).1, 0);
    // A run the folder does not hold is a usage error that lists those it does.
    let report = Ran::from(
        runner()
            .arg("report")
            .arg(results.path())
            .args(["--run", "nosuchrun"])
            .output()
            .unwrap(),
    );
    assert_eq!(report.code, 64);
    assert!(
        report.stderr.contains(&one) && report.stderr.contains(&two),
        "{}",
        report.stderr
    );
}

/// A test SIGKILLed under a plain `cargo nextest run` wrote no record; its
/// journal and its reaper's entries say what it created and what became of
/// it: `testkit-runner report` counts it as failed, with them.
#[test]
fn a_sigkilled_test_under_plain_nextest_is_reported_from_its_journal() {
    let suite = fixture("suite");
    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    let status = plain_nextest(
        suite.path(),
        &pod,
        results.path(),
        "sigkill",
        &["-E", "test(create_tracked)"],
    );
    assert!(
        !status.success(),
        "nextest counts the killed test as failed"
    );
    // The reaper works on after nextest has seen its test die.
    let journal = results.path().join("journal");
    let reaped = || {
        std::fs::read_dir(&journal).into_iter().flatten().any(|f| {
            std::fs::read_to_string(f.unwrap().path())
                .unwrap_or_default()
                .contains("\"event\":\"reaped\"")
        })
    };
    assert!(
        wait_for(Duration::from_secs(60), reaped),
        "the reaper journaled its delete"
    );
    let (_, listed) = pod.get("/api/sandboxes");
    assert!(!listed.contains("ct-"), "the reaper deleted it: {listed}");

    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0, "the folder is a results folder");
    let junit = results.path().join("junit.xml");
    // The killed test, and the ignored test of the binary the filter left
    // out: nextest listed it, as it lists every binary.
    assert_eq!(junit_counts(&junit), (2, 1, 1));
    let case = junit_case(&junit, "sandboxes::create_tracked");
    assert!(
        case.contains("killed before it wrote its record"),
        "the failure says what happened: {case}"
    );
    assert!(case.contains("reaper"), "and what the reaper did: {case}");
    assert!(
        case.contains("sandbox/ct-") && case.contains("=deleted"),
        "its resource and its fate: {case}"
    );
    assert!(report.stdout.contains("1 failed"), "{}", report.stdout);
}

/// The binary `later`: its only test is ignored, so nextest starts no
/// process of it.
const IGNORED_ONLY: &str = r#"use testkit::prelude::*;

/// Needs the second version of the API.
#[testkit::test(ignore = "waits for the v2 API")]
async fn v2_only(_cx: &mut Cx) -> testkit::Result {
    bail!("an ignored test ran")
}

testkit::main!();
"#;

/// A plain libtest binary (no testkit) whose only test is ignored.
const PLAIN_IGNORED: &str = r#"#[test]
#[ignore = "needs a second pod"]
fn two_pods() {}
"#;

/// A test binary whose only test is ignored is counted as skipped, with its
/// reason, under the runner and under a plain `cargo nextest run` followed
/// by `testkit-runner report`. The runner counts a plain libtest binary's
/// too, from nextest's listing; after a plain nextest run no testkit code
/// ran for that one, and only nextest's own JUnit knows of it.
#[test]
fn a_binary_whose_only_tests_are_ignored_is_counted_as_skipped() {
    let suite = fixture("suite");
    std::fs::write(suite.path().join("tests/later.rs"), IGNORED_ONLY).unwrap();
    std::fs::write(suite.path().join("tests/plain.rs"), PLAIN_IGNORED).unwrap();
    let manifest = suite.path().join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("\n[[test]]\nname = \"later\"\npath = \"tests/later.rs\"\nharness = false\n");
    text.push_str("\n[[test]]\nname = \"plain\"\npath = \"tests/plain.rs\"\n");
    std::fs::write(&manifest, text).unwrap();

    let ran = Ran::from(runner().arg("run").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 0);
    assert!(
        ran.stdout
            .contains("8 tests: 4 passed, 0 failed, 3 skipped"),
        "{}",
        ran.stdout
    );
    let junit = ran.results().join("junit.xml");
    let case = junit_case(&junit, "later::v2_only");
    assert!(case.contains("ignored: waits for the v2 API"), "{case}");
    let case = junit_case(&junit, "two_pods");
    assert!(case.contains("ignored (nextest)"), "{case}");

    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    let status = plain_nextest(suite.path(), &pod, results.path(), "", &[]);
    assert!(status.success());
    let report = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(report.code, 0);
    let junit = results.path().join("junit.xml");
    assert_eq!(junit_counts(&junit), (7, 0, 3), "2 skipped and an xfail");
    let case = junit_case(&junit, "later::v2_only");
    assert!(case.contains("ignored: waits for the v2 API"), "{case}");
}

/// A malformed `TESTKIT_*` value in the runner's environment is a bad
/// argument naming the variable and its value (exit 64), not a crash of
/// every test, a silent default or a setting silently overridden: a handle,
/// a suite or a results folder other than the run's own (the tests would
/// run against another pod, the results go elsewhere), a pods or secrets
/// folder that cannot be one, a role that testkit alone gives a binary.
#[test]
fn malformed_settings_are_bad_arguments_naming_the_variable_and_its_value() {
    let suite = fixture("suite");
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let file = file.to_str().unwrap();
    for (var, value) in [
        ("TESTKIT_SWEEP_DEADLINE", "soon"),
        ("TESTKIT_SWEEP_DEADLINE", "0s"),
        ("TESTKIT_TIMEOUT", "forever"),
        ("TESTKIT_KEEP", "sometimes"),
        ("TESTKIT_POD_HANDLE", "/nonexistent.json"),
        ("TESTKIT_RESULTS_DIR", "/proc/x"),
        ("TESTKIT_SUITE_DIR", "/nonexistent"),
        ("TESTKIT_PODS_DIR", "/proc/x"),
        ("TESTKIT_RUN_AS", "sweeper"),
        ("TESTKIT_SWEEP_KINDS", "sandbox"),
        ("TESTKIT_SECRETS_DIR", file),
    ] {
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .env(var, value)
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, 64, "{var}={value}: {}", ran.stderr);
        assert!(
            ran.stderr.contains(&format!("{var}={value:?}")),
            "{var}={value}: {}",
            ran.stderr
        );
    }
    // A suite dir that is the run's own is no mistake.
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "test(capabilities_answer)"])
            .env("TESTKIT_SUITE_DIR", suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
}

/// The verbs that read the environment besides `run` (`janitor`, `pod`)
/// took a malformed setting for no setting at all: a secrets folder that is
/// a file sent `janitor --run` to look for the run's handle elsewhere, and
/// `pod` ignored every setting it did not like. Each is now refused as
/// `run` refuses it (exit 64), naming the variable and its value.
#[test]
fn the_janitor_and_pod_verbs_refuse_a_malformed_setting_instead_of_defaulting() {
    let suite = fixture("suite");
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], &str, &str); 3] = [
        (
            &["janitor", "--run", "abc123", "--suite"],
            "TESTKIT_SECRETS_DIR",
            file,
        ),
        (&["pod", "ls"], "TESTKIT_TIMEOUT", "soon"),
        (&["pod", "status"], "TESTKIT_KEEP", "sometimes"),
    ];
    for (args, var, value) in cases {
        let mut cmd = runner();
        cmd.args(args);
        if args[0] == "janitor" {
            cmd.arg(suite.path());
        }
        let ran = Ran::from(cmd.env(var, value).output().unwrap());
        assert_eq!(ran.code, 64, "{args:?} {var}={value}: {}", ran.stderr);
        let expected = format!("testkit-runner: {var}={value:?} is invalid: ");
        assert!(
            ran.stderr.contains(&expected),
            "{args:?}: {expected}\n{}",
            ran.stderr
        );
    }
}

/// A `KNOWN-ISSUES.md` the suite has is valid or an error naming its line:
/// never read as an empty list, which would let the run pass.
#[test]
fn a_malformed_known_issues_file_is_an_error_naming_its_line() {
    let suite = fixture("suite");
    let file = suite.path().join("KNOWN-ISSUES.md");
    let mut text = std::fs::read_to_string(&file).unwrap();
    let line = text.lines().count() + 2;
    text.push_str("\n## FIX-2 a heading without its colon\n");
    std::fs::write(&file, text).unwrap();
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "test(capabilities_answer)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(
        evidence.contains(&format!("KNOWN-ISSUES.md:{line}")),
        "line {line}: {evidence}"
    );
}
