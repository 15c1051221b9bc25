//! Installing the programs testkit needs where they are missing, as
//! `playwright install --with-deps` does: Debian's Chromium for browser
//! tests, and `cargo-nextest` for the runner.
//!
//! Why: the README's two commands are meant to work on a fresh clone of a
//! fresh machine. Without this, they fail with "not found" and a command to
//! run by hand, which only `.ci/run` ran. Now the first process that needs a
//! program installs it, saying so on stderr, and every other process that
//! needs it at the same time waits for that one (a lock file in the
//! temporary folder) and then finds it: one install per machine.
//!
//! Where a program cannot be installed (not Debian, not root, the install
//! failed, or `TESTKIT_INSTALL=never`), the error is the one of old, naming
//! the command to run, and says why it was not installed.
//!
//! The decision ([`decide`]) takes its inputs as values ([`Facts`]) so that
//! it is tested without being root nor running `apt-get`.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::settings::var::INSTALL;
use crate::settings::Install;

/// A program that is missing and was not made available. Its text starts
/// with what finding it said (which names the command that installs it);
/// print it with its causes (`error_chain`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// Missing, and not installed here ([`decide`] says why).
    #[error("{missing} ({why})")]
    NotInstalled {
        /// What finding it said.
        missing: String,
        /// Why it was not installed.
        why: String,
    },
    /// The install ran and failed.
    #[error("{missing} (installing it failed)")]
    Failed {
        /// What finding it said.
        missing: String,
        /// How the install failed.
        #[source]
        failure: RunError,
    },
    /// The install succeeded, and the program is still not found.
    #[error("{still} (installed, but still not found)")]
    StillMissing {
        /// What finding it said after the install.
        still: String,
    },
    /// The lock that makes one process install for all cannot be opened.
    #[error("cannot open the install lock {}", path.display())]
    OpenLock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The lock that makes one process install for all cannot be taken.
    #[error("cannot lock the install lock {}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: nix::errno::Errno,
    },
}

/// A command of an install that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// It could not be started.
    #[error("cannot start `{command}`")]
    Start {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It ran and failed.
    #[error("`{command}` failed ({status})")]
    Status {
        /// The command line.
        command: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
}

/// `cargo-nextest` is in neither place cargo looks for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cargo-nextest not found (in $CARGO_HOME/bin nor on PATH); install it with `{}`, or run the \
     tests with `--runner cargo-test`",
    What::Nextest.install_hint()
)]
pub struct NextestNotFound;

/// A program testkit installs where it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// Debian's `chromium`, for browser tests (`apt-get`, as root).
    Chromium,
    /// `cargo-nextest`, the runner's default test engine (`cargo install`).
    Nextest,
}

impl What {
    /// Its name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            What::Chromium => "Chromium",
            What::Nextest => "cargo-nextest",
        }
    }

    /// The command that installs it, for a person to run.
    pub const fn install_hint(self) -> &'static str {
        match self {
            What::Chromium => "apt-get update && apt-get install -y chromium",
            What::Nextest => "cargo install --locked cargo-nextest",
        }
    }

    fn lock_file(self) -> PathBuf {
        let name = match self {
            What::Chromium => "chromium",
            What::Nextest => "nextest",
        };
        std::env::temp_dir().join(format!("testkit-install-{name}.lock"))
    }
}

/// What the decision depends on, gathered by `Facts::of_this_machine` or
/// given by a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// `TESTKIT_INSTALL=never`: the user installs what is needed.
    pub opted_out: bool,
    /// The effective user is root (`apt-get install` needs it).
    pub is_root: bool,
    /// `/etc/debian_version` exists: Debian or a derivative (Ubuntu).
    pub is_debian: bool,
    /// `apt-get` is on PATH.
    pub has_apt_get: bool,
}

impl Facts {
    /// The facts of this process and machine, with `install` the
    /// process's `TESTKIT_INSTALL` (read with its other settings). PATH is
    /// this process's own: where `apt-get` would be found when it runs.
    pub fn of_this_machine(install: Install) -> Facts {
        Facts {
            opted_out: install == Install::Never,
            is_root: nix::unistd::geteuid().is_root(),
            is_debian: Path::new("/etc/debian_version").exists(),
            has_apt_get: on_path("apt-get", std::env::var_os("PATH")).is_some(),
        }
    }
}

