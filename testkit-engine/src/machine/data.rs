//! A machine's data disk: a blank ext4 disk of a bounded size, attached as
//! one more virtio disk and mounted in the guest at [`DATA_DIR`], where
//! the product keeps what a full disk should hit, and what a disk fault
//! fills.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guard::Guard;
use super::{run_bounded, Machine, MachineError};

/// Where the data disk is mounted in the guest.
pub const DATA_DIR: &str = "/var/lib/testkit-data";

/// The data disk's file system label, by which the guest mounts it.
pub const DATA_LABEL: &str = "testkit-data";

/// Makes the data disk in `run_dir`: `mib` MiB of ext4 with no blocks
/// reserved for root (a disk fault run as root must fill what the product
/// sees as free).
pub(super) async fn make_disk(
    guard: &Guard,
    run_dir: &Path,
    mib: u32,
) -> Result<PathBuf, MachineError> {
    let disk = run_dir.join("data.img");
    let file = std::fs::File::create(&disk).map_err(MachineError::io("create", &disk))?;
    file.set_len(u64::from(mib) << 20)
        .map_err(MachineError::io("size", &disk))?;
    drop(file);
    let mut mkfs = guard.command("mkfs.ext4");
    mkfs.args(["-q", "-F", "-m", "0", "-L", DATA_LABEL])
        .arg(&disk);
    run_bounded(mkfs, Duration::from_secs(120)).await?;
    Ok(disk)
}

impl Machine {
    /// Mounts the data disk at [`DATA_DIR`] in the guest, and lists it in
    /// the guest's `/etc/fstab` so that a reboot mounts it again; answers
    /// that path. A machine booted without one fails here.
    pub async fn mount_data_disk(&mut self) -> Result<&'static str, MachineError> {
        let script = format!(
            "mkdir -p {DATA_DIR} && (mountpoint -q {DATA_DIR} || mount LABEL={DATA_LABEL} {DATA_DIR}) \
             && (grep -q 'LABEL={DATA_LABEL} ' /etc/fstab || \
                 echo 'LABEL={DATA_LABEL} {DATA_DIR} ext4 defaults,nofail 0 2' >> /etc/fstab)"
        );
        let out = self
            .exec(&["sh", "-c", &script], &[], Duration::from_secs(60))
            .await?;
        if !out.success() {
            return Err(MachineError::Command {
                command: format!("(guest) mount LABEL={DATA_LABEL} {DATA_DIR}"),
                status: format!("{:?}", out.code),
                output: super::tail(&format!("{}{}", out.stdout_text(), out.stderr_text()), 2000),
            });
        }
        Ok(DATA_DIR)
    }
}
