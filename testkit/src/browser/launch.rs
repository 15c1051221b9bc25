//! Finding Chromium and starting it: headless, in a fresh profile of its own,
//! in a process group of its own, with the DevTools protocol on fds 3 and 4.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

/// The command that installs Chromium from Debian's packages.
pub const INSTALL_HINT: &str = "apt-get update && apt-get install -y chromium";

/// The programs looked for on PATH, in order: Debian's `chromium`, and its
/// `chromium-headless-shell`.
const PROGRAMS: &[&str] = &["chromium", "chromium-headless-shell"];

/// Chromium's program: `setting` (`TESTKIT_CHROMIUM`, a path or a name on
/// PATH) when given, else the first of [`PROGRAMS`] on `path` (PATH's value).
/// The error says how to install it.
pub(super) fn find_chromium(
    setting: Option<&str>,
    path: Option<OsString>,
) -> Result<PathBuf, String> {
    let dirs: Vec<PathBuf> = path
        .as_deref()
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    let lookup = |program: &str| -> Option<PathBuf> {
        if program.contains('/') {
            let p = PathBuf::from(program);
            return crate::engine::process::is_executable(&p).then_some(p);
        }
        dirs.iter()
            .map(|d| d.join(program))
            .find(|c| crate::engine::process::is_executable(c))
    };
    let var = crate::engine::settings::var::CHROMIUM;
    match setting {
        Some(program) => lookup(program).ok_or_else(|| {
            format!(
                "Chromium not found: {var}={program:?} is not an executable file (nor a program on PATH); \
                 install Chromium with `{INSTALL_HINT}`, or point {var} at it"
            )
        }),
        None => PROGRAMS.iter().find_map(|p| lookup(p)).ok_or_else(|| {
            format!(
                "Chromium not found: none of {} is on PATH; install it with `{INSTALL_HINT}`, \
                 or set {var} to its path",
                PROGRAMS.join(", ")
            )
        }),
    }
}

/// A started Chromium: the group leader, and the pipe ends of its DevTools
/// protocol.
pub(super) struct Started {
    pub(super) child: tokio::process::Child,
    pub(super) pgid: i32,
    pub(super) start_ticks: Option<u64>,
    pub(super) to_browser: File,
    pub(super) from_browser: File,
}

/// A pipe whose two ends are close-on-exec and numbered above 4, so that
/// putting the child's ends on fds 3 and 4 never overwrites one of them.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    Ok((high(r)?, high(w)?))
}

fn high(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own, or -1.
    let new = unsafe { nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` was just returned by fcntl and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// The variable that tags every process of one browser: its crash handler
/// double-forks out of the process group (and `--disable-crashpad-for-testing`
/// breaks its network service), so that one is found by this tag instead.
pub(super) const TAG_VAR: &str = "TESTKIT_BROWSER_TAG";

/// Starts `program` headless in the profile `profile`, its stderr to `log`,
/// every process of it carrying `TESTKIT_BROWSER_TAG=tag`.
pub(super) fn start(
    program: &Path,
    profile: &Path,
    tag: &str,
    log: File,
) -> std::io::Result<Started> {
    let (browser_reads, we_write) = pipe()?;
    let (we_read, browser_writes) = pipe()?;
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--headless")
        .arg("--remote-debugging-pipe")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--password-store=basic",
            "--use-mock-keychain",
            "--mute-audio",
            "--hide-scrollbars",
            "--window-size=1280,900",
        ]);
    // Chromium refuses to run as root with its sandbox on.
    if nix::unistd::geteuid().is_root() {
        command.arg("--no-sandbox");
    }
    command
        .arg("about:blank")
        .env(TAG_VAR, tag)
        .env("HOME", profile)
        .env("XDG_CONFIG_HOME", profile.join("config"))
        .env("XDG_CACHE_HOME", profile.join("cache"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(log))
        .kill_on_drop(true);
    let (r, w): (RawFd, RawFd) = (browser_reads.as_raw_fd(), browser_writes.as_raw_fd());
    // SAFETY: only dup2, which is async-signal-safe, runs between fork and
    // exec; the fds are open until `spawn` returns.
    unsafe {
        command.pre_exec(move || {
            if nix::libc::dup2(r, 3) < 0 || nix::libc::dup2(w, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (child, pgid) = crate::engine::process::spawn_in_group(&mut command)?;
    drop((browser_reads, browser_writes));
    Ok(Started {
        child,
        pgid,
        start_ticks: crate::engine::process::start_ticks(pgid),
        to_browser: File::from(we_write),
        from_browser: File::from(we_read),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_chromium_names_the_install_command() {
        let e = find_chromium(None, Some(OsString::new())).unwrap_err();
        assert!(
            e.contains("apt-get update && apt-get install -y chromium"),
            "{e}"
        );
        assert!(e.contains("TESTKIT_CHROMIUM"), "{e}");
        let e = find_chromium(Some("/no/such/chromium"), None).unwrap_err();
        assert!(e.contains("TESTKIT_CHROMIUM=\"/no/such/chromium\""), "{e}");
        assert!(e.contains(INSTALL_HINT), "{e}");
    }

    #[test]
    fn a_program_is_found_on_path_or_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("chromium");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = Some(dir.path().as_os_str().to_owned());
        assert_eq!(find_chromium(None, path.clone()).unwrap(), program);
        assert_eq!(
            find_chromium(Some(program.to_str().unwrap()), None).unwrap(),
            program
        );
        assert_eq!(find_chromium(Some("chromium"), path).unwrap(), program);
    }
}
