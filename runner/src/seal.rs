//! The seal of a judged run: once `testkit-runner run` has decided a run's
//! verdict, it writes `<results>/seal/<run id>.json`, naming every file it
//! judged (the run's records, starts and journals, and `verdict.jsonl`),
//! each with its SHA-256, and the verdict and exit code it gave.
//!
//! Every later reading (`report`, `merge`, report.html) checks the seal
//! first ([`check`]). A file of the run added, removed or changed since is
//! tampering: it is named, and the reading counts a failure for it (a
//! record of its own, [`SealCheck::tampering_record`]), so a run can never read
//! greener than it was judged. A runner run whose seal is missing is
//! named as such too.
//!
//! What the seal guards against is the folder changing under a verdict:
//! a child of a test writing into `records/` after the run, a record
//! deleted, a verdict file edited. It is no signature: whoever rewrites
//! the seal along with the files can forge it.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use testkit_engine::report::{FailureCategory, FailureKind, TestRecord, STARTS_DIR};

/// The folder of the seals, one per run.
pub const SEAL_DIR: &str = "seal";

/// What the runner judged, and the files it judged it from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// The run.
    pub run_id: String,
    /// `pass` or `fail`.
    pub verdict: String,
    /// The runner's exit code.
    pub exit_code: u8,
    /// When it was sealed, in ms since the Unix epoch.
    pub at: u64,
    /// Each file judged, relative to the results folder, and its SHA-256
    /// in hex.
    pub files: BTreeMap<String, String>,
    /// The SHA-256 of the seal itself (with this field empty): an edit of
    /// its verdict, or of a file's entry, is seen.
    #[serde(default)]
    pub digest: String,
}

impl Seal {
    fn own_digest(&self) -> String {
        let mut bare = self.clone();
        bare.digest = String::new();
        hex(&Sha256::digest(
            serde_json::to_vec(&bare).expect("serializable"),
        ))
    }
}

/// How a file of a sealed run differs from what was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A file of the run that was not there when it was judged.
    Added(String),
    /// A judged file that is gone.
    Removed(String),
    /// A judged file whose content is not what was judged.
    Changed(String),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added(path) => write!(f, "{path} was added"),
            Change::Removed(path) => write!(f, "{path} was removed"),
            Change::Changed(path) => write!(f, "{path} was changed"),
        }
    }
}

/// What the seal of a run says of its folder now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealCheck {
    /// No runner judged the run (a plain `cargo test` or `cargo nextest
    /// run`): there is nothing to hold it to.
    Unsealed,
    /// A runner judged the run, and its seal is gone or unreadable: what
    /// it judged cannot be told from what is there now.
    Missing(String),
    /// Every judged file is as it was judged, and no file was added.
    Intact(Seal),
    /// Files of the run changed after it was judged.
    Tampered(Seal, Vec<Change>),
}

impl SealCheck {
    /// The seal, when there is one to hold the run to.
    pub fn seal(&self) -> Option<&Seal> {
        match self {
            SealCheck::Intact(seal) | SealCheck::Tampered(seal, _) => Some(seal),
            SealCheck::Unsealed | SealCheck::Missing(_) => None,
        }
    }

