//! Which test's trace a step belongs to.
//!
//! The harness runs each test's body and cleanup on a thread of its own,
//! and [`enter`]s its recorder there: a step taken on that thread (a
//! request through the pod's client, a wait, a CLI run) is the thread's
//! test's. A step taken on a task the test spawned (a worker thread of the
//! runtime) is credited to the process's only running test when there is
//! one (always, under nextest), and is otherwise not traced.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use super::Recorder;

/// Whether any test of this process was ever traced: until then, asking
/// for the current recorder costs one atomic load.
static TRACING: AtomicBool = AtomicBool::new(false);
static ACTIVE: RwLock<Vec<Recorder>> = RwLock::new(Vec::new());

thread_local! {
    static CURRENT: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Makes `recorder` the trace of what this thread does until [`leave`].
pub fn enter(recorder: &Recorder) {
    TRACING.store(true, Ordering::Relaxed);
    CURRENT.with(|c| *c.borrow_mut() = Some(recorder.clone()));
    ACTIVE
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(recorder.clone());
}

/// Ends what [`enter`] began on this thread.
pub fn leave() {
    if let Some(r) = CURRENT.with(|c| c.borrow_mut().take()) {
        ACTIVE
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|a| a.id() != r.id());
    }
}

/// The recorder of what runs now: this thread's test, else the process's
/// only running test.
pub fn current() -> Option<Recorder> {
    if !TRACING.load(Ordering::Relaxed) {
        return None;
    }
    CURRENT.with(|c| c.borrow().clone()).or_else(|| {
        match ACTIVE.read().unwrap_or_else(|e| e.into_inner()).as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        }
    })
}
