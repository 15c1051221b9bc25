//! Whether the reapers of a run's test processes still run. Each reaper
//! holds an exclusive `flock` on `<journal>.reaper.lock` beside its test
//! process's journal, from before its first instruction (the test process
//! takes it and the reaper inherits it) to its exit, when the kernel lets
//! go of it. A lock that can be taken is a reaper that is gone, however it
//! ended; one that cannot is a reaper still undoing or deleting what a
//! dead test process left, which the run must wait for before it judges
//! what is left.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

/// What ends the name of a reaper's own lock, beside its journal
/// (`<binary>-<pid>.reaper.lock`).
pub const LOCK_SUFFIX: &str = "reaper.lock";

/// The reapers of `results_dir` that still run: the paths of their locks.
pub fn live_reapers(results_dir: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(super::journal::dir(results_dir)) else {
        return Vec::new();
    };
    let mut live: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(LOCK_SUFFIX))
        .filter(|p| held(p))
        .collect();
    live.sort();
    live
}

/// Waits until no reaper of `results_dir` runs, or `bound` passed; the
/// locks of the reapers still running then.
pub fn wait_for_reapers(results_dir: &Path, bound: Duration) -> Vec<PathBuf> {
    let deadline = Instant::now() + bound;
    let mut live = live_reapers(results_dir);
    while !live.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        live.retain(|p| held(p));
    }
    live
}

/// Whether someone holds the lock at `path`: a shared lock cannot be had
/// while the reaper holds its exclusive one.
fn held(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => Flock::lock(file, FlockArg::LockSharedNonblock).is_err(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_a_live_reaper_until_it_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let journals = super::super::journal::dir(dir.path());
        std::fs::create_dir_all(&journals).unwrap();
        let path = journals.join(format!("t-1.{LOCK_SUFFIX}"));
        let file = File::create(&path).unwrap();
        std::fs::write(journals.join(format!("t-2.{LOCK_SUFFIX}")), "").unwrap();
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        assert_eq!(live_reapers(dir.path()), vec![path.clone()]);
        let left = wait_for_reapers(dir.path(), Duration::from_millis(100));
        assert_eq!(left, vec![path]);
        drop(lock);
        assert!(wait_for_reapers(dir.path(), Duration::from_secs(5)).is_empty());
    }
}
