//! Finding residue on the pod: [`sweep`] lists every kind by a run's
//! prefix; [`janitor`] also deletes by exact name what a run's journals say
//! may still exist. Neither ever touches a name that does not carry a run id.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::delete;
use super::journal::{self, Event, Journal, JournalEntry};
use super::kind::{Kinds, ResourceRef};
use crate::pod::Pod;

/// One resource on the pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Resource {
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its server-assigned id, for kinds that have them.
    pub id: Option<String>,
}

impl Resource {
    fn to_ref(&self) -> ResourceRef {
        ResourceRef {
            name: self.name.clone(),
            id: self.id.clone(),
        }
    }
}

/// What a sweep or the janitor found and did.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct SweepReport {
    /// Names found, by listing or in journals.
    pub found: Vec<Resource>,
    /// Deleted and verified gone.
    pub deleted: Vec<Resource>,
    /// Could not be deleted or verified gone, and why.
    pub leaked: Vec<(Resource, String)>,
    /// Listed or journaled but not carrying the run id: left alone.
    pub refused: Vec<Resource>,
    /// Listings that failed.
    pub errors: Vec<String>,
    /// Kinds that are Rust code this binary does not link: a test binary of
    /// the suite must sweep them ([`sweep_in_binary`]).
    #[serde(default)]
    pub delegated: Vec<String>,
    /// Kinds this sweep listed.
    #[serde(default)]
    pub swept: Vec<String>,
}

/// Sweeps the kinds of `kinds` (Rust kinds the caller does not link) in
/// `binary`, a test binary of the suite that registers them, started with
/// `env` (the run's: its id, results folder, pod handle, suite dir).
/// Every problem is an error of the report: a sweep that could not run is
/// never an empty one.
pub async fn sweep_in_binary(
    binary: &Path,
    env: &[(String, std::ffi::OsString)],
    kinds: &[String],
) -> SweepReport {
    let mut report = SweepReport {
        delegated: kinds.to_vec(),
        ..SweepReport::default()
    };
    let mut cmd = tokio::process::Command::new(binary);
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())))
        .env(crate::settings::var::RUN_AS, "sweeper")
        .env(crate::settings::var::SWEEP_KINDS, kinds.join(","))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(SWEEPER_TIMEOUT, cmd.output()).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            report.errors.push(format!(
                "failed to start {} to sweep {}: {e}",
                binary.display(),
                kinds.join(", ")
            ));
            return report;
        }
        Err(_) => {
            report.errors.push(format!(
                "{} did not finish sweeping {} within {}",
                binary.display(),
                kinds.join(", "),
                humantime::format_duration(SWEEPER_TIMEOUT)
            ));
            return report;
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<SweepReport>(l).ok())
    {
        Some(theirs) => report.merge(theirs),
        None => report.errors.push(format!(
            "{} answered no sweep report ({}): {}",
            binary.display(),
            output.status,
            crate::redact(String::from_utf8_lossy(&output.stderr).trim())
                .chars()
                .take(400)
                .collect::<String>()
        )),
    }
    report
}

/// A delegated sweep lists and deletes; it gets longer than one resource.
const SWEEPER_TIMEOUT: Duration = Duration::from_secs(300);

/// `TESTKIT_RUN_AS=sweeper`: sweeps the run's resources of the Rust kinds
/// `kinds` and prints the report as one JSON line.
pub(crate) async fn sweeper_main(kinds_wanted: &[String]) -> std::process::ExitCode {
    let (report, code) = sweeper_report(kinds_wanted).await;
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    // Connecting to the pod routed stdout through redaction: drain it, or
    // the report is lost when the process exits.
    crate::pod::finish();
    code
}

async fn sweeper_report(kinds_wanted: &[String]) -> (SweepReport, std::process::ExitCode) {
    let fail = |problem: String| {
        let report = SweepReport {
            errors: vec![problem],
            ..SweepReport::default()
        };
        (report, std::process::ExitCode::FAILURE)
    };
    let (run, kinds, config) = match (
        crate::run::current(),
        super::kind::current(),
        crate::config::current(),
    ) {
        (Ok(r), Ok(k), Ok(c)) => (r, k, c),
        (Err(e), _, _) => return fail(e.to_owned()),
        (_, Err(e), _) => return fail(e.clone()),
        (_, _, Err(e)) => return fail(e.to_string()),
    };
    crate::pod::init().await;
    let pod = match crate::pod::current() {
        Ok(p) => p,
        Err(e) => return fail(format!("no pod to sweep: {e}")),
    };
    let mut only = Kinds::default();
    for name in kinds_wanted {
        match kinds.get(name) {
            Some(k) if !k.is_elsewhere() => only.insert(k.clone()),
            _ => {
                return fail(format!(
                    "this test binary registers no Rust kind `{name}` (testkit::resource_kind!)"
                ))
            }
        }
    }
    let report = sweep(pod, &only, &config.suite.name_prefix, &run.id).await;
    (report, std::process::ExitCode::SUCCESS)
}

impl SweepReport {
    /// Nothing leaked and every listing worked.
    pub fn is_clean(&self) -> bool {
        self.leaked.is_empty() && self.errors.is_empty() && self.delegated.is_empty()
    }

    /// Adds what `other` found and did.
    pub fn merge(&mut self, other: SweepReport) {
        self.swept.extend(other.swept);
        self.delegated.extend(other.delegated);
        let swept = &self.swept;
        self.delegated.retain(|k| !swept.contains(k));
        self.delegated.sort();
        self.delegated.dedup();
        self.found.extend(other.found);
        self.deleted.extend(other.deleted);
        self.leaked.extend(other.leaked);
        self.refused.extend(other.refused);
        self.errors.extend(other.errors);
    }
}

