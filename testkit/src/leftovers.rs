//! Processes a test leaves running: found, named in its record, and ended.
//!
//! A test process makes itself a child subreaper before any test starts
//! (`PR_SET_CHILD_SUBREAPER`): an orphan of what its tests started (a
//! `setsid cmd &` or `nohup cmd &` whose shell exited, a daemon's double
//! fork) is reparented to it rather than to init. So what its tests left
//! running is among its own descendants, found from the children lists of
//! its threads: a test that started nothing costs one `waitid` that finds
//! no child, however many processes the rest of the machine starts.
//!
//! It also tags itself: `TESTKIT_PROCESS_TAG` in its environment, a value
//! unique to it (run id, pid, start time), that every process its tests
//! start inherits. A descendant that dropped the tag (the reaper, a helper
//! started with `.env_remove`) was started to outlive its test; a
//! descendant that carries it and still runs when a test ends (after its
//! cleanup) is what the test left running: identified by pid and start
//! time (never by name, and a reused pid is not it), named in the record,
//! and ended unless `TESTKIT_KEEP_PROCESSES` keeps it. The test fails
//! (`cleanup`), as a test whose resources leaked does. The tag also lets
//! the runner end what a killed test process left: a process that loses
//! its subreaper goes to init.
//!
//! Under nextest a process runs one test, and every descendant is that
//! test's. Under `cargo test` tests of one process run at once, each on
//! its own harness thread: a process a test's thread started, and what
//! descends from it, is that test's. An orphan (adopted under the main
//! thread) or a process a runtime thread started could be any of the tests
//! that ran when it started: it is judged when the last of them ends
//! (while one still runs, it may still be in use), and charged to that
//! test, whose message names the others.
//!
//! A subreaper must wait for the orphans it adopted once they exit, or
//! they stay zombies: a test's end waits for those it judged and for the
//! orphans that exited meanwhile. A test's own child, one a thread of the
//! process started, is never waited for unless the test left it running
//! and it was ended: its exit status belongs to its `Child`.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::engine::process::{self, Descendant};
use crate::engine::report::{LeftoverProcess, ProcessFate};
use crate::engine::settings::var;

/// How long a process left running gets between SIGTERM and SIGKILL.
const END_GRACE: Duration = Duration::from_secs(2);

/// This process's tag, once [`tag_process`] set it.
static TAG: OnceLock<String> = OnceLock::new();

/// Every test of this process that started, with when it ran (clock ticks
/// since boot; `end` is `None` while it runs).
static WINDOWS: Mutex<Vec<Window>> = Mutex::new(Vec::new());

/// Processes already judged (ended, kept or survived), never charged twice.
static JUDGED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

#[derive(Debug, Clone)]
struct Window {
    id: usize,
    test: String,
    /// The harness thread the test ran on.
    thread: i32,
    start: u64,
    end: Option<u64>,
    /// The processes it could have left running but did not judge, as
    /// another test that could have started them still ran.
    deferred: Vec<(i32, u64)>,
}

impl Window {
    /// Whether the process started at `ticks` started while this test ran.
    fn covers(&self, ticks: u64) -> bool {
        self.start <= ticks && self.end.is_none_or(|e| ticks <= e)
    }
}

/// Tags this process and makes it the subreaper of what its tests start.
/// Called by the harness first thing, while the process has one thread:
/// setting an environment variable is safe only then.
pub(crate) fn tag_process(run_id: &str) {
    let pid = std::process::id();
    let ticks = process::start_ticks(pid as i32).unwrap_or_default();
    let tag = format!("{run_id}.{pid}.{ticks}");
    std::env::set_var(var::PROCESS_TAG, &tag);
    if let Err(e) = process::become_subreaper() {
        // Orphans then go to init, out of sight of the tests' ends; the
        // runner still ends them, by the tag, when the run's tests ended.
        eprintln!(
            "testkit: could not become the subreaper of what the tests start ({e}): \
             a process a test orphaned (setsid, nohup) is found only by testkit-runner, \
             after the run's tests"
        );
    }
    let _ = TAG.set(tag);
}

/// A test's watch over the processes it starts, from its start on.
pub(crate) struct Watch {
    id: usize,
}

/// Starts watching for what the test `test` leaves running.
pub(crate) fn begin(test: &str) -> Watch {
    let start = process::now_ticks().unwrap_or_default();
    let thread = nix::unistd::gettid().as_raw();
    let mut windows = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    let id = windows.len();
    windows.push(Window {
        id,
        test: test.to_owned(),
        thread,
        start,
        end: None,
        deferred: Vec::new(),
    });
    Watch { id }
}

