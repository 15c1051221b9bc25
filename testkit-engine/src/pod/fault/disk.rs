//! A node's data disk filled: a file of the fault written into the
//! node's data directory (`[pod.container.nodes.NAME] disk`, a tmpfs
//! volume of a bounded size) until no byte is left, reached from this
//! host through the container's root (`/proc/<pid>/root`), so the image
//! needs no shell. Shown to take by the free space (none) and a write
//! that fails with ENOSPC; undone by removing the file, proven by the
//! file gone and a write that fits again.

use std::io::Write;
use std::path::{Path, PathBuf};

/// How much a proof writes, and removes, to show the disk has room.
const ROOM_PROBE: usize = 64 * 1024;

/// The file of the fault, and the directory it fills, as this host sees
/// them through the root of process `pid`.
pub(super) fn paths(pid: u32, target: &str, file: &str) -> (PathBuf, PathBuf) {
    let dir = Path::new(&format!("/proc/{pid}/root")).join(target.trim_start_matches('/'));
    let filler = dir.join(file);
    (dir, filler)
}

/// Bytes free to an unprivileged writer, and the filesystem's size.
pub(super) fn free_bytes(dir: &Path) -> std::io::Result<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    let unit = s.fragment_size() as u64;
    Ok((s.blocks_available() as u64 * unit, s.blocks() as u64 * unit))
}

/// Writes `filler` until the filesystem of `dir` has no room left; the
/// bytes written. Refuses a directory whose filesystem is larger than
/// `largest` (not the bounded volume it should be: filling it would fill
/// the host's disk).
pub(super) fn fill(dir: &Path, filler: &Path, largest: u64) -> std::io::Result<u64> {
    let (_, size) = free_bytes(dir)?;
    if size > largest {
        return Err(std::io::Error::other(format!(
            "{} is on a filesystem of {} MiB, larger than the {} MiB a data disk may be: \
             not the node's bounded volume, and filling it would fill the host's disk",
            dir.display(),
            size >> 20,
            largest >> 20
        )));
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(filler)?;
    let chunk = vec![0u8; 256 * 1024];
    let mut written = 0u64;
    // Chunks, then single bytes for the rest of the last page: a write
    // that finds no room at all ends it.
    for size in [chunk.len(), 4096, 1] {
        loop {
            match f.write(&chunk[..size]) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => return Err(e),
            }
        }
    }
    f.sync_all().or_else(|e| match e.raw_os_error() {
        Some(nix::libc::ENOSPC) => Ok(()),
        _ => Err(e),
    })?;
    Ok(written)
}

/// Whether a write of `bytes` into `dir` fits: the probe file is removed
/// either way. `Ok(false)` only for ENOSPC: any other failure is an error.
pub(super) fn write_fits(dir: &Path, bytes: usize) -> std::io::Result<bool> {
    let probe = dir.join(".testkit-room-probe");
    let result = (|| {
        let mut f = std::fs::File::create(&probe)?;
        f.write_all(&vec![0u8; bytes])?;
        f.sync_all()
    })();
    let _ = std::fs::remove_file(&probe);
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A write that fits when the disk is not full.
pub(super) fn room_back(dir: &Path) -> std::io::Result<bool> {
    write_fits(dir, ROOM_PROBE)
}

/// Removes `filler`; whether it was there.
pub(super) fn free(filler: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(filler) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_larger_than_a_data_disk_is_never_filled() {
        let dir = tempfile::tempdir().unwrap();
        let filler = dir.path().join("fill");
        let e = fill(dir.path(), &filler, 4096).unwrap_err();
        assert!(
            e.to_string().contains("not the node's bounded volume"),
            "{e}"
        );
        assert!(!filler.exists(), "nothing written");
    }

    #[test]
    fn the_fault_reaches_the_data_dir_through_the_containers_root() {
        let (dir, file) = paths(42, "/home/pod", ".testkit-fill-x");
        assert_eq!(dir, Path::new("/proc/42/root/home/pod"));
        assert_eq!(file, Path::new("/proc/42/root/home/pod/.testkit-fill-x"));
    }
}
