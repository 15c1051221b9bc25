//! Panics of test bodies are reported in the test's failure (redacted), so
//! the hook keeps them quiet on the test's own thread and remembers where
//! they happened; other threads' panics print as usual, redacted.

use std::cell::RefCell;
use std::panic;

use crate::redact;

thread_local! {
    static IN_TEST: RefCell<bool> = const { RefCell::new(false) };
    static LAST_PANIC: RefCell<Option<(String, Option<String>)>> = const { RefCell::new(None) };
}

pub(super) fn install_hook() {
    panic::set_hook(Box::new(|info| {
        let message = payload_text(info.payload());
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        if IN_TEST.with(|t| *t.borrow()) {
            LAST_PANIC.with(|p| *p.borrow_mut() = Some((message, at)));
        } else {
            let thread = std::thread::current();
            let at = at.unwrap_or_default();
            eprintln!(
                "thread '{}' panicked at {at}:\n{}",
                thread.name().unwrap_or("<unnamed>"),
                redact(&message)
            );
        }
    }));
}

/// Marks this thread as running a test body (`true`) or not.
pub(super) fn in_test(running: bool) {
    IN_TEST.with(|t| *t.borrow_mut() = running);
}

/// The message and location of the last panic of a test body on this
/// thread, if the hook saw it.
pub(super) fn take_last() -> Option<(String, Option<String>)> {
    LAST_PANIC.with(|p| p.borrow_mut().take())
}

pub(super) fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
