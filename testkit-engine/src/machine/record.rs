//! A machine's record, `machine.json` in its run directory: what another
//! process needs to list it, reach it and end it (`pod ls`, `pod down`,
//! the janitor, a run's residue sweep) once the process that booted it is
//! gone or has let it go (`--keep`).
//!
//! It is written once QEMU runs, and again when its owner keeps it: a
//! machine whose owner is named and dead was abandoned (its guard and the
//! owner's watchdog normally end it first); a machine with no owner was
//! kept, and is left until someone brings it down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::MachineError;

/// The record's file name, in the machine's run directory.
pub const RECORD_FILE: &str = "machine.json";

/// The prefix of a machine's run directory.
pub(crate) const RUN_DIR_PREFIX: &str = "testkit-machine-";

/// What is known of a machine from outside the process that booted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MachineRecord {
    /// The image it booted (`debian-12`).
    pub image: String,
    /// QEMU's pid.
    pub qemu_pid: i32,
    /// QEMU's start time (clock ticks since boot), against pid reuse.
    pub qemu_start_ticks: Option<u64>,
    /// The process group QEMU runs in.
    pub pgid: i32,
    /// Forwarded ports: guest port → port on 127.0.0.1.
    pub ports: BTreeMap<u16, u16>,
    /// The run directory (overlay, sockets, logs).
    pub run_dir: PathBuf,
    /// The run it was booted for, when a run booted it.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The process that booted it and ends it; `None` once kept.
    pub owner: Option<Owner>,
}

/// The process that owns a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Owner {
    /// Its pid.
    pub pid: u32,
    /// Its start time, against pid reuse.
    pub start_ticks: Option<u64>,
}

impl Owner {
    /// This process.
    pub(crate) fn this_process() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start_ticks: crate::process::start_ticks(pid as i32),
        }
    }

    fn alive(&self) -> bool {
        self.start_ticks
            .is_some_and(|t| crate::process::is_running(self.pid as i32, t))
    }
}

/// What [`MachineRecord::end`] did, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndedMachine {
    /// QEMU was running when the end began (else only files were left).
    pub was_running: bool,
    /// QEMU needed SIGKILL after the grace.
    pub killed: bool,
}

