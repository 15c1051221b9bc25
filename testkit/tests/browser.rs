//! The browser phase against a real `sandboxd` and a real headless Chromium:
//! evidence in the record and in JUnit, no screenshot no pass, a missing
//! browser fails with the install command, the phase turned off skips with
//! the reason, a hung teardown is killed and fails distinctly, a test
//! process killed with SIGKILL leaves no browser process behind, and a
//! traced test keeps its film frames, console and requests, credentials
//! blanked.
//!
//! The tests run the `browser` binary of the fixture suite
//! `tests/fixtures/resources-suite`, one test at a time, each with its own
//! run id and pod. Processes are found by process group, pid and start time,
//! and by the run's results folder in their environment; never by name.

#[allow(dead_code)]
#[path = "resources/support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use support::{wait_for, Run, Sandboxd};

/// Runs the fixture test `browser::<test>` under `cargo test` with `env`.
fn run_test(run: &Run, pod: &Sandboxd, test: &str, env: &[(&str, &Path)]) -> (ExitStatus, String) {
    run.finish(command(run, pod, test, env))
}

fn command(run: &Run, pod: &Sandboxd, test: &str, env: &[(&str, &Path)]) -> std::process::Command {
    let name = format!("browser::{test}");
    let mut c = run.command(pod, false, &["--test", "browser", "--", "--exact", &name]);
    c.env_remove("TESTKIT_BROWSER")
        .env_remove("TESTKIT_CHROMIUM")
        .env_remove("TESTKIT_BROWSER_TEARDOWN");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn record(run: &Run, test: &str) -> testkit_engine::report::TestRecord {
    let name = format!("browser::{test}");
    testkit_engine::report::read_records(&run.results)
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no record of {name} under {}", run.results.display()))
}

/// A Chromium that will not go: it ignores SIGTERM and, once the real
/// browser it runs has closed, sleeps on in the browser's process group.
fn stubborn_chromium(dir: &Path) -> PathBuf {
    let real = testkit_engine::process::find_program("chromium", None, None)
        .expect("these tests need Chromium: apt-get update && apt-get install -y chromium");
    let path = dir.join("stubborn-chromium");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ntrap '' TERM\n'{}' \"$@\"\nsleep 300\n",
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn kind(record: &testkit_engine::report::TestRecord) -> String {
    serde_json::to_value(record.failure_kind)
        .unwrap()
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn a_screenshot_is_in_the_artifacts_the_record_and_junit() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brshot");
    let (status, out) = run_test(&run, &pod, "opens_and_screenshots", &[]);
    assert!(status.success(), "{out}");
    let r = record(&run, "opens_and_screenshots");
    assert_eq!(r.outcome, testkit_engine::report::Outcome::Passed, "{r:#?}");
    assert_eq!(r.browsers, 1);
    assert_eq!(r.screenshots.len(), 1, "{r:#?}");
    let shot = Path::new(&r.screenshots[0]);
    assert!(
        shot.starts_with(run.results.join("artifacts")),
        "{}",
        shot.display()
    );
    let png = std::fs::read(shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000,
        "not a PNG"
    );
    // The record names the screenshot; the runner turns it into JUnit's
    // `[[ATTACHMENT|path]]` (runner/src/junit.rs tests that mapping).
    assert!(r.output.contains("ended and verified gone"), "{}", r.output);
}

#[test]
fn a_browser_test_without_a_screenshot_fails() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brnoshot");
    let (status, out) = run_test(&run, &pod, "opens_and_saves_nothing", &[]);
    assert!(!status.success(), "{out}");
    let r = record(&run, "opens_and_saves_nothing");
    assert_eq!(kind(&r), "no_screenshot", "{r:#?}");
    assert!(
        r.message
            .as_deref()
            .unwrap_or("")
            .contains("saved no screenshot"),
        "{r:#?}"
    );
    assert_eq!((r.browsers, r.screenshots.len()), (1, 0));
}

#[test]
fn a_failing_browser_test_gets_a_screenshot_and_the_console() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brfail");
    let (status, out) = run_test(&run, &pod, "fails_with_a_page_open", &[]);
    assert!(!status.success(), "{out}");
    let r = record(&run, "fails_with_a_page_open");
    assert_eq!(kind(&r), "error", "{r:#?}");
    assert!(
        r.screenshots.iter().any(|s| s.ends_with("/failure.png")),
        "{r:#?}"
    );
    // Console errors are in the test's log, and the console is saved.
    assert!(
        r.output.contains("console error: fixture says boom"),
        "{}",
        r.output
    );
    let dir = Path::new(&r.screenshots[0]).parent().unwrap().to_owned();
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap();
    assert!(console.contains("error: fixture says boom"), "{console}");
}

