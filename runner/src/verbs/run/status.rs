//! SIGUSR1 to the runner: what each running test is doing now, without
//! stopping anything. While the tests run, the runner passes SIGUSR1 on to
//! the suite's test processes of this run (each answers with the hang
//! report of every test in its body, in `status/<pid>.txt`) and prints
//! their answers; at any other time it says that no test runs. SIGUSR1
//! never ends the runner.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use testkit_engine::process;
use testkit_engine::settings::var;

/// How long the runner waits for the test processes' answers.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The tests being run now, when they are.
struct Running {
    run_id: String,
    results_dir: PathBuf,
    binaries: Vec<PathBuf>,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

fn running() -> std::sync::MutexGuard<'static, Option<Running>> {
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Marks the tests of `binaries` running until dropped.
pub(crate) struct TestsRunning(());

impl Drop for TestsRunning {
    fn drop(&mut self) {
        // The tests are over: an answer that came after the runner stopped
        // waiting for it is no result either.
        if let Some(r) = running().take() {
            let _ = std::fs::remove_dir_all(r.results_dir.join("status"));
        }
    }
}

/// The tests of the run `run_id` (its results in `results_dir`) run now,
/// as processes of `binaries`, until the returned guard is dropped.
pub(crate) fn tests_running(
    run_id: &str,
    results_dir: &Path,
    mut binaries: Vec<PathBuf>,
) -> TestsRunning {
    binaries.sort();
    binaries.dedup();
    *running() = Some(Running {
        run_id: run_id.to_owned(),
        results_dir: results_dir.to_owned(),
        binaries,
    });
    TestsRunning(())
}

/// Starts listening for SIGUSR1. Call once, early in the run: from then
/// on SIGUSR1 is a question, no longer the end of the runner.
pub(crate) fn install() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut usr1 = match signal(SignalKind::user_defined1()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testkit-runner: cannot listen for SIGUSR1 ({e}); SIGUSR1 would end the run");
            return;
        }
    };
    tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            let said = answer().await;
            use std::io::Write as _;
            let _ = std::io::stderr().write_all(said.as_bytes());
        }
    });
}

/// What the runner says to a SIGUSR1.
async fn answer() -> String {
    let asked = {
        let running = running();
        running.as_ref().map(|r| {
            (
                r.results_dir.join("status"),
                test_processes(&r.run_id, &r.binaries),
            )
        })
    };
    let Some((dir, procs)) = asked else {
        return "\ntestkit-runner: SIGUSR1: no test is running now\n".to_owned();
    };
    if procs.is_empty() {
        return "\ntestkit-runner: SIGUSR1: no test process of this run is running now\n"
            .to_owned();
    }
    // The folder the answers go to is the runner's to make: one it cannot
    // make is named here, not blamed on the test processes.
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return format!(
            "\ntestkit-runner: SIGUSR1: cannot make {} for the tests' answers: {e}\n",
            dir.display()
        );
    }
    // An earlier answer is not this one.
    for (pid, _) in &procs {
        let _ = std::fs::remove_file(answer_file(&dir, *pid));
    }
    process::signal_each(&procs, Signal::SIGUSR1);
    let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
    let mut answers: Vec<(i32, Option<String>)> = procs.iter().map(|p| (p.0, None)).collect();
    loop {
        for (pid, said) in answers.iter_mut().filter(|a| a.1.is_none()) {
            // Renamed into place whole; an earlier one was removed above.
            // (Not judged by its time: a file's clock is coarser than
            // `SystemTime::now`, and a fresh answer can look older.)
            *said = std::fs::read_to_string(answer_file(&dir, *pid)).ok();
        }
        if answers.iter().all(|a| a.1.is_some()) || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Printed below, the answers are not results: the folder goes (when
    // no late answer came into it meanwhile).
    for (pid, _) in &answers {
        let _ = std::fs::remove_file(answer_file(&dir, *pid));
    }
    let _ = std::fs::remove_dir(&dir);
    let mut out = format!(
        "\ntestkit-runner: SIGUSR1: what the tests are doing ({} test process(es)):\n",
        answers.len()
    );
    for (pid, said) in answers {
        match said {
            Some(text) => out.push_str(&text),
            None => out.push_str(&format!(
                "testkit: test process {pid}: no answer within {}s (busy, or ended)\n",
                ANSWER_WITHIN.as_secs()
            )),
        }
    }
    out
}

fn answer_file(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("{pid}.txt"))
}

/// The test processes of the run `run_id`: its test binaries (any of its
/// processes, where they are not known) running with its id, reapers left
/// out, that catch SIGUSR1 (one that does not would be ended by it).
fn test_processes(run_id: &str, binaries: &[PathBuf]) -> Vec<(i32, u64)> {
    process::with_env_without(var::RUN_ID, run_id, var::RUN_AS)
        .into_iter()
        .filter(|(pid, _)| {
            // By file name: a nextest archive is unpacked into a folder of
            // each command's own, so the listed path is not the one run.
            let names = || binaries.iter().filter_map(|b| b.file_name());
            binaries.is_empty()
                || process::exe_of(*pid)
                    .is_some_and(|exe| names().any(|n| exe.file_name() == Some(n)))
        })
        .filter(|(pid, _)| process::catches(*pid, Signal::SIGUSR1))
        .collect()
}
