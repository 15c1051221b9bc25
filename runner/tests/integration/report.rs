//! `report.html`, as a person sees it: rendered by headless Chromium, its
//! DOM read after the page's script ran, and a screenshot kept in the
//! test's output folder.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::{fixture, junit_counts, runner, CallerPod, Ran};

/// How to get the browser these tests need.
const INSTALL: &str = "apt-get update && apt-get install -y chromium";

/// Where a test keeps what a person may want to look at afterwards.
pub(crate) fn output_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("report")
        .join(test);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("these tests render report.html in headless Chromium, which is not installed: {INSTALL}")
        })
}

/// Runs Chromium headless on `page` with `args`; its stdout. Bounded: a
/// browser that does not finish is killed with its process group.
fn chromium_run(url: &str, args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("chromium did not start ({e}): {INSTALL}"));
    let group = Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The browser's helpers are in its group: none outlives the test.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
    let status = status.expect("chromium did not finish within 120 s");
    assert!(status.success(), "chromium exited with {status}");
    reader.join().unwrap()
}

/// Renders `page`: returns the DOM after its scripts ran, and saves a
/// screenshot as `<output dir of test>/<name>.png`.
pub(crate) fn render(page: &Path, test: &str, name: &str) -> String {
    let window = "--window-size=1400,2600".to_owned();
    let url = format!("file://{}", page.display());
    let dom = chromium_run(&url, &["--dump-dom".to_owned(), window.clone()]);
    assert!(
        dom.contains("</html>"),
        "chromium dumped no DOM of {}: {dom:?}",
        page.display()
    );
    let screenshot = output_dir(test).join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    chromium_run(
        &url,
        &[format!("--screenshot={}", screenshot.display()), window],
    );
    let size = std::fs::metadata(&screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "a screenshot of {size} bytes is blank");
    eprintln!("screenshot of {}: {}", page.display(), screenshot.display());
    dom
}

/// The DOM of `page` opened at `#fragment` (the filter's state).
fn dom_at(page: &Path, fragment: &str) -> String {
    chromium_run(
        &format!("file://{}#{fragment}", page.display()),
        &["--dump-dom".to_owned()],
    )
}