#[test]
fn a_traced_ui_test_keeps_frames_console_and_requests_without_credentials() {
    use testkit_engine::trace::{EntryKind, Trace};
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brfilm");
    let secrets_out = run.results.with_extension("secrets");
    let test = "traced_steps_leave_a_film";
    let (status, out) = run_test(
        &run,
        &pod,
        test,
        &[("FIXTURE_SECRETS_OUT", secrets_out.as_path())],
    );
    assert!(status.success(), "{out}");
    let r = record(&run, test);
    let path = PathBuf::from(r.trace.as_deref().expect("the record names no trace"));
    let trace = Trace::read(&path).unwrap();
    let dir = path.parent().unwrap();
    // The steps: the first navigation, the click, the second navigation,
    // each with a frame that is a JPEG beside the trace.
    let steps: Vec<_> = trace.entries.iter().filter(|e| e.frame.is_some()).collect();
    assert!(
        steps.iter().any(|e| e.title == "click #refresh") && steps.len() >= 3,
        "{trace:#?}"
    );
    for e in &steps {
        let jpeg = std::fs::read(dir.join(e.frame.as_deref().unwrap())).unwrap();
        assert!(
            jpeg.starts_with(&[0xFF, 0xD8]) && jpeg.len() > 500,
            "{}",
            e.title
        );
        assert_eq!(e.kind, EntryKind::Browser);
    }
    assert!(
        trace
            .entries
            .iter()
            .any(|e| e.kind == EntryKind::Browser && e.title == "console.log: fixture film says hi"),
        "{trace:#?}"
    );
    // The page's own requests: the page itself and its API calls.
    let requests: Vec<_> = trace
        .entries
        .iter()
        .filter_map(|e| e.http.as_ref().map(|h| (e, h)))
        .collect();
    assert!(
        requests
            .iter()
            .any(|(e, h)| h.status == Some(200) && h.url.contains("/api/") && e.ok),
        "{trace:#?}"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    for secret in std::fs::read_to_string(&secrets_out).unwrap().lines() {
        for part in secret.split(';').map(str::trim).filter(|p| p.len() >= 8) {
            let value = part.rsplit_once(['=', ' ']).map_or(part, |(_, v)| v);
            assert!(
                !text.contains(value),
                "the trace holds a credential: {value}"
            );
        }
    }
}

#[test]
fn a_missing_chromium_fails_with_the_install_command() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brmissing");
    let missing = Path::new("/nonexistent/chromium");
    let (status, out) = run_test(
        &run,
        &pod,
        "opens_and_screenshots",
        &[("TESTKIT_CHROMIUM", missing)],
    );
    assert!(!status.success(), "{out}");
    let r = record(&run, "opens_and_screenshots");
    let message = r.message.clone().unwrap_or_default();
    assert!(
        message.contains("apt-get update && apt-get install -y chromium"),
        "{message}"
    );
    assert!(message.contains("TESTKIT_CHROMIUM"), "{message}");
    assert_eq!(r.browsers, 0);
}

#[test]
fn the_phase_turned_off_skips_browser_tests_with_the_reason() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("broff");
    let (status, out) = run_test(
        &run,
        &pod,
        "opens_and_screenshots",
        &[("TESTKIT_BROWSER", Path::new("off"))],
    );
    assert!(status.success(), "{out}");
    let r = record(&run, "opens_and_screenshots");
    assert_eq!(
        r.outcome,
        testkit_engine::report::Outcome::Skipped,
        "{r:#?}"
    );
    assert_eq!(
        r.skip_reason.as_deref(),
        Some("browser tests are turned off (TESTKIT_BROWSER=off)")
    );
    assert_eq!(r.browsers, 0);
}