impl MachineRecord {
    /// The record in `run_dir`, if there is a readable one.
    pub fn read(run_dir: &Path) -> Option<MachineRecord> {
        let bytes = std::fs::read(run_dir.join(RECORD_FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record (whole, or not at all: through a renamed file).
    pub(crate) fn write(&self) -> Result<(), MachineError> {
        let path = self.run_dir.join(RECORD_FILE);
        let partial = self.run_dir.join(".machine.json.partial");
        let bytes = serde_json::to_vec_pretty(self).expect("a record serialises");
        std::fs::write(&partial, bytes).map_err(MachineError::io("write", &partial))?;
        std::fs::rename(&partial, &path).map_err(MachineError::io("write", &path))
    }

    /// The machine of a pod whose private directory is `private_dir` (its
    /// run directory is in it), if it is a machine pod.
    pub fn of_pod(private_dir: &Path) -> Option<MachineRecord> {
        run_dirs_in(private_dir).find_map(|d| MachineRecord::read(&d))
    }

    /// Every machine recorded under `parent`: run directories in it, and
    /// in the pods' private directories (`testkit-pod-*`) in it.
    pub fn all_under(parent: &Path) -> Vec<MachineRecord> {
        let mut found: Vec<MachineRecord> = run_dirs_in(parent)
            .filter_map(|d| MachineRecord::read(&d))
            .collect();
        if let Ok(entries) = std::fs::read_dir(parent) {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with("testkit-pod-")
                {
                    found
                        .extend(run_dirs_in(&entry.path()).filter_map(|d| MachineRecord::read(&d)));
                }
            }
        }
        found.sort_by(|a, b| a.run_dir.cmp(&b.run_dir));
        found
    }

    /// The guest's console log.
    pub fn console_log(&self) -> PathBuf {
        self.run_dir.join("console.log")
    }

    /// QEMU's own log (its stderr).
    pub fn qemu_log(&self) -> PathBuf {
        self.run_dir.join("qemu.stderr.log")
    }

    /// A QMP monitor socket left free for people and tests (the machine's
    /// own connection and the faults' hold the other two).
    pub fn monitor_socket(&self) -> PathBuf {
        self.run_dir.join(super::qmp::USER_MONITOR)
    }

    /// Whether the QEMU this record names runs (not a later process with
    /// its pid).
    pub fn qemu_running(&self) -> bool {
        self.qemu_start_ticks
            .is_some_and(|t| crate::process::is_running(self.qemu_pid, t))
    }

    /// Kept: its owner let it go, and it runs until someone ends it.
    pub fn kept(&self) -> bool {
        self.owner.is_none()
    }

    /// Its owner is named and gone: nothing will end it but a janitor.
    pub fn orphaned(&self) -> bool {
        self.owner.is_some_and(|o| !o.alive())
    }

    /// Ends the machine from outside its owner: SIGTERM to its group (QEMU
    /// exits on it), SIGKILL past `grace`, QEMU proven gone, then its run
    /// directory (the overlay) removed and proven gone. The group is
    /// signalled only while the recorded QEMU is in it: a group whose
    /// members are all gone may be another's by now.
    pub async fn end(&self, grace: Duration) -> Result<EndedMachine, MachineError> {
        let was_running = self.qemu_running();
        let mut killed = false;
        if was_running {
            let in_group = crate::process::group_members(self.pgid)
                .iter()
                .any(|m| m.0 == self.qemu_pid);
            let (pgid, ticks) = match in_group {
                true => (self.pgid, None),
                // Only QEMU, by its own pid and start time.
                false => (self.qemu_pid, self.qemu_start_ticks),
            };
            match crate::process::terminate_group(pgid, ticks, grace).await {
                Ok(ended) => killed = !ended.killed.is_empty(),
                Err(survivors) => {
                    return Err(MachineError::Survived(format!(
                        "QEMU (pid {}) and its group {pgid} survived SIGTERM and SIGKILL: \
                         {survivors:?}",
                        self.qemu_pid
                    )))
                }
            }
            if self.qemu_running() {
                return Err(MachineError::Survived(format!(
                    "QEMU (pid {}) still runs after SIGTERM and SIGKILL",
                    self.qemu_pid
                )));
            }
        }
        match std::fs::remove_dir_all(&self.run_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(MachineError::io("remove", &self.run_dir)(e))
            }
            _ => {}
        }
        if self.run_dir.exists() {
            return Err(MachineError::Survived(format!(
                "{} (the overlay) is still there after its removal",
                self.run_dir.display()
            )));
        }
        Ok(EndedMachine {
            was_running,
            killed,
        })
    }

    /// `QEMU pid 123, image debian-12, 127.0.0.1:40123 → guest 8080`.
    pub fn describe(&self) -> String {
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(|(guest, host)| format!("127.0.0.1:{host} → guest {guest}"))
            .collect();
        format!(
            "QEMU pid {}, image {}, {}",
            self.qemu_pid,
            self.image,
            ports.join(", ")
        )
    }
}

/// The machine run directories directly in `dir`.
fn run_dirs_in(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(RUN_DIR_PREFIX))
        .map(|e| e.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of a `sleep` standing in for QEMU, in a group of its own,
    /// in a run dir under `parent`'s pod dir.
    fn stand_in(parent: &Path, owner: Option<Owner>) -> (MachineRecord, std::process::Child) {
        use std::os::unix::process::CommandExt;
        let pod = parent.join("testkit-pod-x");
        let run_dir = pod.join("testkit-machine-y");
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("overlay.qcow2"), b"x").unwrap();
        let child = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let record = MachineRecord {
            image: "debian-12".to_owned(),
            qemu_pid: pid,
            qemu_start_ticks: crate::process::start_ticks(pid),
            pgid: pid,
            ports: BTreeMap::from([(8080, 41234)]),
            run_dir,
            run_id: Some("r1".to_owned()),
            owner,
        };
        record.write().unwrap();
        (record, child)
    }

    #[tokio::test]
    async fn a_recorded_machine_is_found_ended_and_its_overlay_removed() {
        let parent = tempfile::tempdir().unwrap();
        // An owner that is gone: a process that has exited.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let owner = Owner {
            pid: gone.id(),
            start_ticks: crate::process::start_ticks(gone.id() as i32),
        };
        gone.wait().unwrap();
        let (record, mut child) = stand_in(parent.path(), Some(owner));
        let found = MachineRecord::all_under(parent.path());
        assert_eq!(found, std::slice::from_ref(&record));
        assert_eq!(
            MachineRecord::of_pod(&parent.path().join("testkit-pod-x")),
            Some(record.clone())
        );
        assert!(record.qemu_running() && record.orphaned() && !record.kept());
        let ended = record.end(Duration::from_secs(5)).await.unwrap();
        assert!(ended.was_running);
        assert!(child.try_wait().unwrap().is_some(), "the stand-in runs on");
        assert!(!record.run_dir.exists());
        assert!(MachineRecord::all_under(parent.path()).is_empty());
    }

    #[tokio::test]
    async fn a_kept_machine_is_no_orphan_and_one_whose_owner_lives_neither() {
        let parent = tempfile::tempdir().unwrap();
        let (kept, mut child) = stand_in(parent.path(), None);
        assert!(kept.kept() && !kept.orphaned());
        let mut owned = kept.clone();
        owned.owner = Some(Owner::this_process());
        assert!(!owned.kept() && !owned.orphaned());
        child.kill().unwrap();
        child.wait().unwrap();
        // QEMU gone already: only its files are left to remove.
        let ended = kept.end(Duration::from_secs(5)).await.unwrap();
        assert!(!ended.was_running);
        assert!(!kept.run_dir.exists());
    }
}
