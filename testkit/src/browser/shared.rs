//! Which Chromium a test's pages live in: the run's, shared by every UI
//! test of the run, each in a browser context of its own.
//!
//! Under `testkit-runner` (it wrote the run's `browser/owner` before any
//! test ran) the browser is the run's: the first test that needs it starts
//! it under `browser/start.lock` and writes its DevTools URL to
//! `browser/browser.json`; every test process after it connects to that
//! URL. No test ends it: the runner does at the end of the tests, and its
//! watchdog if the runner dies (they find its processes by
//! `TESTKIT_BROWSER_RUN=<run id>`, set before it starts).
//!
//! Without a runner, each test process shares a browser of its own among
//! its tests (`browser/process-PID/`): journaled for the process's reaper,
//! which ends it if the process is killed, and ended by the process when
//! its tests are done ([`finish_process`]).
//!
//! A browser found dead (it crashed, or was killed) fails only the tests
//! that were using it: the next test to need one ends what is left of it
//! and starts another.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::browser::{self as run_browser, Record};
use crate::engine::run::Run;

use super::launch;

/// How long the processes of a browser get to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);

/// Where a test process finds its browser, and whose it is.
struct Place {
    dir: PathBuf,
    /// `TESTKIT_BROWSER_RUN`'s value in its processes.
    owner: String,
    /// The runner owns it: no test process ends it.
    runner: bool,
}

fn place(run: &Run) -> Place {
    if run_browser::owned_by_runner(&run.results_dir) {
        return Place {
            dir: run_browser::dir(&run.results_dir),
            owner: run.id.clone(),
            runner: true,
        };
    }
    let pid = std::process::id();
    Place {
        dir: run_browser::dir(&run.results_dir).join(format!("process-{pid}")),
        owner: format!("{}-p{pid}", run.id),
        runner: false,
    }
}

/// A browser a test can connect to.
pub(super) struct Found {
    pub(super) record: Record,
    /// Its output.
    pub(super) log: PathBuf,
    /// This test started it (else it was running already).
    pub(super) started: bool,
}

/// The browser for a test: the live one, else one started now (after
/// ending what is left of a dead one). `unanswering` is a browser the
/// test found running but could not connect to: it is dying (a crash a
/// moment ago, its process not yet gone), and is ended, not shared again.
pub(super) async fn acquire(
    run: &'static Run,
    program: &Path,
    unanswering: Option<&Record>,
) -> crate::Result<Found> {
    let place = place(run);
    std::fs::create_dir_all(&place.dir)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", place.dir.display()))?;
    let lock_path = run_browser::lock_file(&place.dir);
    let shown = lock_path.display().to_string();
    // Another process may be starting it: wait for it, off the runtime.
    let _lock = tokio::task::spawn_blocking(move || {
        let file = crate::engine::files::open_lock_file(&lock_path)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| std::io::Error::from(e))
    })
    .await
    .map_err(anyhow::Error::msg)?
    .map_err(|e| anyhow::anyhow!("failed to lock {shown}: {e}"))?;
    let previous = run_browser::read_record(&place.dir);
    if let Some(record) = &previous {
        let dying = unanswering.is_some_and(|u| u.pid == record.pid && u.number == record.number);
        if record.is_running() && !dying {
            let log = log_path(&place.dir, record.number);
            return Ok(Found {
                record: record.clone(),
                log,
                started: false,
            });
        }
        end_dead(run, &place, record).await?;
    }
    let number = previous.map_or(1, |r| r.number + 1);
    let profile = new_profile(&run.id, number)?;
    let tag = profile
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let log = log_path(&place.dir, number);
    let log_file = std::fs::File::create(&log)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", log.display()))?;
    let started = launch::start(launch::Launch {
        program,
        profile: &profile,
        tag: &tag,
        run_id: &place.owner,
        log: log_file,
    })
    .await
    .map_err(|e| {
        let _ = std::fs::remove_dir_all(&profile);
        anyhow::anyhow!(
            "failed to start {}: {e}; its output is in {}",
            program.display(),
            log.display()
        )
    })?;
    let record = Record {
        pid: started.pid,
        start_ticks: started.start_ticks,
        ws_url: started.ws_url,
        profile: profile.clone(),
        number,
    };
    if !place.runner {
        // The process's reaper ends it should the process be killed.
        crate::tracker::own_group(
            run,
            &format!("Chromium of test process {}", std::process::id()),
            record.pid,
            record.start_ticks,
            Some(&profile),
            Some((launch::TAG_VAR, &tag)),
        )
        .map_err(|e| anyhow::anyhow!("failed to journal the browser for the reaper: {e}"))?;
    }
    run_browser::write_record(&place.dir, &record).map_err(|e| {
        anyhow::anyhow!(
            "failed to write {}: {e}",
            run_browser::record_file(&place.dir).display()
        )
    })?;
    Ok(Found {
        record,
        log,
        started: true,
    })
}

/// Ends what is left of a browser found dead (helpers, a crash handler)
/// and removes its profile.
async fn end_dead(run: &Run, place: &Place, dead: &Record) -> crate::Result {
    let mut left = crate::engine::process::tree_of(dead.pid);
    if let Some(tag) = dead.profile.file_name().and_then(|n| n.to_str()) {
        left.extend(crate::engine::process::with_env(launch::TAG_VAR, tag));
    }
    if !left.is_empty() {
        crate::engine::process::end_processes(&left, GRACE)
            .await
            .map_err(|survivors| {
                anyhow::anyhow!(
                    "the run's browser {} was gone, and processes of it survived SIGKILL: {survivors:?}",
                    dead.number
                )
            })?;
    }
    if !place.runner {
        crate::engine::resource::groups::release_group(
            crate::globals::journal(run).path(),
            "Chromium",
            dead.pid,
        );
    }
    let _ = std::fs::remove_dir_all(&dead.profile);
    let _ = std::fs::remove_file(run_browser::record_file(&place.dir));
    Ok(())
}

fn log_path(dir: &Path, number: u32) -> PathBuf {
    dir.join(format!("chromium-{number}.log"))
}

/// A fresh, private profile folder for the run's browser `number`.
fn new_profile(run_id: &str, number: u32) -> crate::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "testkit-chromium-{run_id}-{}-{number}-{nanos:08x}",
        std::process::id()
    ));
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)
        .map_err(|e| {
            anyhow::anyhow!("failed to create a browser profile {}: {e}", dir.display())
        })?;
    Ok(dir)
}

/// Without a runner: ends the browser this process's tests shared, if it
/// started one, and verifies it gone; says what survived. Under a runner:
/// nothing (the runner ends the run's browser).
pub(crate) fn finish_process(run: &Run) -> Result<(), String> {
    let place = place(run);
    if place.runner || !run_browser::record_file(&place.dir).exists() {
        return Ok(());
    }
    let record = run_browser::read_record(&place.dir);
    let ended = crate::runtime::block_on(run_browser::end(&place.dir, &place.owner, GRACE));
    match ended {
        Ok(_) => {
            if let Some(r) = record {
                crate::engine::resource::groups::release_group(
                    crate::globals::journal(run).path(),
                    "Chromium",
                    r.pid,
                );
            }
            let _ = std::fs::remove_dir_all(&place.dir);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}