/// How many times `needle` occurs in `hay`.
pub(crate) fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The text of the first element after `marker`, up to its closing tag.
fn section<'a>(dom: &'a str, marker: &str, end: &str) -> &'a str {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the DOM"));
    let rest = &dom[start..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

/// A run with a failure (with resources and a screenshot), a leak and an
/// expected failure: the page says FAILED at the top, then the counts,
/// the leak, the failure with its message, log and screenshot, before the
/// timeline; the timeline has a bar for every test that ran and the
/// lifetimes of the sandboxes they created; CI logs end with where to
/// look, and GitHub's step summary gets the Markdown.
#[test]
fn a_failed_runs_report_shows_the_failure_the_leak_and_the_expected_failure_first() {
    let suite = fixture("suite");
    let ci = tempfile::tempdir().unwrap();
    let step_summary = ci.path().join("step-summary.md");
    std::fs::write(&step_summary, "# an earlier step\n").unwrap();
    let ran = Ran::from(
        runner()
            .env("FIXTURE_MODE", "leak,broken-ui")
            .env("GITHUB_STEP_SUMMARY", &step_summary)
            .arg("run")
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1);
    let results = ran.results();
    let run_id = ran.run_id();
    let page = results.join("report.html");
    let last: Vec<&str> = ran.stdout.lines().rev().take(2).collect();
    assert_eq!(
        last,
        [
            format!("report: {}", page.display()),
            format!("junit: {}", results.join("junit.xml").display())
        ],
        "the output ends with where to look"
    );
    let step = std::fs::read_to_string(&step_summary).unwrap();
    assert!(
        step.starts_with("# an earlier step\n")
            && step.contains("| tests | fail |")
            && step.contains("create_two"),
        "{step}"
    );

    let html = std::fs::read_to_string(&page).unwrap();
    let handle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("pod/handle.json")).unwrap())
            .unwrap();
    // The results folder's handle has its token redacted, so "[REDACTED]"
    // is all it can name, and the page may well say that (a trace's
    // blanked headers); that no live credential is in any file of the
    // results is what faults.rs's
    // `no_byte_a_run_writes_holds_the_token_or_the_session` and trace.rs check.
    assert_eq!(
        handle["token"], "[REDACTED]",
        "the results folder holds the token"
    );
    for fetch in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }

    let dom = &render(&page, "failed_run", "failed-run");
    // Top to bottom, in the order a person reads.
    let at = |id: &str| {
        dom.find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no #{id}"))
    };
    let order = [
        "verdict", "phases", "counts", "leaks", "failures", "timeline",
    ];
    let positions: Vec<usize> = order.iter().map(|id| at(id)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "sections out of order: {order:?} at {positions:?}"
    );
    assert!(
        section(dom, "id=\"verdict\"", "</span>").ends_with("FAILED"),
        "verdict"
    );
    assert!(
        dom.contains("<tr class=\"phase fail\" data-phase=\"residue\">"),
        "the residue phase failed"
    );
    // The counts, the failure's kind, the skip's reason.
    for (kind, n) in [
        ("passed", 3),
        ("failed", 1),
        ("skipped", 1),
        ("expected_failure", 1),
        ("unexpected_pass", 0),
    ] {
        let card = section(dom, &format!("data-kind=\"{kind}\""), "</div>");
        assert!(
            card.contains(&format!("<span class=\"n\">{n}</span>")),
            "{kind}: {card}"
        );
    }
    assert!(section(dom, "data-kind=\"failed\"", "</div>").contains("1 error"));
    assert!(section(dom, "data-kind=\"skipped\"", "</div>").contains("needs hardware the CI lacks"));
    // The leak the residue sweep found, by name.
    let leaks = section(dom, "id=\"leaks\"", "</section>");
    assert!(
        leaks.contains(&format!("`ct-{run_id}-")) && leaks.contains("deleted, verified gone"),
        "{leaks}"
    );
    // The failure: its message escaped (no markup from the test gets in),
    // its log, its sandboxes and their fate, its screenshot inline.
    let failures = section(dom, "id=\"failures\"", "</section>");
    assert_eq!(
        count(failures, "<article class=\"failure\""),
        1,
        "{failures}"
    );
    assert!(failures.contains("create_two"), "{failures}");
    assert!(
        failures.contains("the sandbox list showed 1 row &lt;b&gt;&amp;amp;&lt;/b&gt;, expected 2"),
        "{failures}"
    );
    assert!(
        !dom.contains("<b>&amp;</b>"),
        "the test's text became markup"
    );
    let log = section(failures, "<pre class=\"log\">", "</pre>");
    assert!(log.contains("the sandbox list showed one row"), "{log}");
    assert_eq!(
        count(failures, "<tr class=\"res deleted\">"),
        2,
        "both sandboxes deleted: {failures}"
    );
    assert!(
        failures.contains(
            "<img class=\"screenshot\" alt=\"sandbox-list.png\" src=\"data:image/png;base64,"
        ),
        "{failures}"
    );
    // The expected failure's known issue and its state.
    let issues = section(dom, "id=\"known-issues\"", "</section>");
    assert!(
        issues.contains("FIX-1") && issues.contains("still failing as documented"),
        "{issues}"
    );
    // The timeline the script drew: a bar for each of the 5 tests that ran
    // (the ignored one did not), coloured by outcome; the sandboxes'
    // lifetimes; the pod's boot and teardown.
    let timeline = section(dom, "id=\"timeline\"", "id=\"details\"");
    assert_eq!(count(timeline, "class=\"bar "), 5, "{timeline}");
    assert_eq!(count(timeline, "class=\"bar failed\""), 1);
    assert_eq!(count(timeline, "class=\"bar expected_failure\""), 1);
    assert_eq!(count(timeline, "class=\"life\""), 3, "{timeline}");
    assert!(
        timeline.contains("data-phase=\"up\"") && timeline.contains("data-phase=\"down\""),
        "{timeline}"
    );
    // The list of every test, drawn by the script.
    assert_eq!(count(dom, "<tr data-outcome="), 6);
    assert!(dom.contains("6 of 6 tests"), "the filter ran");
    // Filtered by outcome, and by name, from the page's address.
    let failed = dom_at(&page, "outcome=failed");
    assert!(failed.contains("1 of 6 tests"), "filtered by outcome");
    assert_eq!(
        count(
            &failed,
            "<tr data-outcome=\"failed\" data-name=\"sandboxes::create_two\">"
        ),
        1
    );
    assert_eq!(
        count(&failed, "hidden=\"\""),
        5 + 1,
        "5 rows and the details hidden"
    );
    let named = dom_at(&page, "name=CREATE");
    assert!(
        named.contains("2 of 6 tests"),
        "filtered by name, case aside"
    );
    assert_eq!(
        count(&named, "class=\"bar passed dim\""),
        2,
        "the others' bars dimmed"
    );
}

