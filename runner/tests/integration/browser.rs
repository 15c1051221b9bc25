//! The run's browser belongs to the run: a runner SIGKILLed while the UI
//! tests share it leaves no process of it. Its watchdog ends the test
//! engine's tree, which holds the browser while the test process that
//! started it lives, and, told before any test ran, every process tagged
//! `TESTKIT_BROWSER_RUN=<run id>`, which finds it once that process has
//! ended and the browser was orphaned. (This test kills the runner as soon
//! as the browser is up, so it sees the first way; the second has no test
//! of its own yet.)

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{run_id_of, runner, wait_for, workspace};

/// The processes (by pid and start time) whose environment says they are
/// of the run `run_id`'s browser.
fn browser_processes(run_id: &str) -> Vec<(i32, u64)> {
    testkit_engine::process::with_env(testkit_engine::browser::RUN_VAR, run_id)
}

/// SIGKILLs the runner `.0` when dropped.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

#[test]
fn a_sigkilled_runner_leaves_no_process_of_the_runs_browser() {
    let results = tempfile::tempdir().unwrap();
    let record =
        testkit_engine::browser::record_file(&testkit_engine::browser::dir(results.path()));
    let mut run = runner()
        .args(["run", "--results"])
        .arg(results.path())
        .arg(workspace().join("suites/conformance"))
        .args(["-E", "binary(ui)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_id = run_id_of(&mut run);
    // Should this test fail before it kills the runner, the runner goes
    // all the same, its watchdog cleaning up after it.
    let guard = KillOnDrop(run.id() as i32);
    // The first UI test has started the run's browser.
    let started = wait_for(Duration::from_secs(600), || {
        record.exists() || run.try_wait().unwrap().is_some()
    });
    assert!(started && record.exists(), "a UI test started the browser");
    let browser = testkit_engine::browser::read_record(record.parent().unwrap())
        .expect("the browser's record reads");
    assert!(browser.is_running(), "{browser:?}");
    let before = browser_processes(&run_id);
    assert!(
        before.iter().any(|&(pid, _)| pid == browser.pid),
        "the browser carries the run's tag: {before:?}"
    );
    drop(guard);
    let _ = run.wait();
    let gone = wait_for(Duration::from_secs(30), || {
        !browser.is_running() && browser_processes(&run_id).is_empty()
    });
    assert!(
        gone,
        "left 30 s after the runner's SIGKILL: {:?}",
        browser_processes(&run_id)
    );
}
