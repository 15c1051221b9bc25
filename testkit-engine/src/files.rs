//! Files that hold secrets: written atomically with mode 0600, so that a
//! reader never sees half a file and no other user sees any of it.

use std::path::Path;

/// Writes `data` to `path` atomically with mode 0600.
pub fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!(
        "tmp{}-{}",
        std::process::id(),
        crate::ids::random_id(6)
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Opens (creating it, mode 0600, never truncating) a file that is only
/// ever `flock`ed: a lock of the run, the pod or a budget slot.
pub fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}
