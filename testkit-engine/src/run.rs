//! The run: its id and its results folder, decided once per process.
//!
//! Every test process of one run must agree on both, so they come from the
//! settings when the runner (or nextest) sets them, and are derived the same
//! way otherwise. The id rules are public: `testkit-runner` makes its ids
//! with the same functions.

use std::path::{Path, PathBuf};

use crate::ids::run_id_from_seed;
pub use crate::ids::{generate_run_id, validate_run_id, RUN_ID_LEN};
use crate::settings::Settings;

/// One run of a suite, as seen from this process.
#[derive(Debug)]
pub struct Run {
    /// Short, lowercase, DNS-label-safe.
    pub id: String,
    /// Where records, journals, artifacts and JUnit files of the run go.
    pub results_dir: PathBuf,
    /// The test binary's name, without cargo's hash suffix.
    pub binary: String,
    /// This process is the whole run: it made the id itself (no
    /// `TESTKIT_RUN_ID`, not under nextest), so no other process shares the
    /// run's secrets dir, and it may remove it at its end.
    pub alone: bool,
}

impl Run {
    /// The run that `settings` describe, for the test binary this process runs.
    pub fn from_settings(settings: &Settings) -> Run {
        let id = match (&settings.run_id, &settings.nextest_run_id) {
            (Some(id), _) => id.clone(),
            (None, Some(uuid)) => run_id_from_seed(uuid.as_bytes()),
            (None, None) => generate_run_id(),
        };
        let results_dir = match &settings.results_dir {
            Some(dir) => dir.clone(),
            None => default_results_root(settings.target_dir.as_deref())
                .join("runs")
                .join(&id),
        };
        Run {
            id,
            results_dir,
            binary: binary_name(),
            alone: settings.run_id.is_none() && settings.nextest_run_id.is_none(),
        }
    }
}

