//! The run: its id and its results folder, decided once per process.
//!
//! Every test process of one run must agree on both, so they come from the
//! settings when the runner (or nextest) sets them, and are derived the same
//! way otherwise. The id rules are public: `testkit-runner` makes its ids
//! with the same functions.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use crate::run_id::{generate_run_id, run_id_from_seed, validate_run_id, RUN_ID_LEN};
use crate::settings::Settings;

/// One run of a suite, as seen from this process.
#[derive(Debug)]
pub(crate) struct Run {
    /// Short, lowercase, DNS-label-safe.
    pub(crate) id: String,
    /// Where records, journals, artifacts and JUnit files of the run go.
    pub(crate) results_dir: PathBuf,
    /// The test binary's name, without cargo's hash suffix.
    pub(crate) binary: String,
}

static RUN: OnceLock<Result<Run, String>> = OnceLock::new();

/// The run of this process. Unusable settings are an error that every test
/// reports rather than a panic.
pub(crate) fn current() -> Result<&'static Run, &'static str> {
    RUN.get_or_init(|| {
        crate::settings::current()
            .map(Run::from_settings)
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(String::as_str)
}

impl Run {
    fn from_settings(settings: &Settings) -> Run {
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

/// `smoke-1a2b3c4d` → `smoke`.
fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .and_then(|s| s.to_str())
        .unwrap_or("tests");
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem.to_owned(),
    }
}
