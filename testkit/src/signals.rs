//! SIGINT and SIGTERM (Ctrl-C, nextest's timeout): clean up every live test's
//! resources within a grace period, then exit with 128 + the signal number.
//! A second signal exits at once; the reaper finishes what is left. The
//! tests it ended are named in a note beside the journal (the engine's
//! `resource::terminated`), so that the runner records them terminated,
//! not killed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use crate::engine::wait::Secs;
use crate::reaper;
use crate::tracker::{clean_up_everything, OUTSTANDING, SHUTTING_DOWN};

/// Installs the handler on the shared runtime. Call once, before tests run.
/// `grace` (`TESTKIT_GRACE`) bounds the cleanup after a signal.
pub(crate) fn install_signal_handler(grace: Duration) {
    let rt = crate::runtime::runtime();
    // Registering inside the runtime replaces the default action (exit)
    // before this function returns, so no signal slips through.
    let signals = rt.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    });
    let (mut int, mut term) = match signals {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testkit: could not install the SIGINT/SIGTERM handler ({e}); a signal will leave cleanup to the reaper");
            return;
        }
    };
    rt.spawn(async move {
        let (signo, name) = tokio::select! {
            _ = int.recv() => (libc_sigint(), "SIGINT"),
            _ = term.recv() => (libc_sigterm(), "SIGTERM"),
        };
        SHUTTING_DOWN.store(true, Ordering::SeqCst);
        eprintln!(
            "testkit: {name} received: deleting this process's resources (grace {})",
            Secs(grace)
        );
        let finished = tokio::select! {
            r = tokio::time::timeout(grace, clean_up_everything()) => r.is_ok(),
            _ = int.recv() => false,
            _ = term.recv() => false,
        };
        let left = OUTSTANDING.load(Ordering::SeqCst);
        note_termination(name, finished, left);
        if finished && left == 0 {
            reaper::finish_process();
        } else {
            eprintln!(
                "testkit: {left} resource(s) not verified gone after {name}; the reaper takes over"
            );
        }
        // What the handler said goes through the redaction relays: drain
        // them, or its last lines are lost with the process.
        crate::engine::redact::stdio::restore();
        std::process::exit(128 + signo);
    });
}

/// Leaves the note that tells the runner these tests were terminated by
/// `name` and how their cleanup went: their records are never written
/// (the process exits first), and without it the runner could only say
/// they were killed.
fn note_termination(name: &str, finished: bool, left: usize) {
    let tests = crate::tracker::live_tests();
    let Ok(run) = crate::globals::run() else {
        return;
    };
    if tests.is_empty() {
        return;
    }
    let journal = crate::globals::journal(run).path();
    let note =
        crate::engine::resource::terminated::Terminated::new(&run.id, name, tests, finished, left);
    if let Err(e) = crate::engine::resource::terminated::write(journal, &note) {
        eprintln!(
            "testkit: could not note the {name} beside {}: {e}",
            journal.display()
        );
    }
}

fn libc_sigint() -> i32 {
    nix::sys::signal::Signal::SIGINT as i32
}

fn libc_sigterm() -> i32 {
    nix::sys::signal::Signal::SIGTERM as i32
}
