//! The run: its id and its results folder, decided once per process.
//!
//! Every test process of one run must agree on both, so they come from the
//! settings when the runner (or nextest) sets them, and are derived the same
//! way otherwise. The id rules are public: `testkit-runner` makes its ids
//! with the same functions.

use std::path::{Path, PathBuf};

pub use crate::ids::{generate_run_id, run_id_from_seed, validate_run_id, RUN_ID_LEN};
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
