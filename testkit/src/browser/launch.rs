//! Finding Chromium and starting it: headless, in a fresh profile of its own,
//! in a process group of its own, with the DevTools protocol on fds 3 and 4.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use crate::engine::install::What;

/// The command that installs Chromium from Debian's packages.
pub const INSTALL_HINT: &str = What::Chromium.install_hint();

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

/// Chromium's program, as [`find_chromium`] finds it with this process's
/// PATH; where it is missing and `setting` names none, installed first when
/// it can be (Debian, as root, unless `TESTKIT_INSTALL=never`: see
/// [`crate::engine::install`]). A program `TESTKIT_CHROMIUM` names is never
/// installed: it is the user's choice of program, perhaps not Debian's.
/// Blocks while another process installs it.
pub(super) fn chromium(setting: Option<&str>) -> Result<PathBuf, String> {
    match setting {
        Some(_) => find_chromium(setting, std::env::var_os("PATH")),
        None => crate::engine::install::ensure_installed(What::Chromium, || {
            find_chromium(None, std::env::var_os("PATH"))
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

    /// Set in the copies of [`the_opt_out_without_chromium_names_the_command`]
    /// that the tests below start: such a copy looks for Chromium and
    /// prints what it found, for its parent to check. The child is a part
    /// of a real test, never a test that passes without checking anything.
    const CHILD: &str = "TESTKIT_TEST_OPT_OUT_CHILD";

    /// The test whose copies look for Chromium as a process of their own.
    const CHILD_TEST: &str =
        "browser::launch::tests::the_opt_out_without_chromium_names_the_command";

    #[test]
    fn the_opt_out_without_chromium_names_the_command() {
        if std::env::var_os(CHILD).is_some() {
            match chromium(None) {
                Ok(p) => println!("found {}", p.display()),
                Err(e) => println!("error: {e}"),
            }
            return;
        }
        let empty = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD, "1")
            .env("TESTKIT_INSTALL", "never")
            .env("PATH", empty.path())
            .env_remove("TESTKIT_CHROMIUM")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains("error: Chromium not found"), "{stdout}");
        assert!(stdout.contains(INSTALL_HINT), "{stdout}");
        assert!(
            stdout.contains("not installed: TESTKIT_INSTALL=never"),
            "{stdout}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("installing"), "{stderr}");
    }

    /// As root on Debian, three processes missing Chromium at once: the
    /// first installs it (with a stand-in `apt-get` whose install fails
    /// until `apt-get update` ran), the others wait for it and find it.
    #[test]
    fn one_of_many_processes_installs_and_the_others_find_it() {
        // What it checks happens only as root on Debian: elsewhere it fails,
        // saying so, rather than pass having checked nothing.
        assert!(
            nix::unistd::geteuid().is_root() && Path::new("/etc/debian_version").exists(),
            "this test needs root on Debian, where testkit installs Chromium itself"
        );
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let apt_get = dir.path().join("apt-get");
        std::fs::write(
            &apt_get,
            format!(
                "#!/bin/sh\necho \"$*\" >> {d}/apt.log\ncase \"$1\" in\n\
                 update) : > {d}/updated ;;\n\
                 install) [ -e {d}/updated ] || exit 100; /bin/sleep 1; \
                 printf '#!/bin/sh\\n' > {d}/chromium; /bin/chmod +x {d}/chromium ;;\nesac\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&apt_get, std::fs::Permissions::from_mode(0o755)).unwrap();
        let children: Vec<_> = (0..3)
            .map(|_| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", CHILD_TEST, "--nocapture"])
                    .env(CHILD, "1")
                    .env_remove("TESTKIT_INSTALL")
                    .env("PATH", dir.path())
                    .env_remove("TESTKIT_CHROMIUM")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut stderr = String::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains(&format!("found {d}/chromium")), "{stdout}");
            stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        let log = std::fs::read_to_string(dir.path().join("apt.log")).unwrap();
        assert_eq!(log, "install -y chromium\nupdate\ninstall -y chromium\n");
        assert_eq!(
            stderr.matches("installing Debian's chromium").count(),
            1,
            "{stderr}"
        );
        assert!(stderr.contains("testkit: installed Chromium:"), "{stderr}");
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