    /// One line for a report: what the seal says, or nothing for a run
    /// no runner judged. The verdict is said as the summary says it.
    pub fn describe(&self) -> Option<String> {
        match self {
            SealCheck::Unsealed => None,
            SealCheck::Missing(why) => Some(format!("NOT SEALED: {why}")),
            SealCheck::Intact(seal) => Some(format!(
                "sealed: testkit-runner judged run {} {} (exit {}); its {} files are as judged",
                seal.run_id,
                verdict_word(&seal.verdict),
                seal.exit_code,
                seal.files.len()
            )),
            SealCheck::Tampered(seal, changes) => Some(format!(
                "TAMPERED: results of run {} changed after testkit-runner judged it {} (exit {}): {}",
                seal.run_id,
                verdict_word(&seal.verdict),
                seal.exit_code,
                changes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }

    /// The failure a reading counts for a run that cannot be held to what
    /// was judged (tampered with, or its seal gone), else none.
    pub fn tampering_record(&self, run_id: &str) -> Option<TestRecord> {
        let why = match self {
            SealCheck::Unsealed | SealCheck::Intact(_) => return None,
            SealCheck::Missing(_) | SealCheck::Tampered(..) => self.describe()?,
        };
        let mut record = TestRecord::new(run_id, "testkit-runner", "seal");
        record.description =
            "The results folder holds what testkit-runner judged, unchanged.".to_owned();
        record.fail(FailureKind::Error, why);
        // Not the product's: the results are not what testkit judged.
        record.categorize(FailureCategory::Testkit);
        record.started_at_ms = 0;
        Some(record)
    }
}

/// `PASSED`, `FAILED`: a sealed verdict as the summary says it.
fn verdict_word(verdict: &str) -> String {
    match verdict {
        "pass" => "PASSED".to_owned(),
        "fail" => "FAILED".to_owned(),
        other => other.to_uppercase(),
    }
}

/// Why a seal could not be written.
#[derive(Debug, thiserror::Error)]
#[error("failed to seal the results in {}", path.display())]
pub struct SealError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// Seals the run `run_id` of `results_dir` with its verdict: hashes every
/// file of the run and writes `seal/<run_id>.json` (a temporary file renamed
/// into place, so a reader never sees half a seal).
pub fn write(
    results_dir: &Path,
    run_id: &str,
    verdict: &str,
    exit_code: u8,
) -> Result<PathBuf, SealError> {
    let dir = results_dir.join(SEAL_DIR);
    let path = dir.join(format!("{run_id}.json"));
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| SealError { path, source }
    };
    let files = run_files(results_dir, run_id)
        .into_iter()
        .map(|rel| {
            let hash = hash_file(&results_dir.join(&rel)).map_err(err(&results_dir.join(&rel)))?;
            Ok((rel, hash))
        })
        .collect::<Result<BTreeMap<_, _>, SealError>>()?;
    let mut seal = Seal {
        run_id: run_id.to_owned(),
        verdict: verdict.to_owned(),
        exit_code,
        at: testkit_engine::resource::journal::now_ms(),
        files,
        digest: String::new(),
    };
    seal.digest = seal.own_digest();
    std::fs::create_dir_all(&dir).map_err(err(&dir))?;
    let tmp = dir.join(format!(".{run_id}.json.{}", std::process::id()));
    let text = serde_json::to_string_pretty(&seal).expect("serializable");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(err(&path))?;
    Ok(path)
}

/// Holds the folder `results_dir` to the seal of its run `run_id`.
pub fn check(results_dir: &Path, run_id: &str) -> SealCheck {
    let path = results_dir.join(SEAL_DIR).join(format!("{run_id}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match judged_by_runner(results_dir, run_id) {
                true => SealCheck::Missing(format!(
                    "testkit-runner judged run {run_id} (verdict.jsonl has its verdict), and its \
                     seal {} is gone: what it judged cannot be told from what is here",
                    path.display()
                )),
                false => SealCheck::Unsealed,
            }
        }
        Err(e) => return SealCheck::Missing(format!("cannot read {}: {e}", path.display())),
    };
    let seal: Seal = match serde_json::from_str(&text) {
        Ok(seal) => seal,
        Err(e) => {
            return SealCheck::Missing(format!("{} is not a seal: {e}", path.display()));
        }
    };
    if seal.run_id != run_id {
        return SealCheck::Missing(format!(
            "{} is the seal of run {}, not of run {run_id}",
            path.display(),
            seal.run_id
        ));
    }
    let mut changes = Vec::new();
    if seal.digest != seal.own_digest() {
        changes.push(Change::Changed(format!("{SEAL_DIR}/{run_id}.json")));
    }
    for (rel, hash) in &seal.files {
        // `verdict.jsonl` is rewritten by the next runner run of the
        // folder: it is that run's now, if that run's seal says so.
        if rel == "verdict.jsonl" && superseded(results_dir, run_id) {
            continue;
        }
        match hash_file(&results_dir.join(rel)) {
            Ok(now) if now == *hash => {}
            Ok(_) => changes.push(Change::Changed(rel.clone())),
            Err(_) => changes.push(Change::Removed(rel.clone())),
        }
    }
    for rel in run_files(results_dir, run_id) {
        if !seal.files.contains_key(&rel) {
            changes.push(Change::Added(rel));
        }
    }
    if changes.is_empty() {
        SealCheck::Intact(seal)
    } else {
        SealCheck::Tampered(seal, changes)
    }
}

/// Whether a runner judged the run, or ran it: `verdict.jsonl` holds its
/// verdict, or the run's runner file (written when a runner starts a run)
/// is there.
fn judged_by_runner(results_dir: &Path, run_id: &str) -> bool {
    if testkit_engine::run::runner_file(results_dir, run_id).is_file() {
        return true;
    }
    let Ok(text) = std::fs::read_to_string(results_dir.join("verdict.jsonl")) else {
        return false;
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| v["phase"] == "run" && v["run_id"] == run_id)
}

/// The runs a JSON-lines text names, each line read as JSON (as every
/// reader reads it: an escaped id is the same id).
fn runs_named(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            v.get("run_id")
                .or_else(|| v.get("run"))
                .and_then(|id| id.as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// Whether `verdict.jsonl` is now another run's, whose own intact seal
/// covers it as it is.
fn superseded(results_dir: &Path, run_id: &str) -> bool {
    let path = results_dir.join("verdict.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return false;
    };
    let Ok(now) = hash_file(&path) else {
        return false;
    };
    runs_named(&text)
        .into_iter()
        .filter(|other| other != run_id)
        .any(|other| {
            std::fs::read_to_string(results_dir.join(SEAL_DIR).join(format!("{other}.json")))
                .ok()
                .and_then(|t| serde_json::from_str::<Seal>(&t).ok())
                .is_some_and(|seal| {
                    seal.digest == seal.own_digest()
                        && seal.files.get("verdict.jsonl") == Some(&now)
                })
        })
}

/// The runs that have a seal in the folder.
pub fn sealed_runs(results_dir: &Path) -> Vec<String> {
    entries(&results_dir.join(SEAL_DIR))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
        .collect()
}

/// The files of the run `run_id` a verdict is judged from, relative to
/// `results_dir`: its records, its starts and its test processes' journals
/// (each a file one process wrote, of one run: those that name it), and
/// `verdict.jsonl`.
fn run_files(results_dir: &Path, run_id: &str) -> Vec<String> {
    let of_run = |path: &Path| {
        std::fs::read_to_string(path).is_ok_and(|text| runs_named(&text).contains(run_id))
    };
    let mut files = Vec::new();
    for top in ["records", STARTS_DIR] {
        for binary in entries(&results_dir.join(top)) {
            if !binary.is_dir() {
                continue;
            }
            for file in entries(&binary) {
                let judged = matches!(
                    file.extension().and_then(|e| e.to_str()),
                    Some("jsonl" | "json" | "listed")
                );
                if judged && of_run(&file) {
                    files.push(file);
                }
            }
        }
    }
    for file in entries(&testkit_engine::resource::journal::dir(results_dir)) {
        // A journal that names a test is a test process's; the janitor's
        // name none, and it may run on a sealed folder.
        if file.extension().is_some_and(|e| e == "jsonl")
            && std::fs::read_to_string(&file).is_ok_and(|text| {
                text.lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .any(|v| {
                        v["run"] == run_id && v["test"].as_str().is_some_and(|t| !t.is_empty())
                    })
            })
        {
            files.push(file);
        }
    }
    let verdict = results_dir.join("verdict.jsonl");
    if of_run(&verdict) {
        files.push(verdict);
    }
    let mut rel: Vec<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix(results_dir).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    rel.sort();
    rel
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        // Dot files too: a reader reads a `.x.jsonl` as any other.
        .collect();
    paths.sort();
    paths
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records/bin");
        std::fs::create_dir_all(&records).unwrap();
        std::fs::write(
            records.join("1-1.jsonl"),
            "{\"run_id\":\"r1\",\"name\":\"a\",\"outcome\":\"failed\"}\n",
        )
        .unwrap();
        std::fs::write(
            records.join("2-2.jsonl"),
            "{\"run_id\":\"old\",\"name\":\"a\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("verdict.jsonl"),
            "{\"phase\":\"run\",\"verdict\":\"fail\",\"exit_code\":1,\"run_id\":\"r1\"}\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn an_untouched_folder_is_intact_and_every_change_is_named() {
        let dir = folder();
        write(dir.path(), "r1", "fail", 1).unwrap();
        let SealCheck::Intact(seal) = check(dir.path(), "r1") else {
            panic!("{:?}", check(dir.path(), "r1"));
        };
        // Another run's file is not this run's.
        assert_eq!(
            seal.files.keys().collect::<Vec<_>>(),
            ["records/bin/1-1.jsonl", "verdict.jsonl"]
        );
        // Changed, added, removed.
        std::fs::write(
            dir.path().join("records/bin/1-1.jsonl"),
            "{\"run_id\":\"r1\",\"name\":\"a\",\"outcome\":\"passed\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("records/bin/3-3.jsonl"),
            "{\"run_id\":\"r1\",\"name\":\"b\"}\n",
        )
        .unwrap();
        std::fs::remove_file(dir.path().join("verdict.jsonl")).unwrap();
        let check = check(dir.path(), "r1");
        let SealCheck::Tampered(_, changes) = &check else {
            panic!("{check:?}");
        };
        assert_eq!(
            *changes,
            [
                Change::Changed("records/bin/1-1.jsonl".to_owned()),
                Change::Removed("verdict.jsonl".to_owned()),
                Change::Added("records/bin/3-3.jsonl".to_owned()),
            ]
        );
        let failure = check.tampering_record("r1").unwrap();
        assert!(failure.outcome.fails());
        assert!(
            failure
                .message
                .unwrap()
                .contains("records/bin/3-3.jsonl was added"),
            "the failure names the change"
        );
    }

    #[test]
    fn a_judged_run_whose_seal_is_gone_is_not_held_to_nothing() {
        let dir = folder();
        write(dir.path(), "r1", "fail", 1).unwrap();
        std::fs::remove_dir_all(dir.path().join(SEAL_DIR)).unwrap();
        assert!(matches!(check(dir.path(), "r1"), SealCheck::Missing(_)));
        assert!(check(dir.path(), "r1").tampering_record("r1").is_some());
        // A run no runner judged has nothing to be held to.
        assert_eq!(check(dir.path(), "old"), SealCheck::Unsealed);
    }
}