/// What a test left running, and what became of it.
#[derive(Debug, Default)]
pub(crate) struct Leftovers {
    pub(crate) processes: Vec<LeftoverProcess>,
    /// The failure that names them, when there are any.
    pub(crate) failure: Option<String>,
}

/// Ends the watch of a test: finds what it left running and ends it, or
/// keeps it when `keep`.
pub(crate) async fn finish(watch: Watch, keep: bool) -> Leftovers {
    let Some(tag) = TAG.get() else {
        return Leftovers::default();
    };
    let now = process::now_ticks().unwrap_or(u64::MAX);
    let Some(mine) = close_window(&watch, now) else {
        return Leftovers::default();
    };
    // The common case, a process without a child: one system call.
    if !process::has_children() {
        return Leftovers::default();
    }
    let windows = other_windows(&mine);
    let main = std::process::id() as i32;
    // What other tests' threads started is theirs to judge.
    let skip: Vec<i32> = windows
        .iter()
        .map(|w| w.thread)
        .filter(|&t| t != mine.thread && t != main)
        .collect();
    let below = process::descendants(&skip);
    let Found {
        left,
        also,
        deferred,
    } = left_running(tag, &mine, &windows, &below);
    if !deferred.is_empty() {
        defer(&mine, deferred);
    }
    reap_orphans(&mine, &windows, &below);
    if left.is_empty() {
        return Leftovers::default();
    }
    JUDGED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(left.iter().map(|(p, _)| *p));
    let pids: Vec<(i32, u64)> = left.iter().map(|(p, _)| *p).collect();
    let (fate_of, how) = if keep {
        keep_running(&pids)
    } else {
        let fates = end_running(&pids).await;
        // Their exit status is nobody's now: ended by testkit.
        for &(pid, ticks) in &pids {
            process::reap(pid, ticks);
        }
        fates
    };
    let processes: Vec<LeftoverProcess> = left
        .into_iter()
        .map(|((pid, _), command)| LeftoverProcess {
            pid,
            fate: fate_of(pid),
            command,
        })
        .collect();
    let failure = left_running_failure(&processes, &also, &how);
    Leftovers {
        processes,
        failure: Some(failure),
    }
}

/// Closes the window of the test `watch` watches at `now`, and returns it;
/// `None` when the test has no window.
fn close_window(watch: &Watch, now: u64) -> Option<Window> {
    let mut windows = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    // A window's id is its index: windows are only ever added.
    let w = windows.get_mut(watch.id)?;
    // A tick later: a process started in this very tick is inside.
    w.end = Some(now.saturating_add(1));
    Some(w.clone())
}

/// Records that the test of `mine` left `deferred` to a test still running.
fn defer(mine: &Window, deferred: Vec<(i32, u64)>) {
    let mut windows = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = windows.get_mut(mine.id) {
        w.deferred.extend(deferred);
    }
}

/// The windows of the other tests of this process: read only when the
/// process has a child, since under `cargo test` it holds a window per
/// test it ran.
fn other_windows(mine: &Window) -> Vec<Window> {
    WINDOWS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|w| w.id != mine.id)
        .cloned()
        .collect()
}

/// What a test is charged with: processes it may have left running.
struct Found {
    /// Each process, `(pid, start ticks)`, with its command.
    left: Vec<((i32, u64), String)>,
    /// The other tests that ran when one of them started and left it to
    /// this one.
    also: Vec<String>,
    /// What the test could have left running but is left for a test that
    /// still runs to judge.
    deferred: Vec<(i32, u64)>,
}

/// Whom a descendant is to be judged by, from the test of `mine`'s view.
enum Judge {
    /// This test: it started it, on its own thread.
    Mine,
    /// This test, with these others that ran when it started and left it.
    Shared(Vec<String>),
    /// A test that ran when it started and still runs.
    Later,
    /// Not this test: it started before or after it.
    NotMine,
}

/// Whom the descendant `d` is to be judged by, from the test of `mine`'s
/// view, the other tests of the process being `windows`.
fn judge(d: &Descendant, mine: &Window, windows: &[Window]) -> Judge {
    let main = std::process::id() as i32;
    // The main thread adopts orphans, and runs the tests when there is one
    // test thread: there, only the time tells whose it is.
    if d.thread == Some(mine.thread) && mine.thread != main {
        return Judge::Mine;
    }
    if !mine.covers(d.ticks) {
        return Judge::NotMine;
    }
    let p = (d.pid, d.ticks);
    let during: Vec<&Window> = windows.iter().filter(|w| w.covers(d.ticks)).collect();
    if during.iter().any(|w| w.end.is_none()) {
        return Judge::Later;
    }
    Judge::Shared(
        during
            .iter()
            .filter(|w| w.deferred.contains(&p))
            .map(|w| w.test.clone())
            .collect(),
    )
}

