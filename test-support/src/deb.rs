//! sandboxd's Debian package, built from this checkout's binaries by
//! `sandboxd/packaging/deb/build-deb.sh`: what a machine pod installs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `sandboxd_<version>_amd64.deb` into `out_dir` from
/// [`crate::sandboxd_bin`] and [`crate::sandboxctl_bin`], and answers its
/// path. Panics with the script's output when it fails (dpkg-dev missing
/// included: the message names the package to install).
pub fn sandboxd_deb(out_dir: &Path) -> PathBuf {
    let script = crate::binary::workspace().join("sandboxd/packaging/deb/build-deb.sh");
    let output = Command::new("sh")
        .arg(&script)
        .arg(crate::sandboxd_bin())
        .arg(crate::sandboxctl_bin())
        .arg(out_dir)
        .output()
        .unwrap_or_else(|e| panic!("failed to run sh {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed ({}): {}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    let deb = PathBuf::from(printed.trim());
    assert!(
        deb.is_file(),
        "{} printed {printed:?}, not a .deb",
        script.display()
    );
    deb
}
