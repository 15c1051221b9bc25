//! Machines as the pod: a Debian VM under QEMU, booted from a cached image,
//! with the product installed from its `.deb` as an administrator would.
//!
//! A leaf: it imports nothing of [`crate::pod`]; the pod launcher drives it
//! through [`Machine`] as it drives a container through the container
//! engine.
//!
//! ```no_run
//! # async fn f() -> Result<(), testkit_engine::machine::MachineError> {
//! use std::time::Duration;
//! use testkit_engine::machine::{ImageCache, ImageRecipe, Machine, MachineSpec, DEFAULT_MIRROR};
//!
//! let cache = ImageCache::new("/var/cache/testkit/machines");
//! let recipe = ImageRecipe::named("debian-12", DEFAULT_MIRROR)?;
//! let (image, _provenance) = cache.ensure(&recipe).await?;
//! let mut spec = MachineSpec::new(image);
//! spec.ports = vec![8080];
//! spec.payload = vec!["target/sandboxd_0.1.0_amd64.deb".into()];
//! let mut machine = Machine::boot(&spec).await?;
//! machine.install_payload_debs(Duration::from_secs(120)).await?;
//! let url = format!("http://127.0.0.1:{}/api/health", machine.port(8080)?);
//! # let _ = url;
//! machine.down().await?;
//! # Ok(()) }
//! ```
//!
//! - [`image`](ImageCache): `debootstrap` of Debian's packages, a raw ext4
//!   disk made with `mkfs.ext4 -d`, the kernel and initrd for direct boot;
//!   cached by a hash of what made it, built into a temporary name and
//!   renamed into place.
//! - [`Machine`]: a qcow2 overlay per boot on the cached disk; QEMU with
//!   user-mode networking (guest ports forwarded from 127.0.0.1 only, no
//!   other network), its monitor (QMP: pause, resume, link down,
//!   powerdown, quit) and the guest agent (exec, files).
//! - [`MachineAccess`]: how another process (a test's faults, its reaper)
//!   reaches a booted machine: a second QMP socket kept for it, and the
//!   guest agent, which [`Machine`] lets go of after each use. A data disk
//!   ([`MachineSpec::data_disk_mib`]) is mounted at [`DATA_DIR`].
//! - Cleanup: each boot's and each build's processes run in one process
//!   group, made (and told to a [`MachineObserver`]) before they start,
//!   whose guard kills them and removes their files when the owning
//!   process dies, SIGKILL included.
//!
//! # Known limitations
//!
//! - Building an image needs root (`debootstrap`, `chroot`) and Debian's
//!   mirror; booting needs `qemu-system-x86` and `qemu-utils`.
//! - Where KVM is not usable, the guest runs under TCG (emulation): boots
//!   take tens of seconds, more on a loaded host.
//! - The guest has no network but the forwarded ports: a `.deb`'s
//!   dependencies must be in the image.

use std::time::Duration;

mod agent;
mod boot;
mod data;
mod error;
mod fault;
mod guard;
mod image;
mod qmp;
mod record;

pub use agent::GuestOutput;
pub use boot::{
    Accel, AccelChoice, AccelPolicy, DownReport, Machine, MachineObserver, MachineSpec, MachineStep,
};
pub use data::{DATA_DIR, DATA_LABEL};
pub use error::MachineError;
pub use fault::{host_time_ns, MachineAccess};
pub use image::{Image, ImageCache, ImageRecipe, Provenance, DEFAULT_MIRROR};
pub use record::{EndedMachine, MachineRecord, Owner, RECORD_FILE};

/// `program` must be on PATH; the error names the package to install.
fn require(
    program: &'static str,
    purpose: &'static str,
    package: &'static str,
) -> Result<(), MachineError> {
    // Also the sbin dirs, which a user's PATH may lack (debootstrap,
    // mkfs.ext4 live there).
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<std::path::PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from));
    match dirs
        .iter()
        .any(|d| crate::process::is_executable(&d.join(program)))
    {
        true => Ok(()),
        false => Err(MachineError::Missing {
            program,
            purpose,
            package,
        }),
    }
}

/// Runs `cmd` to its end, for at most `limit`; its stdout on success.
async fn run_bounded(
    mut cmd: tokio::process::Command,
    limit: Duration,
) -> Result<String, MachineError> {
    let shown = shorten(&format!("{:?}", cmd.as_std()));
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().map_err(|e| MachineError::Command {
        command: shown.clone(),
        status: "not started".to_owned(),
        output: e.to_string(),
    })?;
    let pid = child.id();
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Ok(Ok(out)) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Err(MachineError::Command {
                command: shown,
                status: out.status.to_string(),
                output: tail(&text, 2000),
            })
        }
        Ok(Err(e)) => Err(MachineError::Command {
            command: shown,
            status: "not waited for".to_owned(),
            output: e.to_string(),
        }),
        Err(_) => {
            // Its descendants are in the guard's group: the caller's
            // abandoning the guard ends them.
            if let Some(pid) = pid {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Err(MachineError::CommandTimeout {
                command: shown,
                limit,
            })
        }
    }
}

/// The last `max` bytes of `text` (at a character boundary).
fn tail(text: &str, max: usize) -> String {
    let start = text.len().saturating_sub(max);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

fn shorten(command: &str) -> String {
    const MAX: usize = 300;
    match command.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &command[..i]),
        None => command.to_owned(),
    }
}

/// Polls `done` every 50 ms until it holds (true) or `limit` passes (false).
async fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