/// `testkit-runner report DIR` for the results of a plain `cargo nextest
/// run`: the page has every test, says the phases and commit are not
/// recorded (or, given `--suite`, asks git there); a folder that is not a
/// results folder is a usage error that says so.
#[test]
fn the_report_verb_renders_a_plain_nextest_run_and_refuses_other_folders() {
    let suite = fixture("suite");
    let pod = CallerPod::start();
    let results = tempfile::tempdir().unwrap();
    // The run's session cache goes with the test, not under the runtime dir.
    let secrets = tempfile::tempdir().unwrap();
    let status = crate::fixture_cargo()
        .args(["nextest", "run", "--workspace", "--no-fail-fast"])
        .env("TESTKIT_RESULTS_DIR", results.path())
        .env("TESTKIT_SECRETS_DIR", secrets.path())
        .env("TESTKIT_POD_HANDLE", &pod.handle_file)
        .env_remove("FIXTURE_MODE")
        .current_dir(suite.path())
        .status()
        .unwrap();
    assert!(status.success());
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(ran.code, 0);
    let page = results.path().join("report.html");
    // The summary, then where to look, last.
    let last: Vec<&str> = ran.stdout.lines().rev().take(2).collect();
    assert_eq!(
        last,
        [
            format!("report: {}", page.display()),
            format!("junit: {}", results.path().join("junit.xml").display())
        ],
        "{}",
        ran.stdout
    );
    let dom = &render(&page, "report_verb", "plain-nextest-run");
    assert!(section(dom, "id=\"verdict\"", "</span>").ends_with("PASSED"));
    assert!(
        dom.contains("not recorded: the results of a plain cargo test or nextest run"),
        "the commit is unknown"
    );
    assert!(dom.contains("No phases:"), "no runner phases");
    assert!(dom.contains("no residue sweep ran"), "no sweep is claimed");
    assert_eq!(count(dom, "<tr data-outcome="), 6);
    assert_eq!(count(dom, "class=\"bar "), 5);

    // Given the suite, the commit is asked of git: the fixture's temp copy
    // is no checkout, the workspace is.
    let ran = Ran::from(
        runner()
            .arg("report")
            .arg(results.path())
            .arg("--suite")
            .arg(crate::workspace())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0);
    let html = std::fs::read_to_string(&page).unwrap();
    let head = String::from_utf8(
        Command::new("git")
            .arg("-C")
            .arg(crate::workspace())
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(html.contains(head.trim()), "the commit is on the page");

    let empty = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            vec![PathBuf::from("/nonexistent/results")],
            "is not a folder",
        ),
        (
            vec![empty.path().to_owned()],
            "neither records/ nor verdict.jsonl",
        ),
        (
            vec![results.path().to_owned(), results.path().to_owned()],
            "need --out DIR",
        ),
    ] {
        let ran = Ran::from(runner().arg("report").args(&args).output().unwrap());
        assert_eq!(ran.code, 64, "{args:?}");
        assert!(ran.stderr.contains(says), "{args:?}: {}", ran.stderr);
    }
}

