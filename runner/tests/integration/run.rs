//! `testkit-runner run` end to end.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, junit_counts, runner, runner_at, wait_for, CallerPod, Ran};

fn assert_phases(ran: &Ran, expected: &[(&str, &str)]) {
    let verdicts = ran.verdicts();
    let got: Vec<(String, String)> = verdicts
        .iter()
        .map(|v| {
            (
                v["phase"].as_str().unwrap().to_owned(),
                v["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(got, want, "verdict.jsonl: {verdicts:#?}");
}

/// A green run from a runner binary that has no `sandboxd` beside it or on
/// PATH (as after a bare `cargo run -p testkit-runner`): it builds the pod,
/// boots it, runs the suite, finds nothing left, stops the pod, exits 0.
#[test]
fn green_run_builds_the_default_pod_and_verifies_every_phase() {
    let suite = fixture("suite");
    // A runner alone in a folder, with a PATH that has no sandboxd.
    let bin = tempfile::tempdir().unwrap();
    let exe = bin.path().join("testkit-runner");
    std::fs::copy(crate::RUNNER, &exe).unwrap();
    let mut cmd = runner_at(&exe);
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let ran = Ran::from(cmd.arg("run").arg(suite.path()).output().unwrap());
    assert!(
        ran.stderr.contains("cargo build -p sandboxd"),
        "it said it builds sandboxd"
    );
    assert_eq!(ran.code, 0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("run id: ") && lines[1].starts_with("results: "),
        "{lines:?}"
    );
    let run_id = ran.run_id();
    assert_eq!(run_id.len(), 10);
    assert_phases(
        &ran,
        &[
            ("up", "pass"),
            ("health", "pass"),
            ("auth", "pass"),
            ("tests", "pass"),
            ("residue", "pass"),
            ("down", "pass"),
            ("run", "pass"),
        ],
    );
    let last = ran.verdicts().pop().unwrap();
    assert_eq!(last["exit_code"], 0);
    for v in ran.verdicts() {
        assert!(v["at"].as_u64().unwrap() > 0);
    }
    let (_, tests) = ran.verdict("tests");
    assert!(
        tests.contains("4 passed, 0 failed, 1 skipped, 1 expected failures, 0 unexpected passes"),
        "{tests}"
    );
    let (_, down) = ran.verdict("down");
    assert!(down.contains("verified gone"), "{down}");
    // The summary, printed and as Markdown.
    assert!(ran.stdout.contains("PASSED"), "{}", ran.stdout);
    assert!(ran.stdout.contains("known issue FIX-1"), "{}", ran.stdout);
    assert!(ran.stdout.contains("leaks: none"));
    let results = ran.results();
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(
        md.contains("| tests | pass |") && md.contains("## Known issues"),
        "{md}"
    );
    assert_eq!(junit_counts(&results.join("junit.xml")), (6, 0, 2));
    // The results folder says where the pod was, never how to get in: its
    // handle there is redacted, and the live one (in the run's secrets dir,
    // with the tests' session) is gone with the run. The caller-pod test
    // below greps every file for a token it knows.
    let handle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("pod/handle.json")).unwrap())
            .unwrap();
    assert_eq!(handle["token"], "[REDACTED]", "{handle}");
    assert!(handle["base_url"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    let secrets = testkit_engine::run::secrets_dir(
        &testkit_engine::settings::Settings::from_env().unwrap(),
        &ran.run_id(),
    );
    assert!(!secrets.exists(), "{} outlived the run", secrets.display());
    assert!(!results.join("pod/session.json").exists());
}

/// A failing test fails the run (exit 1) and is named in the summary.
#[test]
fn a_failing_test_fails_the_run_and_is_named() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .env("FIXTURE_MODE", "fail")
            .arg("run")
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail");
    assert!(evidence.contains("3 passed, 1 failed"), "{evidence}");
    assert_eq!(ran.verdict("residue").0, "pass");
    assert_eq!(ran.verdict("down").0, "pass");
    assert!(
        ran.stdout.contains("fails_when_asked") && ran.stdout.contains("the widget count was 3"),
        "{}",
        ran.stdout
    );
    assert_eq!(junit_counts(&ran.results().join("junit.xml")), (6, 1, 2));
}

/// A sandbox planted behind the framework's back is found by the residue
/// sweep, named, deleted (the caller's pod lists nothing of the run after),
/// and fails the run; the caller's pod is left running.
#[test]
fn a_planted_leak_is_found_named_deleted_and_fails_the_run_on_a_callers_pod() {
    let suite = fixture("suite");
    let mut pod = CallerPod::start();
    let ran = Ran::from(
        runner()
            .env("FIXTURE_MODE", "leak")
            .arg("run")
            .arg(suite.path())
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1);
    let run_id = ran.run_id();
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains(&format!("`ct-{run_id}-")) && evidence.contains("deleted, verified gone"),
        "{evidence}"
    );
    assert!(ran.stdout.contains("LEAK: sandbox `ct-"), "{}", ran.stdout);
    assert_eq!(ran.verdict("tests").0, "pass");
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "skip");
    assert!(why.contains("caller"), "{why}");
    // Deleted for real, and the pod still serves.
    assert!(pod.alive(), "the caller's pod was stopped");
    let (status, body) = pod.get(&format!("/api/sandboxes?prefix=ct-{run_id}-"));
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{body}");
    assert_eq!(
        crate::http("GET", &pod.url("/api/health"), None, None).0,
        200
    );
    // The caller's pod keeps running, and its credentials stayed out of the
    // results folder (CI uploads it): the handle there is redacted, the
    // session lived in the run's private folder, gone with the run.
    let token = pod.handle["token"].as_str().unwrap().to_owned();
    let shown = std::fs::read_to_string(ran.results().join("pod/handle.json")).unwrap();
    assert!(
        shown.contains("[REDACTED]") && !shown.contains(&token),
        "{shown}"
    );
    let mut stack = vec![ran.results()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&token),
                    "{} holds the live token",
                    path.display()
                );
                assert!(
                    !path.ends_with("session.json"),
                    "{} is a session in the results folder",
                    path.display()
                );
            }
        }
    }
    let secrets = testkit_engine::run::secrets_dir(
        &testkit_engine::settings::Settings::from_env().unwrap(),
        &run_id,
    );
    assert!(!secrets.exists(), "{} outlived the run", secrets.display());
}

