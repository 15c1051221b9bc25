//! Finding residue on the pod: [`sweep`] lists every kind by a run's
//! prefix; [`janitor`] also deletes by exact name what a run's journals say
//! may still exist. Neither ever touches a name that does not carry a run id,
//! and the janitor never touches a run that is live: one whose runner, as
//! its results folder names it, still runs, or whose journal was written by
//! a process that still runs (pid and start time), or, with the settings
//! ([`janitor_with`]), whose id a live runner claims.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::delete;
use super::journal::{self, Event, Journal, JournalEntry};
use super::kind::{Kinds, ResourceRef};
use crate::pod::Pod;
use crate::settings::Settings;

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
    /// Why the sweep stopped before it was done (its deadline passed, it
    /// was interrupted); what it did not do is in `leaked` and `errors`.
    #[serde(default)]
    pub cut_short: Option<String>,
    /// Runs the janitor left alone because they are live, each with why
    /// (`testkit-runner pid 4242 runs it`).
    #[serde(default)]
    pub skipped_live: Vec<(String, String)>,
}

/// What stops a sweep early.
type Stop<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// How many deletes run at once, unless [`SweepBounds::concurrency`] says.
pub const DEFAULT_SWEEP_CONCURRENCY: usize = 16;

/// The bounds of a sweep: deletes run concurrently (bounded), under one
/// deadline for the whole sweep, and a stop signal cuts it short. A sweep cut
/// short says what it did not do: never an empty report for work not done.
#[non_exhaustive]
pub struct SweepBounds<'a> {
    concurrency: usize,
    deadline: Option<(Instant, Duration)>,
    stop: Option<(Stop<'a>, String)>,
    cut_short: Option<String>,
}

impl Default for SweepBounds<'_> {
    fn default() -> Self {
        SweepBounds {
            concurrency: DEFAULT_SWEEP_CONCURRENCY,
            deadline: None,
            stop: None,
            cut_short: None,
        }
    }
}

impl<'a> SweepBounds<'a> {
    /// At most `n` deletes at once (at least one).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The whole sweep ends within `limit` from now.
    pub fn deadline(mut self, limit: Duration) -> Self {
        self.deadline = Some((
            crate::duration::tokio_deadline_after(Instant::now(), limit),
            limit,
        ));
        self
    }

    /// The sweep stops when `stop` completes; `why` says what stopped it
    /// (`interrupted by SIGTERM`).
    pub fn stop_on(
        mut self,
        stop: impl Future<Output = ()> + Send + 'a,
        why: impl Into<String>,
    ) -> Self {
        self.stop = Some((Box::pin(stop), why.into()));
        self
    }

    /// Completes, with the reason, when the sweep must stop; at once when it
    /// already had to.
    async fn cut(&mut self) -> String {
        if let Some(why) = &self.cut_short {
            return why.clone();
        }
        let limit = self.deadline;
        let deadline = async move {
            match limit {
                Some((at, limit)) => {
                    tokio::time::sleep_until(at).await;
                    format!(
                        "the sweep's deadline ({}) passed",
                        humantime::format_duration(limit)
                    )
                }
                None => std::future::pending().await,
            }
        };
        let stop = async {
            match &mut self.stop {
                Some((fut, why)) => {
                    fut.as_mut().await;
                    why.clone()
                }
                None => std::future::pending().await,
            }
        };
        let why = tokio::select! {
            why = deadline => why,
            why = stop => why,
        };
        self.cut_short = Some(why.clone());
        why
    }

    fn is_cut(&self) -> bool {
        self.cut_short.is_some() || self.deadline.is_some_and(|(at, _)| Instant::now() >= at)
    }
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

impl SweepReport {
    /// The report of a sweep that could not run, saying why.
    pub fn failed(problem: String) -> SweepReport {
        SweepReport {
            errors: vec![problem],
            ..SweepReport::default()
        }
    }

