//! The pod lock: which tests of a run may use the pod at the same time.
//!
//! Every test takes it for the length of its body and its cleanup: shared
//! by every test that is not `exclusive`, exclusive by one that is (it
//! stops a node, cuts the network), so that such a test runs while no other
//! test of the run uses the pod. The run's processes share it (nextest runs
//! each test in a process of its own), so it is two `flock(2)`ed files in
//! the run's [secrets dir](crate::run::secrets_dir), the one folder every
//! test process of a run shares, with or without the runner:
//!
//! - [`LOCK_FILE`], held shared or exclusive while a test runs;
//! - [`TURNSTILE_FILE`], taken by every test before it asks for the lock:
//!   shared and for an instant by a shared test, exclusively by an
//!   exclusive one, which keeps it until it has the lock. A shared lock is
//!   granted whenever only shared holders hold the lock, so without the
//!   turnstile a steady stream of shared tests would keep an exclusive one
//!   waiting for ever; with it, no new shared holder gets in while an
//!   exclusive test waits, and the exclusive test waits only for the
//!   holders of the moment. Shared tests pass it together: the turnstile
//!   taken exclusively by each made every two tests that started at once
//!   wait for each other (a millisecond's sleep each under `cargo test`).
//!
//! The kernel lets go of a `flock` when the last descriptor of its open
//! file closes, which is also when a process dies: a test process that is
//! killed while it holds the lock (nextest's timeout, SIGKILL, a crash)
//! releases it with no help, and no stale lock can outlive its holder.
//! A test that injects a fault makes its reaper a holder too: it sends the
//! reaper a duplicate of the descriptor ([`PodLock::as_fd`]), so that the
//! lock outlives a killed test process until the reaper has undone the
//! faults and closed it. (Dropping a [`PodLock`] unlocks the open file for
//! every holder: a test takes its duplicate back from the reaper first.)
//! Each test opens the files itself: `flock` locks belong to an open file,
//! so two tests of one process (threads under `cargo test`) exclude each
//! other exactly as two processes do.
//!
//! The calls block: call [`acquire`] from a thread that may wait (a test's
//! harness thread, `spawn_blocking`), never from an async runtime's worker.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::report::{LockMode, LockRecord};

/// The lock itself, in the run's secrets dir.
pub const LOCK_FILE: &str = "pod.lock";

/// The turnstile in front of it, in the run's secrets dir.
pub const TURNSTILE_FILE: &str = "pod.turnstile";

/// How long a lock may be busy before the wait is a wait: `on_wait` of
/// [`acquire`] is called past it.
const GRACE: Duration = Duration::from_millis(20);

/// Taking the pod lock failed.
#[derive(Debug, thiserror::Error)]
#[error("failed to {what} {} for the pod's {} lock", path.display(), mode.as_str())]
pub struct LockError {
    /// The mode asked for.
    pub mode: LockMode,
    /// The step that failed: `open` or `lock`.
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub cause: io::Error,
}

/// The pod lock, held until [`release`](PodLock::release) or drop.
#[derive(Debug)]
pub struct PodLock {
    mode: LockMode,
    acquired_at: SystemTime,
    waited: Duration,
    held: Flock<File>,
}

/// Takes the pod lock in `mode` from the lock files in `dir` (the run's
/// secrets dir, which must exist), waiting as long as it takes.
/// `on_wait` is called once, before the wait, when the lock is not free
/// within a few milliseconds: what makes a wait visible while it lasts.
pub fn acquire(dir: &Path, mode: LockMode, on_wait: impl FnOnce()) -> Result<PodLock, LockError> {
    let start = Instant::now();
    let mut on_wait = Some(on_wait);
    let mut waiting = || {
        if let Some(f) = on_wait.take() {
            f()
        }
    };
    // Shared tests pass the turnstile together: they never wait for one
    // another there, only for an exclusive test that holds it.
    let through = match mode {
        LockMode::Shared => FlockArg::LockShared,
        LockMode::Exclusive => FlockArg::LockExclusive,
    };
    let turnstile = lock_file(dir, TURNSTILE_FILE, mode, through, &mut waiting)?;
    let arg = match mode {
        LockMode::Shared => FlockArg::LockShared,
        LockMode::Exclusive => FlockArg::LockExclusive,
    };
    // An exclusive test keeps the turnstile while it waits here, so that no
    // new shared holder gets in before it; a shared one, so that it queues
    // behind an exclusive test that got the turnstile first.
    let held = lock_file(dir, LOCK_FILE, mode, arg, &mut waiting)?;
    drop(turnstile);
    Ok(PodLock {
        mode,
        acquired_at: SystemTime::now(),
        waited: start.elapsed(),
        held,
    })
}