/// A record of a newer schema than this testkit reads is refused, naming
/// the file and what to do, never read as if it were this schema's (nor
/// dropped, leaving the other records to report a green run).
#[test]
fn a_record_of_a_newer_schema_is_refused_naming_its_file() {
    let results = tempfile::tempdir().unwrap();
    let dir = results.path().join("records/suite-abc");
    std::fs::create_dir_all(&dir).unwrap();
    let record = |schema: u32, name: &str| {
        format!(
            r#"{{"schema":{schema},"run_id":"r","binary":"suite-abc","name":"{name}","description":"","file":"","line":1,"outcome":"passed","failure_kind":null,"message":null,"skip_reason":null,"started_at_ms":5,"duration_ms":1,"known_issue":null,"fails_with":null,"requires":[],"capabilities_missing":[],"resources":[],"cleanup":"nothing","output":""}}"#
        )
    };
    std::fs::write(dir.join("1.jsonl"), record(1, "old") + "\n").unwrap();
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(ran.code, 0, "a schema-1 folder reports: {}", ran.stderr);
    let newer = dir.join("2.jsonl");
    std::fs::write(&newer, record(2, "new") + "\n").unwrap();
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_ne!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stderr.contains(&newer.display().to_string())
            && ran
                .stderr
                .contains("schema version 2 is newer than this testkit reads (1)")
            && ran.stderr.contains("upgrade"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stdout.contains("PASSED"), "{}", ran.stdout);
}

/// Faults as a person sees them: below the test lanes, a lane per node
/// the tests faulted, each fault a bar on it titled with what was done, by
/// which test and how it was undone; one never undone runs open and red
/// to the end of the run, its test's section lists it as a failure.
#[test]
fn faults_are_bars_on_the_lanes_of_their_nodes() {
    use testkit_engine::report::{write_records, FailureKind, FaultRecord, FaultState, TestRecord};
    let t0 = 1_767_000_000_000;
    let fault = |node: &str, what: &str, at: u64, undone: Option<u64>| {
        let mut f = FaultRecord::injected(node, what.to_owned());
        f.injected_at_ms = t0 + at;
        f.undone_at_ms = undone.map(|u| t0 + u);
        f.state = if undone.is_some() {
            FaultState::Undone
        } else {
            FaultState::NotUndone
        };
        f
    };
    let mut stop = TestRecord::new("r", "cluster", "faults::stop");
    (stop.started_at_ms, stop.duration_ms) = (t0, 4_000);
    stop.faults = vec![fault("worker-1", "stop worker-1", 500, Some(1_947))];
    let mut pause = TestRecord::new("r", "cluster", "faults::pause");
    (pause.started_at_ms, pause.duration_ms) = (t0 + 100, 6_000);
    pause.faults = vec![fault("worker-2", "pause worker-2", 1_000, None)];
    pause.fail(
        FailureKind::FaultNotUndone,
        "fault not undone: node `worker-2`: pause worker-2 (not undone)".to_owned(),
    );
    let results = tempfile::tempdir().unwrap();
    write_records(results.path(), &[stop, pause]).unwrap();
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let dom = render(&results.path().join("report.html"), "faults", "faults");
    assert_eq!(
        count(&dom, "class=\"node-head\""),
        2,
        "a lane per faulted node"
    );
    assert!(dom.contains(">node worker-1</div>") && dom.contains(">node worker-2</div>"));
    assert!(
        dom.contains(
            "class=\"bar fault undone\" title=\"stop worker-1 — injected by faults::stop, \
             undone after 1447 ms\" data-test=\"faults::stop\""
        ),
        "{dom}"
    );
    assert!(
        dom.contains(
            "class=\"bar fault not_undone open\" title=\"pause worker-2 — injected by \
             faults::pause, not undone\" data-test=\"faults::pause\""
        ),
        "{dom}"
    );
    assert!(dom.contains("<tr class=\"fault not_undone bad\""), "{dom}");
}