/// What to do about a missing program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Install it.
    Install,
    /// Do not: the reason, for the error message.
    Cannot(String),
}

/// Whether the missing `what` can be installed here, and if not, why.
pub fn decide(what: What, facts: Facts) -> Decision {
    if facts.opted_out {
        return Decision::Cannot(format!("not installed: {INSTALL}=never"));
    }
    if what == What::Nextest {
        return Decision::Install;
    }
    let why = if !facts.is_debian {
        "not installed: this is not Debian nor Ubuntu (no /etc/debian_version)"
    } else if !facts.has_apt_get {
        "not installed: apt-get is not on PATH"
    } else if !facts.is_root {
        "not installed: testkit installs it only as root (run the command with sudo)"
    } else {
        return Decision::Install;
    };
    Decision::Cannot(why.to_owned())
}

/// The program `what`, as `find` finds it; else installs it where
/// [`decide`] says it can, and finds it again. `find`'s error says it is
/// missing and how to install it; an error of this function adds why it was
/// not installed, or how installing failed.
///
/// Many processes may need it at once (nextest runs one process per test):
/// the installer holds an exclusive lock on a file of the temporary folder,
/// and each process looks again once it holds the lock, so the first
/// installs and the others find what it installed.
pub fn ensure_installed<E: std::fmt::Display>(
    what: What,
    policy: Install,
    find: impl Fn() -> Result<PathBuf, E>,
) -> Result<PathBuf, InstallError> {
    let missing = match find() {
        Ok(found) => return Ok(found),
        Err(missing) => missing.to_string(),
    };
    let facts = Facts::of_this_machine(policy);
    if let Decision::Cannot(why) = decide(what, facts) {
        return Err(InstallError::NotInstalled { missing, why });
    }
    let _lock = lock(what)?;
    if let Ok(found) = find() {
        return Ok(found);
    }
    let name = what.name();
    match install(what) {
        Ok(()) => match find() {
            Ok(found) => {
                eprintln!("testkit: installed {name}: {}", found.display());
                Ok(found)
            }
            Err(e) => Err(InstallError::StillMissing {
                still: e.to_string(),
            }),
        },
        Err(failure) => {
            eprintln!(
                "testkit: installing {name} failed: {}",
                crate::errors::error_chain(&failure)
            );
            Err(InstallError::Failed { missing, failure })
        }
    }
}

/// Holds an exclusive lock on `what`'s lock file until dropped, saying so
/// when another process holds it.
fn lock(what: What) -> Result<nix::fcntl::Flock<File>, InstallError> {
    use nix::fcntl::{Flock, FlockArg};
    let path = what.lock_file();
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| InstallError::OpenLock {
            path: path.clone(),
            source,
        })?;
    let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => return Ok(locked),
        Err((file, _)) => file,
    };
    eprintln!(
        "testkit: waiting for another process installing {} (it holds {}) …",
        what.name(),
        path.display()
    );
    Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, source)| InstallError::Lock { path, source })
}

/// Runs the install of `what`, its output on stderr. For Chromium, `apt-get
/// update` runs only when the install failed without it (stale or no
/// package lists), then the install once more.
fn install(what: What) -> Result<(), RunError> {
    match what {
        What::Chromium => {
            let install = ["apt-get", "install", "-y", "chromium"];
            eprintln!(
                "testkit: Chromium not found; installing Debian's chromium ({}) …",
                install.join(" ")
            );
            if run(&install).is_ok() {
                return Ok(());
            }
            eprintln!("testkit: that failed; running `apt-get update` and trying again …");
            run(&["apt-get", "update"])?;
            run(&install)
        }
        What::Nextest => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let install = [cargo.as_str(), "install", "--locked", "cargo-nextest"];
            eprintln!(
                "testkit: cargo-nextest not found; installing it from crates.io ({}) …",
                install.join(" ")
            );
            run(&install)
        }
    }
}

/// Runs `argv`, stdin empty, its stdout and stderr on this stderr (stdout
/// may be a protocol: the runner's, a test's). A nested cargo gets none of
/// the variables cargo set for this process.
fn run(argv: &[&str]) -> Result<(), RunError> {
    let mut command = Command::new(argv[0]);
    command
        .args(&argv[1..])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null());
    for var in crate::process::vars_set_by_cargo() {
        command.env_remove(var);
    }
    if let Ok(stderr) = std::io::stderr().as_fd().try_clone_to_owned() {
        command.stdout(Stdio::from(stderr));
    }
    let status = command.status().map_err(|source| RunError::Start {
        command: argv.join(" "),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(RunError::Status {
            command: argv.join(" "),
            status,
        })
    }
}

