//! Finding Chromium and starting it: headless, in a fresh profile of its own,
//! in a process group of its own, with the DevTools protocol on a WebSocket
//! of loopback.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

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
pub(super) fn chromium(
    setting: Option<&str>,
    install: crate::engine::settings::Install,
) -> Result<PathBuf, String> {
    match setting {
        Some(_) => find_chromium(setting, std::env::var_os("PATH")),
        None => crate::engine::install::ensure_installed(What::Chromium, install, || {
            find_chromium(None, std::env::var_os("PATH"))
        })
        .map_err(|e| crate::engine::error_chain(&e)),
    }
}

/// A started Chromium: the group leader and its DevTools WebSocket.
pub(super) struct Started {
    pub(super) pid: i32,
    pub(super) start_ticks: Option<u64>,
    pub(super) ws_url: String,
}

/// The variable that tags every process of one browser: its crash handler
/// double-forks out of the process group (and `--disable-crashpad-for-testing`
/// breaks its network service), so that one is found by this tag instead.
pub(super) const TAG_VAR: &str = "TESTKIT_BROWSER_TAG";

/// How long a started Chromium may take to open its DevTools port.
const PORT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a browser is started with: who it belongs to, where it keeps its
/// profile and its output.
pub(super) struct Launch<'a> {
    pub(super) program: &'a Path,
    pub(super) profile: &'a Path,
    /// `TESTKIT_BROWSER_TAG`'s value in every process of this browser.
    pub(super) tag: &'a str,
    /// `TESTKIT_BROWSER_RUN`'s value: the run whose runner ends it.
    pub(super) run_id: &'a str,
    pub(super) log: File,
}

/// Starts Chromium headless in its own process group, with its DevTools
/// WebSocket on a port of loopback the kernel picks, and waits until it
/// says which. The browser outlives the test that started it: it carries
/// no test's process tag, and nothing kills it when its `Child` goes.
pub(super) async fn start(launch: Launch<'_>) -> std::io::Result<Started> {
    let Launch {
        program,
        profile,
        tag,
        run_id,
        log,
    } = launch;
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--headless")
        .arg("--remote-debugging-address=127.0.0.1")
        .arg("--remote-debugging-port=0")
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
        .env(crate::engine::browser::RUN_VAR, run_id)
        // It is the run's, not the test's: no test's leftover.
        .env_remove(crate::engine::settings::var::PROCESS_TAG)
        .env("HOME", profile)
        .env("XDG_CONFIG_HOME", profile.join("config"))
        .env("XDG_CACHE_HOME", profile.join("cache"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(log))
        .kill_on_drop(false);
    let (mut child, pgid) = crate::engine::process::spawn_in_group(&mut command)?;
    let start_ticks = crate::engine::process::start_ticks(pgid);
    // Chromium writes the port and the browser's path to this file once
    // it listens.
    let active = profile.join("DevToolsActivePort");
    let deadline = tokio::time::Instant::now() + PORT_LIMIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(&active) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                if port.parse::<u16>().is_ok() && path.starts_with('/') {
                    return Ok(Started {
                        pid: pgid,
                        start_ticks,
                        ws_url: format!("ws://127.0.0.1:{port}{path}"),
                    });
                }
            }
        }
        let failed = |why: String| {
            crate::engine::process::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            std::io::Error::other(why)
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(failed(format!(
                "Chromium exited ({status}) before it opened its DevTools port"
            )));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(failed(format!(
                "Chromium did not open its DevTools port within {}",
                humantime::format_duration(PORT_LIMIT)
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
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
            let settings = crate::engine::settings::Settings::from_env().unwrap();
            match chromium(None, settings.install) {
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
