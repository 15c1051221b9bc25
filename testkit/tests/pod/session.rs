//! Test processes against a real pod: the session outlives the token window
//! across processes, capability skips, skip without a pod, the CLI, and no
//! token anywhere in what a run writes or prints.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit_engine::pod::launch;

use crate::support::*;

struct Ran {
    code: Option<i32>,
    output: String,
}

fn run_fixture(handle: Option<&Path>, results: &Path, args: &[&str], envs: &[(&str, &str)]) -> Ran {
    // The results folder is the suite too (one without a testkit.toml): a
    // suite dir must be a folder that is there.
    std::fs::create_dir_all(results).unwrap();
    let mut cmd = Command::new(fixture());
    cmd.args(args)
        .env_remove("TESTKIT_POD_HANDLE")
        .env("TESTKIT_RESULTS_DIR", results)
        .env("TESTKIT_RUN_ID", "podtest")
        .env("TESTKIT_CLI", sandboxctl())
        .env("TESTKIT_SUITE_DIR", results)
        // The run's credentials, beside its results folder (never in it).
        .env("TESTKIT_SECRETS_DIR", secrets_of(results));
    if let Some(h) = handle {
        cmd.env("TESTKIT_POD_HANDLE", h);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Ran {
        code: out.status.code(),
        output: String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr),
    }
}

/// A sandboxd launched as a pod, logging under `work`, and its handle
/// written to `work/handle.json`.
fn launch_with_handle_file(
    rt: &tokio::runtime::Runtime,
    work: &Path,
) -> (testkit_engine::pod::LaunchedPod, std::path::PathBuf) {
    let launched = rt
        .block_on(launch(&sandboxd_spec(&work.join("pod-logs"), &[])))
        .unwrap();
    let handle_path = work.join("handle.json");
    launched.handle.write_file(&handle_path).unwrap();
    (launched, handle_path)
}

fn secrets_of(results: &Path) -> std::path::PathBuf {
    let name = results.file_name().unwrap().to_string_lossy();
    results.with_file_name(format!("{name}.secrets"))
}

fn record(results: &Path, test: &str) -> serde_json::Value {
    let name = format!("pod_fixture::{test}");
    let record = testkit_engine::report::read_records(results)
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no record of {name} under {}", results.display()));
    serde_json::to_value(record).unwrap()
}

#[test]
fn without_a_pod_tests_skip_with_one_reason_and_the_run_passes() {
    let results = tempfile::tempdir().unwrap();
    let ran = run_fixture(None, results.path(), &[], &[]);
    assert_eq!(ran.code, Some(0), "{}", ran.output);
    let reason = testkit_engine::pod::NO_POD_REASON;
    for test in [
        "uses_pod_and_leaks_token",
        "needs_exec",
        "needs_teleport",
        "requires_exec_only",
        "runs_the_cli",
    ] {
        let r = record(results.path(), test);
        assert_eq!(r["outcome"], "skipped", "{test}: {r}");
        assert_eq!(r["skip_reason"], reason, "{test}");
    }
}

#[test]
fn a_configured_but_invalid_pod_fails_the_tests_that_require_it() {
    let results = tempfile::tempdir().unwrap();
    // The port disagrees with the base URL: the handle does not validate.
    let handle = results.path().join("bad-handle.json");
    std::fs::write(
        &handle,
        r#"{"name":"p","base_url":"http://127.0.0.1:4000","port":4001,"token":"t0ken"}"#,
    )
    .unwrap();
    let ran = run_fixture(
        Some(&handle),
        results.path(),
        &["--exact", "pod_fixture::requires_exec_only"],
        &[],
    );
    assert_eq!(ran.code, Some(101), "{}", ran.output);
    let r = record(results.path(), "requires_exec_only");
    assert_eq!(r["outcome"], "failed", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("requires exec") && message.contains("`port`"),
        "{message}"
    );
}