/// A test that waited for the pod lock (an `exclusive` test had the pod)
/// draws its wait apart from its bar: the bar starts when it took the lock,
/// so shared tests never seem to overlap the exclusive one they waited for.
#[test]
fn a_wait_for_the_pod_lock_is_drawn_apart_from_the_test() {
    use testkit_engine::report::{write_records, LockMode, LockRecord, TestRecord};
    let t0 = 1_767_000_000_000;
    let mut alone = TestRecord::new("r", "cluster", "faults::alone");
    (alone.started_at_ms, alone.duration_ms) = (t0, 2_000);
    alone.lock = Some(LockRecord::new(LockMode::Exclusive, t0, t0 + 2_000, 0));
    let mut after = TestRecord::new("r", "cluster", "placement::after");
    (after.started_at_ms, after.duration_ms) = (t0 + 100, 2_400);
    after.lock = Some(LockRecord::new(
        LockMode::Shared,
        t0 + 2_000,
        t0 + 2_500,
        1_900,
    ));
    let results = tempfile::tempdir().unwrap();
    write_records(results.path(), &[alone, after]).unwrap();
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let dom = render(&results.path().join("report.html"), "lockwait", "lockwait");
    assert_eq!(count(&dom, "class=\"lockwait\""), 1, "{dom}");
    assert!(
        dom.contains(
            "class=\"lockwait\" title=\"placement::after waited 1.9 s for the pod's shared lock\""
        ),
        "{dom}"
    );
    // The bar is the 500 ms the test held the lock, not its 2.4 s.
    let bar = dom
        .split("<div ")
        .find(|d| {
            d.contains("class=\"bar passed\"") && d.contains("data-test=\"placement::after\"")
        })
        .unwrap_or_else(|| panic!("no bar of placement::after: {dom}"));
    assert!(
        bar.contains("in 500 ms after 1.9 s waiting for the pod lock"),
        "{bar}"
    );
}

/// `report PART1 PART2 --out DIR`: one report.html under DIR with the
/// tests of every part (and the failure of one), while each part gets its
/// own JUnit of its own tests (one merged junit.xml is `merge`'s job).
#[test]
fn the_report_verb_merges_several_folders_into_out() {
    let record = |binary: &str, name: &str, outcome: &str| {
        format!(
            r#"{{"schema":1,"run_id":"r","binary":"{binary}","name":"{name}","description":"","file":"","line":1,"outcome":"{outcome}","failure_kind":{kind},"message":{message},"skip_reason":null,"started_at_ms":5,"duration_ms":1,"known_issue":null,"fails_with":null,"requires":[],"capabilities_missing":[],"resources":[],"cleanup":"nothing","output":""}}"#,
            kind = if outcome == "failed" {
                r#""panic""#
            } else {
                "null"
            },
            message = if outcome == "failed" {
                r#""it broke""#
            } else {
                "null"
            },
        ) + "\n"
    };
    let parts: Vec<tempfile::TempDir> = [("one", "passed"), ("two", "failed")]
        .iter()
        .map(|(binary, outcome)| {
            let part = tempfile::tempdir().unwrap();
            let dir = part.path().join("records").join(binary);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("1.jsonl"),
                record(binary, &format!("{binary}_test"), outcome),
            )
            .unwrap();
            part
        })
        .collect();
    let out = tempfile::tempdir().unwrap();
    let merged = out.path().join("merged");
    let ran = Ran::from(
        runner()
            .arg("report")
            .args(parts.iter().map(|p| p.path()))
            .arg("--out")
            .arg(&merged)
            .output()
            .unwrap(),
    );
    // Exit 0: the outputs were written (the verdict is in them).
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    let html = std::fs::read_to_string(merged.join("report.html")).unwrap();
    for test in ["one_test", "two_test"] {
        assert!(html.contains(test), "{test} is not in the merged report");
    }
    assert!(html.contains("it broke"), "the failure's message");
    assert!(html.contains(">FAILED</span>"), "the merged verdict");
    for (part, counts) in parts.iter().zip([(1, 0, 0), (1, 1, 0)]) {
        assert_eq!(junit_counts(&part.path().join("junit.xml")), counts);
        assert!(
            !part.path().join("report.html").exists(),
            "a part got a page of its own"
        );
    }
    assert!(
        ran.stdout
            .lines()
            .last()
            .is_some_and(|l| l == format!("report: {}", merged.join("report.html").display())),
        "{}",
        ran.stdout
    );
}