/// The processes among `below` carrying `tag` that the test of `mine` is
/// to be charged with, the other tests (of `windows`) that ran when one of
/// them started, and those left for a test that still runs.
fn left_running(tag: &str, mine: &Window, windows: &[Window], below: &[Descendant]) -> Found {
    let judged = JUDGED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut found = Found {
        left: Vec::new(),
        also: Vec::new(),
        deferred: Vec::new(),
    };
    for d in below.iter().filter(|d| !d.zombie) {
        let p = (d.pid, d.ticks);
        if judged.contains(&p) {
            continue;
        }
        let others = match judge(d, mine, windows) {
            Judge::NotMine => continue,
            Judge::Later => {
                if process::has_env(d.pid, var::PROCESS_TAG, tag) {
                    found.deferred.push(p);
                }
                continue;
            }
            Judge::Mine => Vec::new(),
            Judge::Shared(others) => others,
        };
        // Read last, the one read of the process itself: a descendant
        // without the tag was started to outlive the test.
        if !process::has_env(d.pid, var::PROCESS_TAG, tag) {
            continue;
        }
        for test in others {
            if !found.also.contains(&test) {
                found.also.push(test);
            }
        }
        found.left.push((p, process::command_of(d.pid)));
    }
    found
}

/// Waits for the orphans among `below` that exited (zombies the main
/// thread adopted) and are the test of `mine`'s to judge, or were judged
/// already, so that they do not pile up under the subreaper. Not where a
/// test's thread is the main thread: there a zombie may be a test's own
/// child, whose exit status its `Child` is to read.
fn reap_orphans(mine: &Window, windows: &[Window], below: &[Descendant]) {
    let main = std::process::id() as i32;
    if mine.thread == main {
        return;
    }
    let judged = JUDGED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for d in below.iter().filter(|d| d.zombie && d.thread == Some(main)) {
        let ours = judged.contains(&(d.pid, d.ticks))
            || matches!(judge(d, mine, windows), Judge::Shared(_));
        if ours {
            process::reap(d.pid, d.ticks);
        }
    }
}

/// What became of each process left running (by pid), and the words for it.
type Fates = (Box<dyn Fn(i32) -> ProcessFate>, String);

/// `TESTKIT_KEEP_PROCESSES` keeps the processes `pids` running.
fn keep_running(pids: &[(i32, u64)]) -> Fates {
    (
        Box::new(|_| ProcessFate::Kept),
        format!(
            "kept running ({}): end them with `kill {}`",
            var::KEEP_PROCESSES,
            pids.iter()
                .map(|p| p.0.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    )
}

/// Ends the processes `pids`: SIGTERM, then SIGKILL past the grace.
async fn end_running(pids: &[(i32, u64)]) -> Fates {
    match process::end_processes(pids, END_GRACE).await {
        Ok(killed) if killed.is_empty() => (
            Box::new(|_| ProcessFate::Ended),
            "testkit ended them (SIGTERM) and verified them gone".to_owned(),
        ),
        Ok(killed) => (
            Box::new(|_| ProcessFate::Ended),
            format!(
                "testkit ended them and verified them gone ({killed:?} ignored SIGTERM for {} and were killed)",
                humantime::format_duration(END_GRACE)
            ),
        ),
        Err(survivors) => {
            let alive: Vec<i32> = survivors.iter().map(|s| s.0).collect();
            (
                Box::new(move |pid| {
                    if alive.contains(&pid) {
                        ProcessFate::Survived
                    } else {
                        ProcessFate::Ended
                    }
                }),
                format!("ending them failed: {survivors:?} survived SIGTERM and SIGKILL"),
            )
        }
    }
}

/// The failure of a test that left `processes` running: each by pid and
/// command, the tests that may have left them instead (`also`), and `how`
/// they ended.
fn left_running_failure(processes: &[LeftoverProcess], also: &[String], how: &str) -> String {
    let named = processes
        .iter()
        .map(|p| format!("pid {} `{}`", p.pid, p.command))
        .collect::<Vec<_>>()
        .join(", ");
    let shared = if also.is_empty() {
        String::new()
    } else {
        format!(
            " (started while {} also ran, which may have left them instead)",
            also.join(", ")
        )
    };
    format!(
        "the test left {} process(es) running: {named}{shared}; {how}. A test must end what it \
         starts (wait for its children, kill what it put in the background), or set \
         {}=always to keep them for debugging",
        processes.len(),
        var::KEEP_PROCESSES
    )
}