/// Opens `dir/name` (made if missing, mode 0600) and locks it with `arg`:
/// within the grace if it can, else after `waiting()`, blocking, retried
/// when a signal interrupts the wait.
fn lock_file(
    dir: &Path,
    name: &str,
    mode: LockMode,
    arg: FlockArg,
    waiting: &mut impl FnMut(),
) -> Result<Flock<File>, LockError> {
    let path = dir.join(name);
    let error = |what, cause| LockError {
        mode,
        what,
        path: path.clone(),
        cause,
    };
    let file = crate::files::open_lock_file(&path).map_err(|e| error("open", e))?;
    let nonblocking = match arg {
        FlockArg::LockShared => FlockArg::LockSharedNonblock,
        _ => FlockArg::LockExclusiveNonblock,
    };
    // Every test holds the turnstile for an instant: contention that ends
    // within the grace is no wait worth a word.
    let grace = Instant::now() + GRACE;
    let mut file = file;
    loop {
        file = match Flock::lock(file, nonblocking) {
            Ok(lock) => return Ok(lock),
            Err((file, Errno::EWOULDBLOCK | Errno::EINTR)) => file,
            Err((_, errno)) => return Err(error("lock", errno.into())),
        };
        if Instant::now() >= grace {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    waiting();
    loop {
        match Flock::lock(file, arg) {
            Ok(lock) => return Ok(lock),
            Err((again, Errno::EINTR)) => file = again,
            Err((_, errno)) => return Err(error("lock", errno.into())),
        }
    }
}

impl PodLock {
    /// The mode it is held in.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// The descriptor that holds it: a process that inherits or is sent
    /// a duplicate holds the lock too, until it closes it.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.held.as_fd()
    }

    /// How long [`acquire`] waited for it.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Lets go of the lock, and says how it was held. The release time is
    /// read before the lock is let go, so that the recorded interval lies
    /// inside the one the lock was held for.
    pub fn release(self) -> LockRecord {
        let released_at = SystemTime::now();
        let record = LockRecord::new(
            self.mode,
            millis(self.acquired_at),
            millis(released_at),
            self.waited.as_millis() as u64,
        );
        drop(self.held);
        record
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn take(dir: &Path, mode: LockMode) -> PodLock {
        acquire(dir, mode, || {}).unwrap()
    }

    #[test]
    fn shared_holders_share_and_an_exclusive_one_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let a = take(dir.path(), LockMode::Shared);
        let b = take(dir.path(), LockMode::Shared);
        let (tx, rx) = mpsc::channel();
        let path = dir.path().to_owned();
        let exclusive = std::thread::spawn(move || {
            let lock = acquire(&path, LockMode::Exclusive, || tx.send(()).unwrap()).unwrap();
            lock.release()
        });
        // It says it waits, and waits while a shared holder is left.
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!exclusive.is_finished());
        let b = b.release();
        let record = exclusive.join().unwrap();
        assert_eq!(record.mode, LockMode::Exclusive);
        assert!(
            record.acquired_at_ms >= b.released_at_ms,
            "{record:?} {b:?}"
        );
        assert!(record.wait_ms >= 100, "{record:?}");
    }

    #[test]
    fn a_waiting_exclusive_holder_goes_before_later_shared_ones() {
        let dir = tempfile::tempdir().unwrap();
        let first = take(dir.path(), LockMode::Shared);
        let path = dir.path().to_owned();
        let exclusive = std::thread::spawn(move || {
            let lock = take(&path, LockMode::Exclusive);
            std::thread::sleep(Duration::from_millis(50));
            lock.release()
        });
        // The exclusive test is in the turnstile now, waiting for `first`.
        std::thread::sleep(Duration::from_millis(100));
        let path = dir.path().to_owned();
        let late = std::thread::spawn(move || take(&path, LockMode::Shared).release());
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !late.is_finished(),
            "a shared holder slipped past the turnstile"
        );
        drop(first);
        let (exclusive, late) = (exclusive.join().unwrap(), late.join().unwrap());
        assert!(
            late.acquired_at_ms >= exclusive.released_at_ms,
            "{exclusive:?} {late:?}"
        );
    }

    #[test]
    fn a_free_lock_is_taken_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let lock = acquire(dir.path(), LockMode::Exclusive, || panic!("it waited")).unwrap();
        assert_eq!(lock.mode(), LockMode::Exclusive);
        assert!(dir.path().join(LOCK_FILE).is_file());
        assert!(dir.path().join(TURNSTILE_FILE).is_file());
        let record = lock.release();
        assert!(record.released_at_ms >= record.acquired_at_ms);
        take(dir.path(), LockMode::Exclusive);
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let error = acquire(&missing, LockMode::Shared, || {}).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("pod.turnstile")
                && text.contains("failed to open")
                && text.contains("pod's shared lock"),
            "{text}"
        );
    }
}
