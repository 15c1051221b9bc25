//! The pod lock around one test: shared, or exclusive for an `exclusive`
//! test, taken once the preflight let the test run and held through its
//! body and its cleanup (see `engine::pod::lock` for how it works across
//! the run's processes).
//!
//! It is taken on the test's harness thread before the body is handed to
//! the runtime, never on one of the runtime's workers: a test that waits
//! here blocks no other test's I/O. The wait comes before the body's
//! timeout starts, so it counts against no timeout of the test's own; it
//! is in the test's log (live under `--nocapture`), its trace and its
//! record (`lock.wait_ms`).

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::cx::Cx;
use crate::engine::pod::lock::{self, PodLock};
use crate::engine::report::LockMode;
use crate::engine::trace::{step, EntryKind};

/// Why a test could not take the pod lock, and how to mend it. The test's
/// failure message is its `Display`, causes included.
#[derive(Debug, thiserror::Error)]
pub(super) enum TakeError {
    /// The run's secrets dir, which holds the lock, could not be made.
    #[error("the test cannot take the pod lock: {0}")]
    SecretsDir(&'static str),
    /// Opening or locking the lock file failed.
    #[error(
        "the test cannot take the pod lock: {}; the run's secrets dir must be a local \
         folder of your own that supports flock(2) (set TESTKIT_SECRETS_DIR to one)",
        chain(.0)
    )]
    Acquire(lock::LockError),
}

/// `error: cause: cause…`, each once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// Takes the pod lock for the test of `cx`, waiting as long as it takes;
/// an error says what failed and how to mend it.
pub(super) fn take(cx: &Cx) -> Result<PodLock, TakeError> {
    let mode = if cx.is_exclusive() {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    };
    let dir = crate::globals::secrets_dir().map_err(TakeError::SecretsDir)?;
    let started = Instant::now();
    let waited = Cell::new(false);
    let lock = lock::acquire(dir, mode, || {
        waited.set(true);
        cx.log.push(waiting_for(mode));
    })
    .map_err(TakeError::Acquire)?;
    if waited.get() {
        let took = format!(
            "took the pod's {} lock after {}",
            mode.as_str(),
            humantime::format_duration(Duration::from_millis(lock.waited().as_millis() as u64))
        );
        cx.log.push(took.clone());
        step::record(EntryKind::Wait, started, took, true, String::new());
    }
    Ok(lock)
}

/// What the log says while a test waits for the lock.
fn waiting_for(mode: LockMode) -> String {
    let why = match mode {
        LockMode::Exclusive => {
            "this test is `exclusive` and other tests of the run are using the pod"
        }
        LockMode::Shared => "an `exclusive` test of the run has the pod, or is next in line",
    };
    format!(
        "waiting for the pod's {} lock: {why} (the wait counts against no timeout of this test)",
        mode.as_str()
    )
}