    /// Nothing leaked and every listing worked.
    pub fn is_clean(&self) -> bool {
        self.leaked.is_empty()
            && self.errors.is_empty()
            && self.delegated.is_empty()
            && self.cut_short.is_none()
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
        self.skipped_live.extend(other.skipped_live);
        if self.cut_short.is_none() {
            self.cut_short = other.cut_short;
        }
    }
}

/// Lists every kind by `<prefix>-<run id>-`, deletes what it finds and
/// verifies it gone (concurrently, within the default bounds).
pub async fn sweep(pod: &Pod, kinds: &Kinds, prefix: &str, run_id: &str) -> SweepReport {
    sweep_within(pod, kinds, prefix, run_id, &mut SweepBounds::default()).await
}

async fn sweep_within(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    run_id: &str,
    bounds: &mut SweepBounds<'_>,
) -> SweepReport {
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
        let list_prefix = spec.naming().run_prefix(prefix, run_id);
        let listed = tokio::select! {
            listed = spec.list(pod, &list_prefix) => listed,
            why = bounds.cut() => {
                report.errors.push(format!(
                    "{} was not listed by `{list_prefix}`: {why}",
                    spec.name()
                ));
                continue;
            }
        };
        report.swept.push(spec.name().to_owned());
        match listed {
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
    remove(pod, kinds, found, None, &mut report, bounds).await;
    report.cut_short = bounds.cut_short.clone();
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
        /// The run's results folder, holding `journal/` and the
        /// runner's `runners/<run id>.json`.
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
/// appended to the run's journal. A live run (the runner its results
/// folder's `runners/<run id>.json` names still runs, or a process that wrote its
/// journal does) is left alone, in `skipped_live`.
pub async fn janitor(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    target: &JanitorTarget,
) -> SweepReport {
    janitor_with(pod, kinds, prefix, target, None).await
}

/// [`janitor`], which with `settings` (where secrets dirs are) also leaves
/// alone a run whose id a live `testkit-runner` claims: its tests may not
/// have journaled anything yet, or not for a while.
pub async fn janitor_with(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    target: &JanitorTarget,
    settings: Option<&Settings>,
) -> SweepReport {
    let of_run = |run_id: &str, dir: Option<&Path>| {
        let (run_id, dir) = (run_id.to_owned(), dir.map(Path::to_owned));
        async move {
            sweep_run(
                pod,
                kinds,
                prefix,
                &run_id,
                dir.as_deref(),
                SweepBounds::default(),
            )
            .await
        }
    };
    let mut report = SweepReport::default();
    match target {
        JanitorTarget::Run {
            run_id,
            results_dir,
        } => {
            let entries = results_dir
                .as_deref()
                .map(journal::read_journal)
                .unwrap_or_default();
            match live_because(&entries, run_id, results_dir.as_deref(), settings) {
                Some(why) => report.skipped_live.push((run_id.clone(), why)),
                None => report.merge(of_run(run_id, results_dir.as_deref()).await),
            }
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
                    // Old journals are no proof of a dead run: a test may
                    // hold a resource for longer than the age, silently.
                    match live_because(&entries, run_id, Some(&dir), settings) {
                        Some(why) => report.skipped_live.push((run_id.to_owned(), why)),
                        None => report.merge(of_run(run_id, Some(&dir)).await),
                    }
                }
            }
        }
    }
    report
}

/// Why the run `run_id` is live, when it is: the runner that its results
/// folder `results_dir` names still runs, or the runner that claims its id
/// (known from `settings`) does, or a process that wrote its entries of
/// `entries` does (a test process, its reaper, a janitor). The first holds
/// whatever the caller's environment: between two tests a live run has no
/// live journal writer, and its claim is where the runner's
/// `XDG_RUNTIME_DIR` put it, which a janitor run by cron does not share.
fn live_because(
    entries: &[JournalEntry],
    run_id: &str,
    results_dir: Option<&Path>,
    settings: Option<&Settings>,
) -> Option<String> {
    if let Some(runner) = results_dir
        .and_then(|dir| crate::run::runner_of(dir, run_id))
        .filter(|c| c.is_live() && c.pid != std::process::id())
    {
        return Some(format!(
            "testkit-runner pid {} runs it, as {}/{run_id}.json says",
            runner.pid,
            crate::run::RUNNERS_DIR
        ));
    }
    if let Some(runner) = settings.and_then(|s| crate::run::live_runner(s, run_id)) {
        return Some(format!("testkit-runner pid {} runs it", runner.pid));
    }
    let of_run: Vec<JournalEntry> = entries
        .iter()
        .filter(|e| e.run == run_id)
        .cloned()
        .collect();
    let live = journal::live_writers(&of_run);
    if live.is_empty() {
        return None;
    }
    let who: Vec<String> = live
        .iter()
        .map(|(pid, test)| match test.as_str() {
            "" => format!("pid {pid}"),
            test => format!("pid {pid} (test `{test}`)"),
        })
        .collect();
    Some(format!(
        "a process that wrote its journal still runs: {}",
        who.join(", ")
    ))
}

/// The residue of one run: first by exact name what its journals (in
/// `results_dir`) say may still exist, whatever a listing shows, then by
/// listing each kind by the run's prefix; all within `bounds`. Outcomes are
/// appended to the run's journal.
pub async fn sweep_run(
    pod: &Pod,
    kinds: &Kinds,
    prefix: &str,
    run_id: &str,
    results_dir: Option<&Path>,
    mut bounds: SweepBounds<'_>,
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
            if kinds.get(&kind).is_some_and(|k| k.is_elsewhere()) {
                // Rust code this binary does not link: its sweeper's work.
                if !report.delegated.contains(&kind) {
                    report.delegated.push(kind);
                }
                continue;
            }
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
        remove(
            pod,
            kinds,
            todo,
            Some((&journal, run_id)),
            &mut report,
            &mut bounds,
        )
        .await;
    }
    let swept = sweep_within(pod, kinds, prefix, run_id, &mut bounds).await;
    report.merge(swept);
    report.found.sort();
    report.found.dedup();
    report
}

