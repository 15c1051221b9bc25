//! The run: its id and its results folder, decided once per process.
//!
//! Every test process of one run must agree on both, so they come from the
//! environment when the runner (or nextest) sets it, and are derived the same
//! way otherwise.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Length of a generated run id.
const RUN_ID_LEN: usize = 10;

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

/// The run of this process. An unusable `TESTKIT_RUN_ID` or results folder is
/// an error that every test reports rather than a panic.
pub(crate) fn current() -> Result<&'static Run, &'static str> {
    RUN.get_or_init(Run::from_env)
        .as_ref()
        .map_err(String::as_str)
}

impl Run {
    fn from_env() -> Result<Run, String> {
        let id = match std::env::var("TESTKIT_RUN_ID") {
            Ok(id) => {
                validate_run_id(&id)
                    .map_err(|why| format!("TESTKIT_RUN_ID={id:?} is invalid: {why}"))?;
                id
            }
            Err(_) => match std::env::var("NEXTEST_RUN_ID") {
                Ok(uuid) if !uuid.is_empty() => id_from_seed(uuid.as_bytes()),
                _ => generate_id(),
            },
        };
        let results_dir = match std::env::var_os("TESTKIT_RESULTS_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => default_results_root().join("runs").join(&id),
        };
        Ok(Run {
            id,
            results_dir,
            binary: binary_name(),
        })
    }
}

/// A run id must fit inside DNS labels together with a prefix and a test tag.
pub(crate) fn validate_run_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > 16 {
        return Err("it must be 1 to 16 characters long");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err("it must contain only lowercase ASCII letters and digits");
    }
    Ok(())
}

fn generate_id() -> String {
    let mut seed = [0u8; 16];
    getrandom::fill(&mut seed).expect("the operating system's random source failed");
    id_from_seed(&seed)
}

/// Deterministic: the same seed (nextest's run id) gives every process of a
/// run the same short id.
fn id_from_seed(seed: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    // FNV-1a, twice with different offsets, for 128 bits of mixing.
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for &b in seed {
        hash ^= u128::from(b);
        hash = hash.wrapping_mul(0x0000000001000000000000000000013b);
    }
    let mut id = String::with_capacity(RUN_ID_LEN);
    // The first character is a letter so the id never looks like a number.
    id.push(ALPHABET[(hash % 26) as usize] as char);
    hash /= 26;
    for _ in 1..RUN_ID_LEN {
        id.push(ALPHABET[(hash % 36) as usize] as char);
        hash /= 36;
    }
    id
}

/// `<target dir>/testkit`, found from the test binary's location
/// (`target/<profile>/deps/<bin>`), or from `CARGO_TARGET_DIR`.
pub(crate) fn default_results_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("testkit");
    }
    if let Ok(exe) = std::env::current_exe() {
        // Cargo marks the root of every target dir with CACHEDIR.TAG.
        if let Some(target) = exe
            .ancestors()
            .skip(1)
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        {
            return target.join("testkit");
        }
    }
    std::env::temp_dir().join("testkit")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_are_stable_and_dns_safe() {
        let a = id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000000");
        assert_eq!(a, id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000000"));
        assert_ne!(a, id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000001"));
        assert_eq!(a.len(), RUN_ID_LEN);
        assert!(validate_run_id(&a).is_ok());
        assert!(a.as_bytes()[0].is_ascii_lowercase());
    }

    #[test]
    fn generated_ids_differ() {
        assert_ne!(generate_id(), generate_id());
    }

    #[test]
    fn run_id_validation_names_the_problem() {
        assert!(validate_run_id("").is_err());
        assert!(validate_run_id("ABC").unwrap_err().contains("lowercase"));
        assert!(validate_run_id("a-b").is_err());
        assert!(validate_run_id(&"a".repeat(17)).unwrap_err().contains("16"));
        assert!(validate_run_id("abc123").is_ok());
    }
}