/// `<target dir>/testkit`: `target_dir` (`CARGO_TARGET_DIR`), else the
/// target dir this executable was built in, else the temp dir.
pub fn default_results_root(target_dir: Option<&Path>) -> PathBuf {
    target_dir_of(target_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("testkit")
}

/// The target dir: `target_dir` made absolute, else the one this executable
/// was built in (`target/<profile>/…`: cargo marks the root of every target
/// dir with `CACHEDIR.TAG`).
pub fn target_dir_of(target_dir: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = target_dir {
        return Some(if dir.is_absolute() {
            dir.to_owned()
        } else {
            std::env::current_dir().ok()?.join(dir)
        });
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(Path::to_owned)
}

/// Where a run keeps its live credentials (the pod handle the tests use,
/// the session they share): never the results folder, which CI uploads.
/// `TESTKIT_SECRETS_DIR`, else `$XDG_RUNTIME_DIR/testkit/<run id>`, else
/// `<temp dir>/testkit-<uid>/<run id>`: the same for every process of the
/// run, readable by its user only. `testkit-runner` removes it when the run
/// ends; so does a test process that is its run alone.
pub fn secrets_dir(settings: &Settings, run_id: &str) -> PathBuf {
    if let Some(dir) = &settings.secrets_dir {
        return dir.clone();
    }
    let runtime = settings.runtime_dir.clone().filter(|d| d.is_dir());
    match runtime {
        Some(dir) => dir.join("testkit").join(run_id),
        None => std::env::temp_dir()
            .join(format!("testkit-{}", nix::unistd::getuid()))
            .join(run_id),
    }
}

/// Creates [`secrets_dir`] (and the folder above it) with mode 0700, and
/// checks that no other user can read it.
pub fn create_secrets_dir(settings: &Settings, run_id: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let dir = secrets_dir(settings, run_id);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    for d in [Some(dir.as_path()), dir.parent()].into_iter().flatten() {
        let meta = std::fs::metadata(d)?;
        if meta.uid() != nix::unistd::getuid().as_raw() {
            return Err(std::io::Error::other(format!(
                "{} belongs to another user: set TESTKIT_SECRETS_DIR to a folder of your own",
                d.display()
            )));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(dir)
}

/// The file in a run's [`secrets_dir`] by which a `testkit-runner` claims
/// the run id: JSON, a [`Claimant`], locked (`flock`) by the runner for as
/// long as it lives.
pub const CLAIM_FILE: &str = "runner.json";

/// The runner that claims a run id, as its [`CLAIM_FILE`] says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Claimant {
    /// The runner's pid.
    pub pid: u32,
    /// When it started, in clock ticks since boot: with the pid, what tells
    /// it from a later process given the same pid.
    #[serde(default)]
    pub start_ticks: Option<u64>,
    /// The run id it claims.
    #[serde(default)]
    pub run_id: String,
    /// Its results folder.
    #[serde(default)]
    pub results_dir: Option<PathBuf>,
}

impl Claimant {
    /// Whether the runner still runs: the same pid, started at the same
    /// time. A claim without a start time cannot be told from a reused pid,
    /// and counts as dead.
    pub fn is_live(&self) -> bool {
        self.start_ticks
            .is_some_and(|t| crate::process::is_running(self.pid as i32, t))
    }
}

/// The claim in the secrets dir `dir`, when there is a readable one.
pub fn read_claim(dir: &Path) -> Option<Claimant> {
    let bytes = std::fs::read(dir.join(CLAIM_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The live runner that claims `run_id`, if one does.
pub fn live_runner(settings: &Settings, run_id: &str) -> Option<Claimant> {
    read_claim(&secrets_dir(settings, run_id))
        .filter(|c| c.is_live() && c.pid != std::process::id())
}

/// The folder of a results folder where each run's `testkit-runner` names
/// itself ([`runner_file`]).
pub const RUNNERS_DIR: &str = "runners";

/// `<results>/runners/<run id>.json`: the run's `testkit-runner` (a
/// [`Claimant`]: pid, start time, run id), written when the run starts and
/// left behind when it ends; one file per run, as runs may share a results
/// folder. Unlike the claim in the secrets dir, whose folder depends on the
/// caller's `XDG_RUNTIME_DIR` or `TMPDIR`, every process that reads the
/// results folder finds it alike: a janitor run by cron, in another
/// environment, knows from it that the run is live. Readable by all
/// (0644): it holds no secret.
pub fn runner_file(results_dir: &Path, run_id: &str) -> PathBuf {
    results_dir.join(RUNNERS_DIR).join(format!("{run_id}.json"))
}

/// Writes this process, the runner of `run_id`, into its [`runner_file`]
/// of `results_dir` (replacing that of an earlier run of the same id).
pub fn record_runner(results_dir: &Path, run_id: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    validate_run_id(run_id).map_err(std::io::Error::other)?;
    let pid = std::process::id();
    let me = Claimant {
        pid,
        start_ticks: crate::process::start_ticks(pid as i32),
        run_id: run_id.to_owned(),
        results_dir: Some(results_dir.to_owned()),
    };
    let json = serde_json::to_vec(&me).map_err(std::io::Error::other)?;
    let path = runner_file(results_dir, run_id);
    let dir = results_dir.join(RUNNERS_DIR);
    std::fs::create_dir_all(&dir)?;
    // Written aside and renamed: a janitor never reads half a file.
    let part = dir.join(format!(".{run_id}.json.{pid}"));
    std::fs::write(&part, json)?;
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o644))?;
    std::fs::rename(&part, &path)
}

/// The runner of `run_id` that its [`runner_file`] in `results_dir` names,
/// when there is a readable one (and `run_id` is a run id).
pub fn runner_of(results_dir: &Path, run_id: &str) -> Option<Claimant> {
    validate_run_id(run_id).ok()?;
    let bytes = std::fs::read(runner_file(results_dir, run_id)).ok()?;
    serde_json::from_slice::<Claimant>(&bytes)
        .ok()
        .filter(|c| c.run_id == run_id)
}

/// A run id this process holds: its secrets dir, created, and the claim in
/// it, locked until the value is dropped (or the process ends, however it
/// ends: the kernel releases the lock).
#[derive(Debug)]
pub struct RunClaim {
    dir: PathBuf,
    taken_over: Option<Claimant>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl RunClaim {
    /// The run's secrets dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The runner whose claim this one replaced: it is gone, and what it
    /// left in the secrets dir (its handle, its session) was removed.
    pub fn taken_over(&self) -> Option<&Claimant> {
        self.taken_over.as_ref()
    }
}

/// Why [`claim_run`] could not claim a run id.
#[derive(Debug)]
pub enum ClaimError {
    /// A live runner holds it.
    InUse {
        /// That runner.
        holder: Claimant,
        /// The secrets dir they would share.
        dir: PathBuf,
    },
    /// The secrets dir or its claim file could not be made or written.
    Io {
        /// The secrets dir.
        dir: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
}

/// Claims `run_id` for this process (a `testkit-runner` whose results go to
/// `results_dir`): creates the run's [`secrets_dir`], locks its
/// [`CLAIM_FILE`] and writes this process into it. A run id that a live
/// runner holds is refused ([`ClaimError::InUse`]); the claim of a runner
/// that is gone is taken over, and what it left removed. Test processes do
/// not claim: all of a run's share its id.
pub fn claim_run(
    settings: &Settings,
    run_id: &str,
    results_dir: &Path,
) -> Result<RunClaim, ClaimError> {
    use nix::fcntl::{Flock, FlockArg};
    use std::io::Write;
    let dir = secrets_dir(settings, run_id);
    let io = |error: std::io::Error| ClaimError::Io {
        dir: dir.clone(),
        error,
    };
    create_secrets_dir(settings, run_id).map_err(io)?;
    let path = dir.join(CLAIM_FILE);
    let file = crate::files::open_lock_file(&path).map_err(io)?;
    let unknown = || Claimant {
        pid: 0,
        start_ticks: None,
        run_id: run_id.to_owned(),
        results_dir: None,
    };
    let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            return Err(ClaimError::InUse {
                holder: read_claim(&dir).unwrap_or_else(unknown),
                dir,
            })
        }
        Err((_, errno)) => return Err(io(std::io::Error::from(errno))),
    };
    let before = read_claim(&dir);
    // The lock says the holder is gone; its pid and start time say so too
    // where a lock cannot be trusted (a network file system).
    if let Some(holder) = before.as_ref().filter(|c| c.is_live()) {
        return Err(ClaimError::InUse {
            holder: holder.clone(),
            dir,
        });
    }
    if before.is_some() {
        // A dead run's credentials, for a pod that is gone: never this run's.
        for stale in ["handle.json", "session.json"] {
            match std::fs::remove_file(dir.join(stale)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            }
        }
    }
    let pid = std::process::id();
    let me = Claimant {
        pid,
        start_ticks: crate::process::start_ticks(pid as i32),
        run_id: run_id.to_owned(),
        results_dir: Some(results_dir.to_owned()),
    };
    let json = serde_json::to_vec(&me).map_err(|e| io(std::io::Error::other(e)))?;
    lock.set_len(0).map_err(io)?;
    (&*lock)
        .write_all(&json)
        .and_then(|()| (&*lock).flush())
        .map_err(io)?;
    Ok(RunClaim {
        dir,
        taken_over: before,
        _lock: lock,
    })
}

/// `<results>/artifacts/<binary>/<test>`: a test's artifacts folder, the
/// test's full name made file-name-safe (`smoke::create` → `smoke__create`).
pub fn artifacts_dir(results_dir: &Path, binary: &str, test: &str) -> PathBuf {
    let safe: String = test
        .replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    results_dir.join("artifacts").join(binary).join(safe)
}

/// The name of this process's test binary.
fn binary_name() -> String {
    match std::env::current_exe() {
        Ok(exe) => binary_name_of(&exe),
        Err(_) => "tests".to_owned(),
    }
}

/// `smoke-1a2b3c4d5e6f7a8b` → `smoke`: the name a test binary's records
/// carry, without cargo's hash.
pub fn binary_name_of(exe: &Path) -> String {
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("tests");
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner names itself for its run id alone, readable by all; a file
    /// of another run id, or a name that is no run id, names no one.
    #[test]
    fn a_runner_file_names_this_runner_for_its_run_only() {
        use std::os::unix::fs::PermissionsExt;
        let results = tempfile::tempdir().unwrap();
        record_runner(results.path(), "abc123").unwrap();
        let me = runner_of(results.path(), "abc123").expect("the runner file");
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_live(), "{me:?}");
        let mode = std::fs::metadata(runner_file(results.path(), "abc123"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(runner_of(results.path(), "abc124"), None);
        std::fs::copy(
            runner_file(results.path(), "abc123"),
            runner_file(results.path(), "abc124"),
        )
        .unwrap();
        assert_eq!(runner_of(results.path(), "abc124"), None, "another run's");
        assert_eq!(runner_of(results.path(), "../runners/abc123"), None);
        assert!(record_runner(results.path(), "../x").is_err());
    }
}