type Deleting<'f> = Pin<Box<dyn Future<Output = Result<(), delete::Leak>> + Send + 'f>>;

/// Deletes `items` and verifies each gone, at most `bounds.concurrency` at
/// once; when the bounds cut it short, what was not done is leaked, saying why.
async fn remove(
    pod: &Pod,
    kinds: &Kinds,
    items: Vec<Resource>,
    journal: Option<(&Journal, &str)>,
    report: &mut SweepReport,
    bounds: &mut SweepBounds<'_>,
) {
    let note = |item: &Resource, event: Event, detail: Option<String>| {
        if let Some((journal, run)) = journal {
            let _ = journal.append(&JournalEntry::new(
                event, &item.kind, &item.name, run, "", detail,
            ));
        }
    };
    let delete_one = |item: Resource| -> Deleting<'_> {
        Box::pin(async move {
            let Some(spec) = kinds.get(&item.kind) else {
                return Err(delete::Leak(
                    "its kind is not declared in testkit.toml".to_owned(),
                ));
            };
            let log = |_: String| {};
            delete::delete_and_verify(
                pod,
                spec,
                &item.to_ref(),
                || note(&item, Event::Deleted, None),
                &log,
            )
            .await
            .map(drop)
        })
    };
    let mut queue = items.into_iter();
    let mut running: Vec<(Resource, Deleting<'_>)> = Vec::new();
    loop {
        while running.len() < bounds.concurrency && !bounds.is_cut() {
            let Some(item) = queue.next() else { break };
            running.push((item.clone(), delete_one(item)));
        }
        if running.is_empty() {
            break;
        }
        let done = tokio::select! {
            done = next_done(&mut running) => done,
            _ = bounds.cut() => break,
        };
        match done {
            (item, Ok(())) => {
                note(&item, Event::Reaped, None);
                report.deleted.push(item);
            }
            (item, Err(delete::Leak(why))) => {
                note(&item, Event::Leaked, Some(why.clone()));
                report.leaked.push((item, why));
            }
        }
    }
    if queue.len() == 0 && running.is_empty() {
        return;
    }
    // Cut short: by the stop, or by the deadline between two deletes.
    let why = bounds
        .cut_short
        .get_or_insert_with(|| "the sweep's deadline passed".to_owned())
        .clone();
    for (item, _) in running.drain(..) {
        let why = format!("not verified gone: {why} while it was being deleted");
        note(&item, Event::Leaked, Some(why.clone()));
        report.leaked.push((item, why));
    }
    for item in queue {
        let why = format!("not deleted: {why}");
        note(&item, Event::Leaked, Some(why.clone()));
        report.leaked.push((item, why));
    }
}

/// The first of `running` to finish, taken out of it.
async fn next_done(
    running: &mut Vec<(Resource, Deleting<'_>)>,
) -> (Resource, Result<(), delete::Leak>) {
    std::future::poll_fn(|cx| {
        for i in 0..running.len() {
            if let Poll::Ready(result) = running[i].1.as_mut().poll(cx) {
                let (item, _) = running.swap_remove(i);
                return Poll::Ready((item, result));
            }
        }
        Poll::Pending
    })
    .await
}
