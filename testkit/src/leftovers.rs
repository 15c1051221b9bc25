//! Processes a test leaves running: found, named in its record, and ended.
//!
//! A test process tags itself before any test starts: `TESTKIT_PROCESS_TAG`
//! in its own environment, a value unique to it (run id, pid, start time).
//! Every process its tests start inherits the tag, and keeps it wherever it
//! goes: a plain child, one that `setsid` moved to a session of its own, one
//! that `nohup` and its shell's exit orphaned to init. When a test ends
//! (after its cleanup), the processes that carry the tag, started while the
//! test ran and still alive, are what it left running: each is identified
//! by pid and start time (never by name, and a reused pid is not it), named
//! in the record, and ended unless `TESTKIT_KEEP_PROCESSES` keeps it. The
//! test fails (`cleanup`), as a test whose resources leaked does.
//!
//! Under nextest a process runs one test, and what carries its tag is that
//! test's. Under `cargo test` tests of one process run at once, and a
//! process that started while several ran could be any of theirs: it is
//! judged when the last of them ends (while one still runs, it may still be
//! in use), and charged to that test, whose message names the others.
//!
//! Most tests start nothing, and a scan of every process of the machine
//! after each would cost more than the test. So a test notes the last pid
//! given when it starts; when it ends, only the pids given since are
//! looked at, and only when one of them carries the tag is `/proc` scanned.

use std::sync::Mutex;
use std::time::Duration;

use crate::engine::process;
use crate::engine::report::{LeftoverProcess, ProcessFate};
use crate::engine::settings::var;

/// How long a process left running gets between SIGTERM and SIGKILL.
const END_GRACE: Duration = Duration::from_secs(2);

/// This process's tag, once [`tag_process`] set it.
static TAG: Mutex<Option<String>> = Mutex::new(None);

/// Every test of this process that started, with when it ran (clock ticks
/// since boot; `end` is `None` while it runs).
static WINDOWS: Mutex<Vec<Window>> = Mutex::new(Vec::new());

/// Processes already judged (ended, kept or survived), never charged twice.
static JUDGED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

#[derive(Debug, Clone)]
struct Window {
    id: usize,
    test: String,
    /// The last pid given before the test started: what it starts has a
    /// greater one, until pids wrap.
    start_pid: Option<i32>,
    start: u64,
    end: Option<u64>,
}

impl Window {
    /// Whether the process `(pid, start ticks)` could be one this test
    /// started: it started while the test ran, and (unless pids wrapped
    /// since, `last_pid` being the last pid given) after the test's
    /// `start_pid` was given out.
    fn covers(&self, (pid, ticks): (i32, u64), last_pid: Option<i32>) -> bool {
        let after_start = match (self.start_pid, last_pid) {
            (Some(start), Some(last)) if start <= last => pid > start,
            _ => true,
        };
        self.start <= ticks && self.end.is_none_or(|e| ticks <= e) && after_start
    }
}

/// Tags this process, so that what its tests start can be found. Called
/// by the harness first thing, while the process has one thread: setting
/// an environment variable is safe only then.
pub(crate) fn tag_process(run_id: &str) {
    let pid = std::process::id();
    let ticks = process::start_ticks(pid as i32).unwrap_or_default();
    let tag = format!("{run_id}.{pid}.{ticks}");
    std::env::set_var(var::PROCESS_TAG, &tag);
    *TAG.lock().unwrap_or_else(|e| e.into_inner()) = Some(tag);
}

/// A test's watch over the processes it starts, from its start on.
pub(crate) struct Watch {
    id: usize,
}

/// Starts watching for what the test `test` leaves running.
pub(crate) fn begin(test: &str) -> Watch {
    // The pid first: whatever has a greater one started after the clock
    // was read, so it is inside the window too.
    let start_pid = process::last_pid();
    let start = process::now_ticks().unwrap_or_default();
    let mut windows = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    let id = windows.len();
    windows.push(Window {
        id,
        test: test.to_owned(),
        start_pid,
        start,
        end: None,
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
    let Some(tag) = TAG.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return Leftovers::default();
    };
    let now = process::now_ticks().unwrap_or(u64::MAX);
    // After the clock, so that what started before `now` is counted.
    let last_pid = process::last_pid();
    let Some(mine) = close_window(&watch, now) else {
        return Leftovers::default();
    };
    // The common case, nothing started since the test began carries the
    // tag, settled by the pids given since. A process another test left
    // for this one to judge has one of them too (see `Window::covers`).
    if let (Some(start), Some(last)) = (mine.start_pid, last_pid) {
        if process::any_with_env_between(var::PROCESS_TAG, &tag, start, last) == Some(false) {
            return Leftovers::default();
        }
    }
    let shared = windows_during(&mine);
    let Found { left, also } = left_running(&tag, &mine, &shared, last_pid);
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
        end_running(&pids).await
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

/// The windows of the other tests that ran while `mine` did: read only
/// when something is to be judged, since under `cargo test` a process
/// holds a window per test it ran.
fn windows_during(mine: &Window) -> Vec<Window> {
    WINDOWS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|w| w.id != mine.id && w.end.is_none_or(|e| e >= mine.start))
        .cloned()
        .collect()
}

/// What a test is charged with: processes it may have left running.
struct Found {
    /// Each process, `(pid, start ticks)`, with its command.
    left: Vec<((i32, u64), String)>,
    /// The other tests that ran when one of them started.
    also: Vec<String>,
}

/// The processes carrying `tag` that the test of `mine` is to be charged
/// with, and the other tests (of `shared`) that ran when one of them
/// started.
fn left_running(tag: &str, mine: &Window, shared: &[Window], last_pid: Option<i32>) -> Found {
    let judged = JUDGED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut left = Vec::new();
    let mut also: Vec<String> = Vec::new();
    for p in process::with_env_since(var::PROCESS_TAG, tag, mine.start) {
        if judged.contains(&p) || !mine.covers(p, last_pid) {
            continue;
        }
        let during: Vec<&Window> = shared.iter().filter(|w| w.covers(p, last_pid)).collect();
        // Another test that ran when it started still runs: it may be
        // theirs, and in use. The last of them to end judges it.
        if during.iter().any(|w| w.end.is_none()) {
            continue;
        }
        for w in during {
            if !also.contains(&w.test) {
                also.push(w.test.clone());
            }
        }
        left.push((p, process::command_of(p.0)));
    }
    Found { left, also }
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