/// A pod that prints its handle but never answers health: exit 2, logs kept,
/// nothing left running.
#[test]
fn a_pod_that_never_becomes_healthy_is_exit_2_with_logs_kept() {
    let suite = fixture("suite");
    let config = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("pid");
    let pod = r#"
[pod]
command = ["sh", "-c", "echo booting; echo $$ > PIDFILE; echo '{\"name\":\"never\",\"base_url\":\"http://127.0.0.1:{port}\",\"port\":{port},\"token\":\"never-healthy-token-0123456789\"}'; exec sleep 600"]
inactivity_timeout = "2s"
ceiling = "5s"
"#
    .replace("PIDFILE", &pid_file.display().to_string());
    std::fs::write(&config, format!("{text}\n{pod}")).unwrap();
    let ran = Ran::from(runner().arg("run").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 2);
    // The pod that never answered (its `sleep 600`) was ended with the run.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ended = wait_for(Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
    });
    if !ended {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(ended, "the pod's sleep 600 (pid {pid}) outlived the run");
    assert_phases(
        &ran,
        &[
            ("up", "fail"),
            ("health", "skip"),
            ("auth", "skip"),
            ("tests", "skip"),
            ("residue", "skip"),
            ("down", "skip"),
            ("run", "fail"),
        ],
    );
    let (_, evidence) = ran.verdict("up");
    assert!(
        evidence.contains("not up after") && evidence.contains("logs kept"),
        "{evidence}"
    );
    let logs = ran.results().join("pod/logs");
    let stdout = std::fs::read_to_string(logs.join("pod.stdout.log")).unwrap();
    assert!(stdout.contains("booting"), "{stdout}");
    assert!(
        !stdout.contains("never-healthy-token-0123456789"),
        "the token was redacted: {stdout}"
    );
    assert!(ran.stdout.contains("INCOMPLETE"));
}

