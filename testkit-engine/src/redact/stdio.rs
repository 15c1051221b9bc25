//! Redaction of the process's own stdout and stderr.
//!
//! A test that `println!`s the token writes straight to fd 1, past every
//! redaction the harness does. Once a secret is registered, fds 1 and 2 are
//! pointed at pipes; a thread per pipe reads line by line, redacts, and writes
//! to the original descriptors. [`restore`] puts the originals back and
//! drains the pipes before the process exits.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Duration;

/// The longest line held before it is redacted and written anyway.
const MAX_LINE: usize = 1 << 20;

struct Installed {
    originals: [OwnedFd; 2],
    threads: Vec<std::thread::JoinHandle<()>>,
}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);

/// Routes fds 1 and 2 through redaction. Idempotent; on any error, output
/// stays as it was (and the harness's own redaction still applies).
pub fn install() {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if installed.is_some() {
        return;
    }
    match try_install() {
        Ok(i) => *installed = Some(i),
        Err(e) => eprintln!("testkit: could not redact this process's stdout and stderr: {e}"),
    }
}

fn try_install() -> nix::Result<Installed> {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let orig_out = nix::unistd::dup(std::io::stdout())?;
    let orig_err = nix::unistd::dup(std::io::stderr())?;
    let (out_r, out_w) = nix::unistd::pipe()?;
    let (err_r, err_w) = nix::unistd::pipe()?;
    let threads = vec![
        relay(out_r, nix::unistd::dup(&orig_out)?),
        relay(err_r, nix::unistd::dup(&orig_err)?),
    ];
    nix::unistd::dup2_stdout(&out_w)?;
    nix::unistd::dup2_stderr(&err_w)?;
    // out_w and err_w close here: fds 1 and 2 are now the only write ends we
    // hold, so restoring them gives the relays their end of file.
    Ok(Installed {
        originals: [orig_out, orig_err],
        threads,
    })
}

fn relay(from: OwnedFd, to: OwnedFd) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("testkit-redact".to_owned())
        .spawn(move || {
            let mut reader = BufReader::with_capacity(64 * 1024, std::fs::File::from(from));
            let mut out = std::fs::File::from(to);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = (&mut reader)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .unwrap_or(0);
                if n == 0 {
                    return;
                }
                let text = String::from_utf8_lossy(&line);
                let _ = out.write_all(crate::redact(&text).as_bytes());
            }
        })
        .expect("failed to start the redaction thread")
}

use std::io::Read as _;

/// Restores fds 1 and 2 and waits (bounded) for the relays to write out
/// what they hold. Output written by children that still hold the pipes is
/// not waited for.
pub fn restore() {
    let Some(installed) = INSTALLED.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let [orig_out, orig_err] = &installed.originals;
    let _ = nix::unistd::dup2_stdout(orig_out);
    let _ = nix::unistd::dup2_stderr(orig_err);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    for t in installed.threads {
        while !t.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.is_finished() {
            let _ = t.join();
        }
    }
}