/// A browser that does not answer when the test's context is closed (the
/// fixture stops it): the teardown gives up at its cap and fails
/// distinctly; the process still ends the browser when its tests are done.
#[test]
fn a_hung_browser_teardown_is_killed_and_fails_distinctly() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brhung");
    let (status, out) = run_test(
        &run,
        &pod,
        "freezes_its_browser",
        &[("TESTKIT_BROWSER_TEARDOWN", Path::new("2s"))],
    );
    // `finish` has checked that no process of the run is left.
    assert!(!status.success(), "{out}");
    let r = record(&run, "freezes_its_browser");
    assert_eq!(kind(&r), "browser_teardown", "{r:#?}");
    assert!(r.browser_teardown_timed_out);
    let message = r.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("browser teardown timed out"),
        "{message}"
    );
    assert!(message.contains("verified gone"), "{message}");
    // The body passed and its evidence is kept.
    assert_eq!(r.screenshots.len(), 1, "{r:#?}");
}

/// Runs the fixture tests matching `filter` in one `cargo test` process,
/// two at a time, with `BROWSER_FIXTURE_OUT` a folder of `out`.
fn run_together(run: &Run, pod: &Sandboxd, filter: &str, out: &Path) -> (ExitStatus, String) {
    let mut c = run.command(
        pod,
        false,
        &["--test", "browser", "--", filter, "--test-threads", "2"],
    );
    c.env_remove("TESTKIT_BROWSER")
        .env_remove("TESTKIT_CHROMIUM")
        .env_remove("TESTKIT_BROWSER_TEARDOWN")
        .env("BROWSER_FIXTURE_OUT", out);
    run.finish(c)
}

fn pid_in(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Two UI tests running at once share one browser (the same pid), each
/// in a context of its own: neither sees the other's cookie. The browser
/// ends with the process (`finish` checks that none of the run is left).
#[test]
fn two_ui_tests_share_one_browser_with_cookies_of_their_own() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brshare");
    let dir = tempfile::tempdir().unwrap();
    let (status, out) = run_together(&run, &pod, "shares_", dir.path());
    assert!(status.success(), "{out}");
    let (a, b) = (pid_in(&dir.path().join("a")), pid_in(&dir.path().join("b")));
    assert_eq!(a, b, "one browser for both tests");
    for test in ["shares_a", "shares_b"] {
        let r = record(&run, test);
        assert_eq!(r.browsers, 1, "{r:#?}");
        assert_eq!(r.screenshots.len(), 1, "{r:#?}");
    }
}

/// A browser SIGKILLed mid-test fails the test that was using it, and the
/// next test to need one gets a new browser (another pid), and passes.
#[test]
fn a_crashed_browser_fails_only_its_test_and_the_next_gets_a_new_one() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brcrash");
    let dir = tempfile::tempdir().unwrap();
    let (status, out) = run_together(&run, &pod, "crash_", dir.path());
    assert!(!status.success(), "{out}");
    let crashed = record(&run, "crash_kills_its_browser");
    assert!(
        crashed
            .message
            .as_deref()
            .is_some_and(|m| m.contains("closed its DevTools connection")),
        "{crashed:#?}"
    );
    let next = record(&run, "crash_then_a_new_browser");
    assert_eq!(
        serde_json::to_value(next.outcome).unwrap(),
        "passed",
        "{next:#?}"
    );
    let (killed, new) = (
        pid_in(&dir.path().join("killed")),
        pid_in(&dir.path().join("new")),
    );
    assert_ne!(killed, new, "the next test got a new browser");
}