/// A handle with a bad field: exit 64 naming the field, before anything starts.
#[test]
fn a_bad_handle_is_exit_64_naming_the_field() {
    let suite = fixture("suite");
    let handle = suite.path().join("bad-handle.json");
    std::fs::write(
        &handle,
        r#"{"name":"x","base_url":"http://127.0.0.1:9","port":"eighty","token":"abc"}"#,
    )
    .unwrap();
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .arg("--handle-json")
            .arg(&handle)
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64);
    assert!(ran.stderr.contains("`port`"), "{}", ran.stderr);
    assert!(!ran.stderr.contains("abc\""), "{}", ran.stderr);
    assert!(!ran.stdout.contains("results: "), "nothing started");
}

/// A nextest archive built in one place, moved to another folder, and run
/// from there against the suite's sources elsewhere.
#[test]
fn a_moved_nextest_archive_runs_with_archive_file() {
    let built = fixture("suite");
    let archive = built.path().join("suite.tar.zst");
    let status = crate::fixture_cargo()
        .args(["nextest", "archive", "--workspace", "--archive-file"])
        .arg(&archive)
        .current_dir(built.path())
        .status()
        .unwrap();
    assert!(status.success());
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join("moved.tar.zst");
    std::fs::rename(&archive, &moved).unwrap();
    let sources = fixture("suite");
    drop(built);
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(sources.path())
            .arg("--archive-file")
            .arg(&moved)
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0);
    let (_, evidence) = ran.verdict("tests");
    assert!(
        evidence.contains("4 passed, 0 failed, 1 skipped, 1 expected failures")
            && evidence.contains("nextest archive"),
        "{evidence}"
    );
    assert!(
        !ran.results().join("build.log").exists()
            || !std::fs::read_to_string(ran.results().join("build.log"))
                .unwrap()
                .contains("Compiling")
    );
}

/// Two partitions run separately and merged give the counts of the whole.
#[test]
fn two_partitions_merge_into_the_counts_of_the_whole_run() {
    let suite = fixture("suite");
    let whole = Ran::from(runner().arg("run").arg(suite.path()).output().unwrap());
    assert_eq!(whole.code, 0);
    // The runner built each binary's JUnit and the run's; `report` rebuilds
    // the same from the records alone, as after a plain nextest run.
    let junit_dir = whole.results().join("junit");
    let binaries = std::fs::read_dir(&junit_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", junit_dir.display()))
        .count();
    assert!(
        binaries > 0,
        "no JUnit file per binary in {}",
        junit_dir.display()
    );
    let copy = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(whole.results().join("records"))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let reported = Ran::from(runner().arg("report").arg(copy.path()).output().unwrap());
    assert_eq!(reported.code, 0, "{}", reported.stderr);
    assert_eq!(
        junit_counts(&copy.path().join("junit.xml")),
        junit_counts(&whole.results().join("junit.xml"))
    );
    assert_eq!(
        std::fs::read_dir(copy.path().join("junit"))
            .unwrap()
            .count(),
        binaries
    );
    let mut shards = Vec::new();
    for k in ["1/2", "2/2"] {
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .args(["--partition", k])
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, 0, "shard {k}");
        shards.push(ran.results());
    }
    let a = junit_counts(&shards[0].join("junit.xml"));
    let b = junit_counts(&shards[1].join("junit.xml"));
    assert!(a.0 > 0 && b.0 > 0, "each shard ran tests: {a:?} {b:?}");
    let out = tempfile::tempdir().unwrap();
    let merged = Ran::from(
        runner()
            .arg("merge")
            .arg(out.path())
            .args(&shards)
            .output()
            .unwrap(),
    );
    assert_eq!(merged.code, 0);
    assert_eq!(
        junit_counts(&out.path().join("junit.xml")),
        junit_counts(&whole.results().join("junit.xml"))
    );
}