/// report.html's caps: a failure's log is its last 64 KB, all failures'
/// logs together 1 MB; a screenshot is inlined up to 2 MB, screenshots
/// 8 MB in all, and linked beyond. A run of many failures with big logs
/// and big screenshots still gives a page that opens.
#[test]
fn report_html_caps_logs_and_screenshots() {
    let results = tempfile::tempdir().unwrap();
    let binary = "suite-caps";
    let dir = results.path().join("records").join(binary);
    std::fs::create_dir_all(&dir).unwrap();
    let record = |name: &str, output: &str| {
        let mut v = serde_json::json!({
            "schema": 1, "run_id": "r", "binary": binary, "name": name,
            "description": "", "file": "", "line": 1, "outcome": "failed",
            "failure_kind": "panic", "message": "it broke", "skip_reason": null,
            "started_at_ms": 5, "duration_ms": 1, "known_issue": null,
            "fails_with": null, "requires": [], "capabilities_missing": [],
            "resources": [], "cleanup": "nothing", "output": "",
        });
        v["output"] = output.into();
        v.to_string() + "\n"
    };
    // The first failure's log: 200 KB between two markers.
    let big = format!(
        "HEAD-OF-THE-LOG\n{}TAIL-OF-THE-LOG\n",
        "x".repeat(200 * 1024)
    );
    let mut lines = record("a_first_big_log", &big);
    // Twenty more of 100 KB each, of one repeated line: 2 MB of logs.
    let line = "a line of a long failing log\n";
    for i in 0..20 {
        lines.push_str(&record(
            &format!("b_log_{i:02}"),
            &line.repeat(100 * 1024 / line.len()),
        ));
    }
    lines.push_str(&record("c_shots", "screenshots"));
    std::fs::write(dir.join("1.jsonl"), lines).unwrap();
    let shots = results
        .path()
        .join("artifacts")
        .join(binary)
        .join("c_shots");
    std::fs::create_dir_all(&shots).unwrap();
    // One over the per-screenshot cap, then five under it whose sum is over
    // the page's budget: four fit.
    std::fs::write(shots.join("0-huge.png"), vec![7u8; 3 * 1024 * 1024]).unwrap();
    for i in 1..=5 {
        std::fs::write(
            shots.join(format!("{i}-big.png")),
            vec![i as u8; 1900 * 1024],
        )
        .unwrap();
    }
    let ran = Ran::from(runner().arg("report").arg(results.path()).output().unwrap());
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let html = std::fs::read_to_string(results.path().join("report.html")).unwrap();
    assert!(
        html.contains("TAIL-OF-THE-LOG") && !html.contains("HEAD-OF-THE-LOG"),
        "a log is its tail"
    );
    let cut = big.len() - 64 * 1024;
    assert!(
        html.contains(&format!("The first {cut} bytes are cut")),
        "the cut is said"
    );
    let shown = html.matches("a line of a long failing log").count() * line.len();
    assert!(
        shown <= 1024 * 1024 && shown > 512 * 1024,
        "{shown} bytes of the 2 MB of logs are on the page"
    );
    assert_eq!(
        html.matches("<img class=\"screenshot\"").count(),
        4,
        "inlined screenshots"
    );
    assert_eq!(
        html.matches("too large to inline").count(),
        2,
        "linked screenshots: the huge one and the one past the budget"
    );
    assert!(
        html.contains("0-huge.png</a>") && html.contains("5-big.png</a>"),
        "the linked ones are the huge one and the last"
    );
    assert!(
        html.len() < 14 * 1024 * 1024,
        "the page is {} bytes",
        html.len()
    );
}
