//! A run under faults: a runner killed with SIGKILL, a pod that crashes
//! mid-run. Real processes, real signals, `sandboxd`'s `--fault` switches.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, runner, wait_for, Ran};

/// `pid` is a live process (not a zombie waiting for a reaper).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// Starts `run` on the fixture suite in slow mode with its own pods dir,
/// and waits until a test is running.
fn slow_run(suite: &Path, pods: &Path) -> Child {
    let flag = suite.join("running.flag");
    let mut child = runner()
        .env("TESTKIT_PODS_DIR", pods)
        .env("FIXTURE_MODE", "slow")
        .env("FIXTURE_FLAG", &flag)
        .arg("run")
        .arg(suite)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = wait_for(Duration::from_secs(240), || flag.exists());
    if !started {
        let _ = child.kill();
    }
    assert!(started, "the slow test started");
    child
}

/// The one pod under `pods`: (name, its `pod.json`).
fn the_pod(pods: &Path) -> (String, serde_json::Value, PathBuf) {
    let dirs: Vec<PathBuf> = std::fs::read_dir(pods)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pod.json").is_file())
        .collect();
    assert_eq!(dirs.len(), 1, "one pod recorded: {dirs:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dirs[0].join("pod.json")).unwrap()).unwrap();
    let name = record["name"].as_str().unwrap().to_owned();
    (name, record, dirs[0].clone())
}

/// A SIGKILLed runner leaves no pod behind: until it dies the pod is listed
/// by `pod ls`; within seconds of its death the pod's processes are gone,
/// its private dir (token inside) deleted, its record removed.
#[test]
fn a_sigkilled_runner_does_not_orphan_its_pod() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let mut child = slow_run(suite.path(), pods.path());
    let (name, record, record_dir) = the_pod(pods.path());
    let ls = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "ls"])
            .output()
            .unwrap(),
    );
    assert_eq!(ls.code, 0);
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("alive")),
        "{}",
        ls.stdout
    );
    let pid = record["pid"].as_i64().unwrap() as i32;
    let private = PathBuf::from(record["private_dir"].as_str().unwrap());
    assert!(running(pid) && private.is_dir());
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let gone = wait_for(Duration::from_secs(20), || {
        !running(pid) && !private.exists() && !record_dir.exists()
    });
    if running(pid) {
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(
        gone,
        "pod {name}: running {}, private dir left {}, record left {}",
        running(pid),
        private.exists(),
        record_dir.exists()
    );
}

/// While a run goes on, `pod down NAME` takes its pod down by the name
/// `pod ls` shows; the run then ends without leaving anything running.
#[test]
fn pod_down_takes_a_runs_pod_down_by_name() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let child = slow_run(suite.path(), pods.path());
    let (name, record, record_dir) = the_pod(pods.path());
    let down = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "down", &name])
            .output()
            .unwrap(),
    );
    let pid = record["pid"].as_i64().unwrap() as i32;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let ran = Ran::from(child.wait_with_output().unwrap());
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(down.stdout.contains(&format!("pod {name} is down")));
    assert!(!running(pid) && !record_dir.exists());
    assert_ne!(ran.code, 0);
}

/// A pod that crashes mid-run (`--fault crash-after=N`) is named by a
/// verdict of its own (how it ended, when, its last lines), the run exits 2,
/// and teardown ends the sandbox process that outlived the pod.
#[test]
fn a_pod_that_crashes_mid_run_is_named_and_its_processes_end() {
    let suite = fixture("suite");
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(
        "\n[pod]\ncommand = [\"sandboxd\", \"serve\", \"--fault\", \"crash-after=25\"]\n",
    );
    std::fs::write(&toml, text).unwrap();
    let flag = suite.path().join("pid.flag");
    let pods = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .env("FIXTURE_MODE", "crash")
            .env("FIXTURE_FLAG", &flag)
            .arg("run")
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    let sleeper: i32 = std::fs::read_to_string(&flag)
        .expect("the test started a process in a sandbox")
        .trim()
        .parse()
        .unwrap();
    let left = running(sleeper);
    if left {
        let _ = kill(Pid::from_raw(sleeper), Signal::SIGKILL);
    }
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains("crashed mid-run") && evidence.contains("after it was up"),
        "{evidence}"
    );
    assert!(
        evidence.contains("killed by SIGABRT") || evidence.contains("exit status"),
        "{evidence}"
    );
    assert!(ran.stdout.contains("crashed mid-run"), "{}", ran.stdout);
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(why.contains("outlived it: ended"), "{why}");
    assert!(!left, "the sandbox's process {sleeper} outlived teardown");
    assert!(std::fs::read_dir(pods.path()).unwrap().next().is_none());
}