/// `--keep` leaves the pod running and says how to reach and stop it.
#[test]
fn keep_leaves_the_pod_running_and_says_how_to_stop_it() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["--keep", "-E", "test(capabilities)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0);
    let (verdict, _) = ran.verdict("down");
    assert_eq!(verdict, "skip");
    let pgid: i32 = ran
        .stdout
        .split("process group ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no process group in {}", ran.stdout));
    assert!(ran.stdout.contains("kill -TERM -- -"), "{}", ran.stdout);
    let handle: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ran.results().join("pod/handle.json")).unwrap(),
    )
    .unwrap();
    let health = format!("{}/api/health", handle["base_url"].as_str().unwrap());
    let alive = crate::http("GET", &health, None, None).0;
    let _ = nix::sys::signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    // `pod ls` lists the kept pod: `pod down` reclaims its private dir.
    let name = handle["name"].as_str().unwrap();
    let down = Ran::from(runner().args(["pod", "down", name]).output().unwrap());
    assert_eq!(alive, 200, "the kept pod answers");
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert_eq!(ran.verdict("tests").0, "pass");
    // A kept pod keeps the run's credentials to reach it; gone with it.
    let secrets = testkit_engine::run::secrets_dir(
        &testkit_engine::settings::Settings::from_env().unwrap(),
        &ran.run_id(),
    );
    assert!(
        secrets.join("handle.json").is_file(),
        "the kept pod cannot be reached"
    );
    std::fs::remove_dir_all(&secrets).unwrap();
}