#[test]
fn the_pod_is_loaded_only_by_tests_that_use_it_and_an_unusable_one_fails_them() {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    fixture();
    // A well-formed handle of a pod that is gone: configured, but unusable.
    let rt = runtime();
    let (launched, handle_path) = launch_with_handle_file(&rt, work.path());
    let stopped = rt.block_on(launched.stop(Duration::from_secs(10))).unwrap();
    assert!(!stopped.removed.exists());

    // A test that never touches the pod passes and the process never reads
    // the handle nor opens a session (no `<results>/pod`).
    let quiet = run_fixture(
        Some(&handle_path),
        &results,
        &["--exact", "pod_fixture::touches_nothing"],
        &[],
    );
    assert_eq!(quiet.code, Some(0), "{}", quiet.output);
    assert_eq!(record(&results, "touches_nothing")["outcome"], "passed");
    // The secrets dir holds the run's pod lock, which every test takes;
    // connecting would have taken `session.lock` beside it.
    let held: Vec<String> = std::fs::read_dir(secrets_of(&results))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        held.iter().all(|f| f == "pod.lock" || f == "pod.turnstile"),
        "a process whose tests never touch the pod opened a session: {held:?}"
    );

    // Tests that use it, or require a capability of it, fail with the reason.
    let used = run_fixture(Some(&handle_path), &results, &[], &[]);
    assert_eq!(used.code, Some(101), "{}", used.output);
    // What the quiet process was checked for leaving: a connect does.
    assert!(
        secrets_of(&results).join("session.lock").exists(),
        "connecting takes the session lock in the secrets dir"
    );
    for test in [
        "uses_pod_and_leaks_token",
        "panics_with_token",
        "needs_exec",
        "needs_teleport",
        "runs_the_cli",
    ] {
        let r = record(&results, test);
        assert_eq!(r["outcome"], "failed", "{test}: {r}");
    }
    let exec = record(&results, "needs_exec");
    assert!(
        exec["message"]
            .as_str()
            .unwrap()
            .contains("the pod is unusable"),
        "{exec}"
    );
    assert_eq!(record(&results, "touches_nothing")["outcome"], "passed");
}

