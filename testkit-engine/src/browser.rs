//! The run's browser: one headless Chromium that every UI test of a run
//! shares, each test in a browser context of its own. It belongs to the
//! run, not to the test that happened to start it.
//!
//! Its folder in the results folder ([`dir`]):
//!
//! | file | what |
//! | --- | --- |
//! | `owner` | written by `testkit-runner` before any test runs: the runner ends the browser at the end of the tests (and its watchdog does, should the runner die) |
//! | `start.lock` | `flock`ed by the test process that starts the browser (or finds it gone and starts it again) |
//! | `browser.json` | the live browser: its pid, start time, DevTools WebSocket URL and profile ([`Record`]) |
//! | `chromium-N.log` | the output of the run's N-th browser |
//!
//! Every process of every browser of the run carries [`RUN_VAR`]`=<run
//! id>` in its environment, set before it starts: that is how the runner
//! and its watchdog find them all (by pid and start time, never by name),
//! a crash handler that double-forked out of the group included.
//!
//! Without a runner (plain `cargo test` or `cargo nextest run`), each test
//! process shares a browser of its own among its tests, in `process-PID/`
//! of that folder, with [`RUN_VAR`]`=<run id>-p<pid>`; the process ends it
//! when its tests are done, and its reaper if it is killed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The variable every process of a run's browsers carries, with the run id.
pub const RUN_VAR: &str = "TESTKIT_BROWSER_RUN";

/// The run's browser folder in `results_dir`.
pub fn dir(results_dir: &Path) -> PathBuf {
    results_dir.join("browser")
}

/// The file the runner writes before the tests start.
pub fn owner_file(results_dir: &Path) -> PathBuf {
    dir(results_dir).join("owner")
}

/// The lock a test process holds while it starts the browser of the
/// browser folder `dir`.
pub fn lock_file(dir: &Path) -> PathBuf {
    dir.join("start.lock")
}

/// The record of the live browser of the browser folder `dir`.
pub fn record_file(dir: &Path) -> PathBuf {
    dir.join("browser.json")
}

/// The run's browser, as the test process that started it wrote it down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The browser's main process, the leader of its process group.
    pub pid: i32,
    /// When it started (clock ticks since boot): a reused pid is not it.
    pub start_ticks: Option<u64>,
    /// Its DevTools WebSocket: `ws://127.0.0.1:PORT/devtools/browser/ID`.
    pub ws_url: String,
    /// Its profile folder, removed with it.
    pub profile: PathBuf,
    /// 1 for the run's first browser, 2 for the one started after it
    /// crashed, …
    pub number: u32,
}

impl Record {
    /// Whether the browser still runs (its main process, not a zombie,
    /// with the same start time).
    pub fn is_running(&self) -> bool {
        self.start_ticks
            .is_some_and(|t| crate::process::is_running(self.pid, t))
    }
}

/// Says that the runner owns the run's browser: written before any test
/// runs, so that no test process ends it, and the runner knows where to
/// look at the end.
pub fn announce(results_dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir(results_dir))?;
    std::fs::write(
        owner_file(results_dir),
        format!("testkit-runner {}\n", std::process::id()),
    )
}

/// Whether a runner owns the run's browser ([`announce`]).
pub fn owned_by_runner(results_dir: &Path) -> bool {
    owner_file(results_dir).exists()
}

/// The record of the browser of the browser folder `dir`, when there is a
/// readable one.
pub fn read_record(dir: &Path) -> Option<Record> {
    let bytes = std::fs::read(record_file(dir)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the record of the browser of the browser folder `dir`, atomically.
pub fn write_record(dir: &Path, record: &Record) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    crate::files::write_private(&record_file(dir), &json)
}

/// What [`end`] ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// The processes of the run's browsers that were still running.
    pub processes: usize,
}

/// Why [`end`] could not end the run's browsers.
#[derive(Debug, thiserror::Error)]
#[error("processes of the run's browser survived SIGKILL: {survivors:?}")]
pub struct Survived {
    /// The survivors, with their command lines.
    pub survivors: Vec<(i32, String)>,
}

/// Ends every browser of the browser folder `dir` (the run's: [`dir`]),
/// whose processes carry [`RUN_VAR`]`=owner` (the run id, for the run's):
/// the recorded browser's group, then every process still carrying the
/// variable (SIGTERM, `grace`, SIGKILL, verified gone); removes the record
/// and the profile. What it finds is by pid and start time, never by name.
pub async fn end(dir: &Path, owner: &str, grace: Duration) -> Result<Ended, Survived> {
    let mut ended = Ended::default();
    let record = read_record(dir);
    if let Some(r) = &record {
        match crate::process::terminate_group(r.pid, r.start_ticks, grace).await {
            Ok(t) => ended.processes += t.processes,
            Err(survivors) => return Err(Survived { survivors }),
        }
    }
    let tagged = crate::process::with_env(RUN_VAR, owner);
    if !tagged.is_empty() {
        ended.processes += tagged.len();
        if let Err(survivors) = crate::process::end_processes(&tagged, grace).await {
            return Err(Survived { survivors });
        }
    }
    if let Some(r) = record {
        let _ = std::fs::remove_dir_all(&r.profile);
        let _ = std::fs::remove_file(record_file(dir));
    }
    Ok(ended)
}