/// The first executable `program` in the folders of `path` (PATH's value).
pub fn on_path(program: &str, path: Option<OsString>) -> Option<PathBuf> {
    std::env::split_paths(path.as_deref()?)
        .map(|dir| dir.join(program))
        .find(|candidate| crate::process::is_executable(candidate))
}

/// `cargo-nextest` where cargo looks for it: `$CARGO_HOME/bin` (default
/// `~/.cargo/bin`), then PATH. The error says how to install it.
pub fn find_nextest() -> Result<PathBuf, NextestNotFound> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    find_nextest_in(cargo_home, std::env::var_os("PATH"))
}

/// [`find_nextest`] with `$CARGO_HOME` and PATH given.
pub(crate) fn find_nextest_in(
    cargo_home: Option<PathBuf>,
    path: Option<OsString>,
) -> Result<PathBuf, NextestNotFound> {
    cargo_home
        .map(|home| home.join("bin").join("cargo-nextest"))
        .filter(|p| crate::process::is_executable(p))
        .or_else(|| on_path("cargo-nextest", path))
        .ok_or(NextestNotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_ON_DEBIAN: Facts = Facts {
        opted_out: false,
        is_root: true,
        is_debian: true,
        has_apt_get: true,
    };

    #[test]
    fn chromium_is_installed_as_root_on_debian_with_apt_get() {
        assert_eq!(decide(What::Chromium, ROOT_ON_DEBIAN), Decision::Install);
    }

    #[test]
    fn chromium_cannot_be_installed_elsewhere_and_says_why() {
        let cases = [
            (
                Facts {
                    opted_out: true,
                    ..ROOT_ON_DEBIAN
                },
                "TESTKIT_INSTALL=never",
            ),
            (
                Facts {
                    is_debian: false,
                    ..ROOT_ON_DEBIAN
                },
                "not Debian",
            ),
            (
                Facts {
                    has_apt_get: false,
                    ..ROOT_ON_DEBIAN
                },
                "apt-get is not on PATH",
            ),
            (
                Facts {
                    is_root: false,
                    ..ROOT_ON_DEBIAN
                },
                "only as root",
            ),
        ];
        for (facts, why) in cases {
            match decide(What::Chromium, facts) {
                Decision::Cannot(reason) => assert!(reason.contains(why), "{facts:?}: {reason}"),
                Decision::Install => panic!("{facts:?}: installs"),
            }
        }
    }

    #[test]
    fn nextest_is_installed_anywhere_unless_opted_out() {
        let anywhere = Facts {
            opted_out: false,
            is_root: false,
            is_debian: false,
            has_apt_get: false,
        };
        assert_eq!(decide(What::Nextest, anywhere), Decision::Install);
        let never = Facts {
            opted_out: true,
            ..anywhere
        };
        assert!(matches!(decide(What::Nextest, never), Decision::Cannot(r) if r.contains("never")));
    }

    #[test]
    fn a_program_found_is_returned_without_installing() {
        let found = ensure_installed(What::Chromium, Install::Auto, || {
            Ok::<_, NextestNotFound>(PathBuf::from("/bin/true"))
        });
        assert_eq!(found.unwrap(), PathBuf::from("/bin/true"));
    }

    #[test]
    fn a_missing_nextest_names_the_install_command_and_the_other_engine() {
        let empty = tempfile::tempdir().unwrap();
        let e = find_nextest_in(Some(empty.path().to_owned()), Some(empty.path().into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cargo install --locked cargo-nextest"), "{e}");
        assert!(e.contains("--runner cargo-test"), "{e}");
        let bin = empty.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let program = bin.join("cargo-nextest");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            find_nextest_in(Some(empty.path().to_owned()), None),
            Ok(program.clone())
        );
        assert_eq!(find_nextest_in(None, Some(bin.into())), Ok(program));
    }

    #[test]
    fn on_path_finds_only_executables() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("prog");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let path = Some(dir.path().as_os_str().to_owned());
        assert_eq!(on_path("prog", path.clone()), None);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(on_path("prog", path), Some(program));
        assert_eq!(on_path("prog", None), None);
    }
}
