//! The installers of a machine pod: what puts the product on the booted
//! guest. `deb`: its packages, with `dpkg -i` (maintainer scripts and
//! all). `binaries`: files copied to named paths, commands run, then the
//! product's unit enabled and started, as an administrator without a
//! package would.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::spec::{BinariesLaunch, MachineLaunch};
use crate::machine::{GuestOutput, Machine, MachineError};

/// The files the boot puts on the payload disk for `m`'s installer, made
/// in `stage` when they need new names: the packages as they are; the
/// files of `binaries` each as `<n>-<name>`, so that two files of one
/// name do not meet.
pub(super) fn payload(m: &MachineLaunch, stage: &Path) -> Result<Vec<PathBuf>, MachineError> {
    let Some(b) = &m.binaries else {
        return Ok(m.debs.clone());
    };
    std::fs::create_dir_all(stage).map_err(MachineError::io("create", stage))?;
    let mut staged = Vec::new();
    for (n, (from, _, _)) in b.files.iter().enumerate() {
        let name = from
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let at = stage.join(staged_name(n, &name));
        std::fs::copy(from, &at).map_err(MachineError::io("copy", from))?;
        staged.push(at);
    }
    Ok(staged)
}

fn staged_name(n: usize, name: &str) -> String {
    format!("{n}-{name}")
}

/// Installs the product on `machine` with `m`'s installer, within
/// `limit`: what the installer printed.
pub(super) async fn install(
    m: &MachineLaunch,
    machine: &mut Machine,
    limit: Duration,
) -> Result<String, (&'static str, MachineError)> {
    match &m.binaries {
        None => machine
            .install_payload_debs(limit)
            .await
            .map(|out| printed(&out))
            .map_err(|e| ("install its packages (dpkg -i)", e)),
        Some(b) => install_binaries(b, machine, limit).await,
    }
}

async fn install_binaries(
    b: &BinariesLaunch,
    machine: &mut Machine,
    limit: Duration,
) -> Result<String, (&'static str, MachineError)> {
    let started = Instant::now();
    let left = || limit.saturating_sub(started.elapsed());
    let at = machine
        .mount_payload()
        .await
        .map_err(|e| ("mount its files", e))?;
    let mut log = String::new();
    for (n, (from, to, mode)) in b.files.iter().enumerate() {
        let name = from
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let source = format!("{at}/{}", staged_name(n, &name));
        let mode = format!("{mode:o}");
        let argv = ["install", "-D", "-m", &mode, &source, to];
        log.push_str(&run(machine, &argv, left(), "copy its files").await?);
    }
    for command in &b.setup {
        let argv: Vec<&str> = command.iter().map(String::as_str).collect();
        log.push_str(&run(machine, &argv, left(), "run [pod.vm.binaries] setup").await?);
    }
    log.push_str(
        &run(
            machine,
            &["systemctl", "daemon-reload"],
            left(),
            "start its unit",
        )
        .await?,
    );
    let argv = ["systemctl", "enable", "--now", b.unit.as_str()];
    log.push_str(&run(machine, &argv, left(), "start its unit").await?);
    Ok(log)
}

/// Runs `argv` in the guest; a failure is `what` the install was doing.
async fn run(
    machine: &mut Machine,
    argv: &[&str],
    limit: Duration,
    what: &'static str,
) -> Result<String, (&'static str, MachineError)> {
    let out = machine
        .exec(argv, &[], limit)
        .await
        .map_err(|e| (what, e))?;
    if out.success() {
        return Ok(format!("$ {}\n{}", argv.join(" "), printed(&out)));
    }
    Err((
        what,
        MachineError::Command {
            command: format!("(guest) {}", argv.join(" ")),
            status: match (out.code, out.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "unknown".to_owned(),
            },
            output: printed(&out),
        },
    ))
}

fn printed(out: &GuestOutput) -> String {
    format!("{}{}", out.stdout_text(), out.stderr_text())
}
