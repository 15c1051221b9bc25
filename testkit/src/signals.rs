//! SIGINT and SIGTERM (Ctrl-C, nextest's timeout): clean up every live test's
//! resources within a grace period, then exit with 128 + the signal number.
//! A second signal exits at once; the reaper finishes what is left.

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

fn libc_sigint() -> i32 {
    nix::sys::signal::Signal::SIGINT as i32
}

fn libc_sigterm() -> i32 {
    nix::sys::signal::Signal::SIGTERM as i32
}