/// Ctrl-C during the tests: the tests stop, cleanup and the residue sweep
/// run, the pod goes down, exit 130.
#[test]
fn ctrl_c_stops_the_tests_cleans_up_and_tears_down() {
    let suite = fixture("suite");
    let flag = suite.path().join("running.flag");
    let child = runner()
        .env("FIXTURE_MODE", "slow")
        .env("FIXTURE_FLAG", &flag)
        .arg("run")
        .arg(suite.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    let started = wait_for(Duration::from_secs(240), || flag.exists());
    if !started {
        let _ = kill(pid, Signal::SIGKILL);
    }
    assert!(started, "the slow test started");
    kill(pid, Signal::SIGINT).unwrap();
    let ran = Ran::from(child.wait_with_output().unwrap());
    assert_eq!(ran.code, 130);
    assert_eq!(ran.verdict("tests").0, "fail");
    let (residue, evidence) = ran.verdict("residue");
    assert_eq!(residue, "pass", "cleanup ran before the sweep: {evidence}");
    assert_eq!(ran.verdict("down").0, "pass");
    assert!(ran.stdout.contains("INTERRUPTED"));
}

/// SIGUSR1 to the runner while a test is in its body: the runner prints
/// what each test is doing (the hang report, on demand), and nothing
/// stops: the run goes on and is green.
#[test]
fn sigusr1_reports_what_the_running_tests_are_doing_and_stops_nothing() {
    let suite = fixture("suite");
    let flag = suite.path().join("holding.flag");
    let stderr = suite.path().join("runner.stderr");
    let child = runner()
        .env("FIXTURE_MODE", "hold")
        .env("FIXTURE_FLAG", &flag)
        .arg("run")
        .arg(suite.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    let holding = wait_for(Duration::from_secs(240), || flag.exists());
    if !holding {
        let _ = kill(pid, Signal::SIGKILL);
    }
    assert!(holding, "the holding test started");
    kill(pid, Signal::SIGUSR1).unwrap();
    let said = || std::fs::read_to_string(&stderr).unwrap_or_default();
    let answered = wait_for(Duration::from_secs(30), || {
        said().contains("test sandboxes::create_two:")
    });
    // Let the test end whatever the answer was.
    std::fs::write(format!("{}.go", flag.display()), "").unwrap();
    let ran = Ran::from(child.wait_with_output().unwrap());
    let said = said();
    assert!(answered, "no report of the holding test on stderr:\n{said}");
    assert!(
        said.contains("testkit-runner: SIGUSR1: what the tests are doing (")
            && said
                .contains("test sandboxes::create_two:\n  when asked it had been in its body for ")
            // The pod once per answer, after the tests: however many
            // tests are in their bodies, the engine is asked once.
            && said.contains("\nthe pod:\n  node pod (process group ")
            && said.matches("node pod (process group ").count() == 1
            && said.contains("): running; its last 20 lines:"),
        "{said}"
    );
    assert_eq!(ran.code, 0, "SIGUSR1 stopped nothing: {}", ran.stdout);
    assert_eq!(ran.verdict("tests").0, "pass");
    assert!(
        !ran.results().join("status").exists(),
        "the answers, printed, are not left in the results"
    );
}

/// The conformance suite, the README's first command, is green.
#[test]
fn the_conformance_suite_is_green() {
    let suite = crate::workspace().join("suites/conformance");
    let ran = Ran::from(runner().arg("run").arg(&suite).output().unwrap());
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert_eq!(ran.verdict("residue").0, "pass");
    assert_eq!(ran.verdict("down").0, "pass");
    // Green because its tests ran and passed, not because they all skipped.
    let records = testkit_engine::report::read_records(&ran.results()).unwrap();
    let count = |outcome| records.iter().filter(|r| r.outcome == outcome).count();
    let passed = count(testkit_engine::report::Outcome::Passed);
    let skipped: Vec<&str> = records
        .iter()
        .filter(|r| r.outcome == testkit_engine::report::Outcome::Skipped)
        .map(|r| r.name.as_str())
        .collect();
    assert!(passed >= 60, "only {passed} conformance tests passed");
    assert!(skipped.is_empty(), "conformance tests skipped: {skipped:?}");
}

/// Against a pod with a reproducible product bug (exec drops the per-call
/// env), the conformance suite's exec-env test fails the way a product bug
/// should: named, with a message a person understands, and the run red.
#[test]
fn the_conformance_suite_catches_a_pod_that_drops_the_exec_env() {
    let suite = crate::workspace().join("suites/conformance");
    let mut pod = CallerPod::start_with(&["--fault", "drop-exec-env"]);
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(&suite)
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .args(["-E", "test(exec_sees_per_call_env)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("exec_sees_per_call_env"),
        "{}",
        ran.stdout
    );
    let records = testkit_engine::report::read_records(&ran.results()).unwrap();
    let record = records
        .iter()
        .find(|r| r.name.ends_with("::exec_sees_per_call_env"))
        .expect("a record of the exec-env test");
    assert_eq!(record.outcome, testkit_engine::report::Outcome::Failed);
    let message = record.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("exec ignored the per-call env: expected GREETING=hello"),
        "{message}"
    );
    assert_eq!(ran.verdict("residue").0, "pass");
    assert!(pod.alive(), "the caller's pod was stopped");
}

/// Under `cargo test` the counts are the same, from the same records.
#[test]
fn cargo_test_engine_counts_from_the_records() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["--runner", "cargo-test"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0);
    let (_, evidence) = ran.verdict("tests");
    assert!(
        evidence.contains("4 passed, 0 failed, 1 skipped, 1 expected failures")
            && evidence.contains("cargo test"),
        "{evidence}"
    );
}

/// A suite that does not build: exit 2, the compiler's output kept, the pod
/// still torn down.
#[test]
fn a_build_failure_is_exit_2_with_the_compiler_output_kept() {
    let suite = fixture("suite");
    let file = suite.path().join("tests/basics.rs");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!("{text}\nfn broken() -> u32 {{ \"not a number\" }}\n"),
    )
    .unwrap();
    // The other tests build their copies of this fixture, under the same
    // package name, in the same target dir: one finishing after the write
    // above would leave a binary newer than it, which cargo takes as fresh.
    // A source file from the future is always newer than any binary.
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + Duration::from_secs(24 * 3600))
        .unwrap();
    let ran = Ran::from(runner().arg("run").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 2);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains("did not build") && evidence.contains("build.log"),
        "{evidence}"
    );
    let log = std::fs::read_to_string(ran.results().join("build.log")).unwrap();
    assert!(log.contains("mismatched types"), "{log}");
    assert_eq!(ran.verdict("down").0, "pass");
    // No test judged the product: the suite's own code failed.
    let tests = ran
        .verdicts()
        .into_iter()
        .find(|v| v["phase"] == "tests")
        .unwrap();
    assert_eq!(tests["category"], "testkit", "{tests}");
}