#[test]
fn session_outlives_the_token_window_across_processes_and_nothing_leaks() {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    // Build everything first: the token window starts with the pod.
    fixture();
    sandboxctl();
    let rt = runtime();
    let mut pod = Guard(Some(
        rt.block_on(launch(&sandboxd_spec(
            &results.join("pod-logs"),
            &["--token-window", "4s"],
        )))
        .unwrap(),
    ));
    let launched = pod.0.as_ref().unwrap();
    let token = launched.handle.token().to_owned();
    let handle_path = work.path().join("handle.json");
    launched.handle.write_file(&handle_path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&handle_path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // The first process exchanges the token and hands the session on.
    let first = run_fixture(Some(&handle_path), &results, &[], &[]);
    assert_eq!(first.code, Some(0), "{}", first.output);
    assert_eq!(record(&results, "runs_the_cli")["outcome"], "passed");
    assert!(
        first.output.contains("stdout token: [REDACTED]"),
        "{}",
        first.output
    );
    assert!(
        first.output.contains("stderr token: [REDACTED]"),
        "{}",
        first.output
    );

    // Wait (bounded) until the pod really refuses the token.
    let client = reqwest::Client::new();
    let url = format!("{}/api/capabilities", launched.handle.base_url());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = rt
            .block_on(client.get(&url).bearer_auth(&token).send())
            .unwrap()
            .status();
        if status == 401 {
            break;
        }
        assert!(Instant::now() < deadline, "the token window never closed");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Later processes (as under nextest) reuse the session: everything
    // works, the CLI too (it gets the session's cookie, not only the token).
    let later = run_fixture(Some(&handle_path), &results, &[], &[]);
    assert_eq!(later.code, Some(0), "{}", later.output);
    assert!(
        later
            .output
            .lines()
            .any(|l| l.starts_with("test pod_fixture::runs_the_cli ") && l.ends_with("... ok")),
        "{}",
        later.output
    );
    assert_eq!(
        record(&results, "uses_pod_and_leaks_token")["outcome"],
        "passed"
    );
    assert_eq!(record(&results, "needs_exec")["outcome"], "passed");
    let teleport = record(&results, "needs_teleport");
    assert_eq!(teleport["outcome"], "skipped");
    let caps = "exec, files, processes, signals";
    assert_eq!(
        teleport["skip_reason"],
        format!(
            "the pod `{}` lacks required capability `teleport` (it advertises: {caps})",
            launched.handle.name()
        )
    );
    assert_eq!(
        teleport["capabilities_missing"],
        serde_json::json!(["teleport"])
    );

    // Failures and panics that carry the token leak nothing either.
    let failing = run_fixture(
        Some(&handle_path),
        &results,
        &["--skip", "runs_the_cli"],
        &[("FIXTURE_FAIL", "1")],
    );
    assert_eq!(failing.code, Some(101), "{}", failing.output);
    assert!(
        failing
            .output
            .contains("failing on purpose with [REDACTED]"),
        "{}",
        failing.output
    );
    assert!(
        failing.output.contains("panicking with [REDACTED]"),
        "{}",
        failing.output
    );

    // A process without the handed-on session cannot get in any more.
    let fresh = work.path().join("fresh-results");
    let lost = run_fixture(
        Some(&handle_path),
        &fresh,
        &["--exact", "pod_fixture::uses_pod_and_leaks_token"],
        &[],
    );
    assert_ne!(lost.code, Some(0), "{}", lost.output);
    assert!(
        lost.output.contains("refused the credentials") && lost.output.contains("session.json"),
        "{}",
        lost.output
    );

    // Stop the pod so its logs land in the results, then grep everything.
    let stopped = rt
        .block_on(pod.0.take().unwrap().stop(Duration::from_secs(10)))
        .unwrap();
    assert!(!stopped.removed.exists());
    let files = files(&results);
    assert!(
        files.iter().any(|f| f.ends_with("pod.stdout.log")),
        "{files:?}"
    );
    assert!(
        files.iter().any(|f| f.ends_with("artifact.txt")),
        "{files:?}"
    );
    for f in files.iter().chain(crate::support::files(&fresh).iter()) {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(
            !text.contains(&token),
            "the token leaked into {}",
            f.display()
        );
    }
    for ran in [&first, &later, &failing, &lost] {
        assert!(
            !ran.output.contains(&token),
            "the token leaked into output:\n{}",
            ran.output
        );
    }
}

/// A plain `cargo test` binary is its run alone (it made the run id): it
/// removes the run's secrets dir (the session) at its end. A run that other
/// processes share (`TESTKIT_RUN_ID`, nextest) keeps it for them.
#[test]
fn a_test_process_that_is_its_run_alone_removes_the_session_at_its_end() {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    let runtime_dir = work.path().join("runtime");
    std::fs::create_dir(&runtime_dir).unwrap();
    fixture();
    let rt = runtime();
    let pod = Guard(Some(
        rt.block_on(launch(&sandboxd_spec(&results.join("pod-logs"), &[])))
            .unwrap(),
    ));
    let handle_path = work.path().join("handle.json");
    pod.0
        .as_ref()
        .unwrap()
        .handle
        .write_file(&handle_path)
        .unwrap();
    let sessions = || -> Vec<String> {
        std::fs::read_dir(runtime_dir.join("testkit"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (run_id, kept) in [(None, false), (Some("sharedrun"), true)] {
        std::fs::create_dir_all(&results).unwrap();
        let mut cmd = Command::new(fixture());
        cmd.args(["--exact", "pod_fixture::needs_exec"])
            .env_remove("TESTKIT_RUN_ID")
            .env_remove("TESTKIT_SECRETS_DIR")
            .env_remove("NEXTEST_RUN_ID")
            .env("TESTKIT_POD_HANDLE", &handle_path)
            .env("TESTKIT_RESULTS_DIR", &results)
            .env("TESTKIT_SUITE_DIR", &results)
            .env("XDG_RUNTIME_DIR", &runtime_dir);
        if let Some(id) = run_id {
            cmd.env("TESTKIT_RUN_ID", id);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        let left = sessions();
        if kept {
            assert_eq!(left, ["sharedrun"], "the shared run's session is kept");
        } else {
            assert!(left.is_empty(), "the session outlived its run: {left:?}");
        }
    }
}

/// A pod that is paused (its process group stopped, as a frozen container
/// is) when a test first asks for it: connecting is bounded, and the test
/// fails with why and the pod's state (paused), not a bare "error sending
/// request".
#[test]
fn connecting_to_a_paused_pod_is_bounded_and_says_it_is_paused() {
    use nix::sys::signal::{killpg, Signal};
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    fixture();
    let rt = runtime();
    let (launched, handle_path) = launch_with_handle_file(&rt, work.path());
    let group = nix::unistd::Pid::from_raw(launched.pgid);
    killpg(group, Signal::SIGSTOP).unwrap();
    let started = Instant::now();
    let ran = run_fixture(
        Some(&handle_path),
        &results,
        &["--exact", "pod_fixture::needs_exec"],
        &[],
    );
    let took = started.elapsed();
    killpg(group, Signal::SIGCONT).unwrap();
    rt.block_on(launched.stop(Duration::from_secs(10))).unwrap();
    assert_eq!(ran.code, Some(101), "{}", ran.output);
    let r = record(&results, "needs_exec");
    assert_eq!(r["outcome"], "failed", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    // Why connecting failed (an error, or no answer within the bound),
    // then the pod's state: paused.
    assert!(
        message.contains("the pod is unusable: ")
            && message.contains(&format!(
                "\n  node pod (process group {}): paused; its last 20 lines:",
                group
            )),
        "{message}"
    );
    assert!(took < Duration::from_secs(120), "it took {took:?}");
}
