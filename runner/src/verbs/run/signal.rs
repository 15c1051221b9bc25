//! Ctrl-C and SIGTERM during a run: the first one asks the run to stop (the
//! tests are stopped, then cleanup, the residue sweep and teardown still run);
//! a second one while the tests stop hurries them (SIGKILL).

use tokio::sync::watch;

/// How many interrupts the run received.
#[derive(Clone)]
pub(crate) struct Interrupt {
    rx: watch::Receiver<u32>,
}

impl Interrupt {
    /// Starts listening for SIGINT and SIGTERM.
    pub(crate) fn install() -> Interrupt {
        let (tx, rx) = watch::channel(0u32);
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                eprintln!("testkit-runner: cannot listen for Ctrl-C; an interrupted run will not clean up");
                return;
            };
            loop {
                let name = tokio::select! {
                    _ = int.recv() => "Ctrl-C",
                    _ = term.recv() => "SIGTERM",
                };
                let n = *tx.borrow() + 1;
                // Counted before it is said: a closed stderr (eprintln!
                // would panic and end this listener) must not lose a signal.
                let _ = tx.send(n);
                let said = if n == 1 {
                    format!("\ntestkit-runner: {name}: stopping the tests, then cleanup, residue sweep and teardown (again to hurry)\n")
                } else {
                    format!("\ntestkit-runner: {name} again: killing the tests; the residue sweep and teardown still run\n")
                };
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(said.as_bytes());
            }
        });
        Interrupt { rx }
    }

    /// How many interrupts so far.
    pub(crate) fn count(&self) -> u32 {
        *self.rx.borrow()
    }

    pub(crate) fn requested(&self) -> bool {
        self.count() > 0
    }

    /// Waits until the count exceeds `seen`.
    pub(crate) async fn more_than(&mut self, seen: u32) -> u32 {
        loop {
            let now = *self.rx.borrow_and_update();
            if now > seen {
                return now;
            }
            if self.rx.changed().await.is_err() {
                // The listener is gone: no more interrupts will come.
                std::future::pending::<()>().await;
            }
        }
    }
}