/// Lists every kind by `<prefix>-<run id>-`, deletes what it finds and
/// verifies it gone.
pub async fn sweep(pod: &Pod, kinds: &Kinds, prefix: &str, run_id: &str) -> SweepReport {
    let mut report = SweepReport::default();
    if crate::run::validate_run_id(run_id).is_err() {
        report
            .errors
            .push(format!("refusing to sweep: {run_id:?} is not a run id"));
        return report;
    }
    for spec in kinds.iter() {
        if spec.is_elsewhere() {
            report.delegated.push(spec.name().to_owned());
            continue;
        }
        report.swept.push(spec.name().to_owned());
        let list_prefix = spec.naming().run_prefix(prefix, run_id);
        match spec.list(pod, &list_prefix).await {
            Ok(listed) => {
                for r in listed {
                    let item = Resource {
                        kind: spec.name().to_owned(),
                        name: r.name,
                        id: r.id,
                    };
                    if spec.naming().carries_run_id(&item.name, prefix, run_id) {
                        report.found.push(item);
                    } else {
                        report.refused.push(item);
                    }
                }
            }
            Err(e) => report.errors.push(format!(
                "listing {} by `{list_prefix}` failed: {e}",
                spec.name()
            )),
        }
    }
    let found = report.found.clone();
    remove(pod, kinds, found, None, &mut report).await;
    report
}

/// Which residue [`janitor`] goes after.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum JanitorTarget {
    /// One run: its journals (when its results folder is given) and a
    /// listing by its prefix.
    Run {
        /// The run id.
        run_id: String,
        /// The run's results folder, holding `journal/`.
        results_dir: Option<PathBuf>,
    },
    /// Every run under a results root (`<root>/<run id>/journal/`) whose
    /// journals were last written longer ago than `age`.
    OlderThan {
        /// The folder holding one results folder per run.
        results_root: PathBuf,
        /// How old a run's last journal entry must be.
        age: Duration,
    },
}

/// Deletes the residue of a run, or of old runs: first by exact name from
/// the journals, then by listing each kind by the run's prefix. Outcomes are
/// appended to the run's journal.
pub async fn janitor(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    target: &JanitorTarget,
) -> SweepReport {
    let mut report = SweepReport::default();
    match target {
        JanitorTarget::Run {
            run_id,
            results_dir,
        } => {
            report.merge(janitor_run(pod, kinds, prefix, run_id, results_dir.as_deref()).await);
        }
        JanitorTarget::OlderThan { results_root, age } => {
            let cutoff = journal::now_ms().saturating_sub(age.as_millis() as u64);
            let Ok(dirs) = std::fs::read_dir(results_root) else {
                report
                    .errors
                    .push(format!("cannot read {}", results_root.display()));
                return report;
            };
            let mut dirs: Vec<PathBuf> = dirs.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            dirs.sort();
            for dir in dirs {
                let entries = journal::read_journal(&dir);
                let Some(newest) = entries.iter().map(|e| e.time).max() else {
                    continue;
                };
                if newest > cutoff {
                    continue;
                }
                let mut runs: Vec<&str> = entries.iter().map(|e| e.run.as_str()).collect();
                runs.sort();
                runs.dedup();
                for run_id in runs {
                    report.merge(janitor_run(pod, kinds, prefix, run_id, Some(&dir)).await);
                }
            }
        }
    }
    report
}

async fn janitor_run(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    run_id: &str,
    results_dir: Option<&Path>,
) -> SweepReport {
    let mut report = SweepReport::default();
    if crate::run::validate_run_id(run_id).is_err() {
        report
            .errors
            .push(format!("refusing to clean up: {run_id:?} is not a run id"));
        return report;
    }
    if let Some(dir) = results_dir {
        let entries: Vec<JournalEntry> = journal::read_journal(dir)
            .into_iter()
            .filter(|e| e.run == run_id)
            .collect();
        let mut todo = Vec::new();
        for journal::Outstanding { kind, name, id, .. } in
            journal::outstanding(&entries).into_iter().rev()
        {
            let naming = kinds.get(&kind).map(|k| k.naming()).unwrap_or_default();
            let item = Resource { kind, name, id };
            if naming.carries_run_id(&item.name, prefix, run_id) {
                report.found.push(item.clone());
                todo.push(item);
            } else {
                report.refused.push(item);
            }
        }
        let journal =
            Journal::at(journal::dir(dir).join(format!("janitor-{}.jsonl", std::process::id())));
        remove(pod, kinds, todo, Some((&journal, run_id)), &mut report).await;
    }
    let swept = sweep(pod, kinds, prefix, run_id).await;
    report.merge(swept);
    report.found.sort();
    report.found.dedup();
    report
}

async fn remove(
    pod: &Pod,
    kinds: &Kinds,
    items: Vec<Resource>,
    journal: Option<(&Journal, &str)>,
    report: &mut SweepReport,
) {
    let note = |item: &Resource, event: Event, detail: Option<String>| {
        if let Some((journal, run)) = journal {
            let _ = journal.append(&JournalEntry::new(
                event, &item.kind, &item.name, run, "", detail,
            ));
        }
    };
    for item in items {
        let Some(spec) = kinds.get(&item.kind) else {
            report
                .leaked
                .push((item, "its kind is not declared in testkit.toml".to_owned()));
            continue;
        };
        let log = |_: String| {};
        match delete::delete_and_verify(
            pod,
            spec,
            &item.to_ref(),
            || note(&item, Event::Deleted, None),
            &log,
        )
        .await
        {
            Ok(()) => {
                note(&item, Event::Reaped, None);
                report.deleted.push(item);
            }
            Err(delete::Leak(why)) => {
                note(&item, Event::Leaked, Some(why.clone()));
                report.leaked.push((item, why));
            }
        }
    }
}