/// A browser found running that does not answer (one dying: killed a
/// moment ago, its process not yet gone) is not shared: it is ended, and
/// the test gets a browser started again, and passes.
#[test]
fn a_browser_found_running_that_does_not_answer_is_ended_and_another_started() {
    use std::os::unix::process::CommandExt as _;
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brdying");
    // The run's browser is the runner's: its record is where this test
    // can plant one.
    testkit_engine::browser::announce(&run.results).unwrap();
    let dir = testkit_engine::browser::dir(&run.results);
    // The dying browser: a live process in a group of its own, its
    // DevTools port closed.
    /// Ends and reaps the stand-in however the test ends.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut dying = Reaped(
        std::process::Command::new("sleep")
            .arg("120")
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let pid = dying.0.id() as i32;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let profile = tempfile::tempdir().unwrap();
    let planted = serde_json::json!({
        "pid": pid,
        "start_ticks": testkit_engine::process::start_ticks(pid),
        "ws_url": format!("ws://127.0.0.1:{port}/devtools/browser/dying"),
        "profile": profile.path(),
        "number": 1,
    });
    std::fs::write(
        testkit_engine::browser::record_file(&dir),
        planted.to_string(),
    )
    .unwrap();
    // To a file, not a pipe: the browser the test starts is the run's and
    // outlives the test process, holding what it inherited open.
    let said_file = run.results.join("said.txt");
    let mut child = command(&run, &pod, "opens_and_screenshots", &[])
        .stdout(std::fs::File::create(&said_file).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    let status = child.wait().unwrap();
    let ended = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(testkit_engine::browser::end(
            &dir,
            &run.id,
            Duration::from_secs(3),
        ));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut gone = false;
    while !gone && std::time::Instant::now() < deadline {
        gone = dying.0.try_wait().is_ok_and(|s| s.is_some());
        std::thread::sleep(Duration::from_millis(50));
    }
    run.assert_no_strays(Some(pgid));
    let said = std::fs::read_to_string(&said_file).unwrap_or_default();
    assert!(status.success(), "{said}");
    assert!(ended.is_ok(), "{ended:?}");
    assert!(gone, "the dying browser (pid {pid}) was not ended");
    let r = record(&run, "opens_and_screenshots");
    assert!(
        r.output
            .contains("failed to connect to the run's browser 1")
            && r.output.contains(": starting another")
            && r.output.contains("started the run's Chromium 2"),
        "{r:#?}"
    );
}

#[test]
fn no_browser_process_outlives_a_test_process_killed_with_sigkill() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("brkill");
    let dir = tempfile::tempdir().unwrap();
    // A browser that ignores SIGTERM and survives its pipe closing: only
    // the reaper's SIGKILL ends it.
    let stubborn = stubborn_chromium(dir.path());
    let ready = dir.path().join("ready");
    let child = command(
        &run,
        &pod,
        "holds_a_browser_until_killed",
        &[
            ("TESTKIT_CHROMIUM", &stubborn),
            ("BROWSER_FIXTURE_READY", &ready),
        ],
    )
    .spawn()
    .unwrap();
    wait_for(
        "the fixture to hold a browser",
        Duration::from_secs(180),
        || ready.exists(),
    );
    let pid: i32 = std::fs::read_to_string(&ready).unwrap().parse().unwrap();
    let journal = run.results.join("journal");
    let groups = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "groups"))
        .unwrap_or_else(|| panic!("no groups journal in {}", journal.display()));
    let entry: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&groups)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let pgid = entry["pgid"].as_i64().unwrap() as i32;
    let tree = testkit_engine::process::tree_of(pgid);
    assert!(tree.len() > 1, "the browser's group holds {tree:?}");
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    wait_for(
        "every process of the browser to be gone",
        Duration::from_secs(10),
        || {
            testkit_engine::process::group_members(pgid).is_empty()
                && tree
                    .iter()
                    .all(|(p, t)| !testkit_engine::process::is_alive(*p, Some(*t)))
        },
    );
    // The reaper ended them: it says so once it has verified them gone.
    let reaper_log = groups.with_extension("reaper.log");
    let said = format!("ended Chromium of test process {pid} (process group {pgid}");
    wait_for(
        "the reaper to report the browser",
        Duration::from_secs(20),
        || std::fs::read_to_string(&reaper_log).is_ok_and(|log| log.contains(&said)),
    );
    let cargo = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    run.assert_no_strays(Some(cargo));
}
