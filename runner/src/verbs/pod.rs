//! `testkit-runner pod up|status|ls|down`: pods started and stopped by hand.
//!
//! Each pod has a state folder `<pods dir>/<name>/` holding `handle.json`
//! (mode 0600: it holds the token), `pod.json` (pid, process group, start
//! time, private dir, logs) and `logs/`. The pods dir is `TESTKIT_PODS_DIR`,
//! else `$XDG_STATE_HOME/testkit/pods`, else `~/.local/state/testkit/pods`.
//! A pod that went away without `down` (a crash, `kill -9`, a reboot) shows
//! as dead in `ls`, and `down` reclaims what it left. A pod `run` started
//! is listed too, while the run goes on (its folder has `pod.json` only,
//! naming the run; while it boots, as `booting-<run id>` with its phase):
//! `down` of such a pod says which run it interrupts, and
//! leaves word in the run's results folder (`pod/stopped-by.json`) so that
//! the run names the stop as a stop, not as a crash.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use testkit_engine::config::SuiteConfig;
use testkit_engine::pod::{self, LaunchSpec, StopError};
use testkit_engine::settings::{var::PODS_DIR, Settings};

use crate::errors::ExpectedError;
use crate::exit;
use crate::verbs::{block_on, parse_duration};

/// `testkit-runner pod ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PodCommand {
    /// Start a pod from the suite's `[pod]` config and leave it running.
    #[command(after_help = exit::help(exit::POD_UP))]
    Up(UpArgs),
    /// Show whether pods are alive and healthy.
    #[command(after_help = exit::help(exit::POD_STATUS))]
    Status {
        /// Only this pod.
        name: Option<String>,
    },
    /// List pods, dead ones included, and those a run is still booting
    /// (state `setup` or `booting`).
    #[command(after_help = exit::help(exit::POD_LS))]
    Ls,
    /// Stop a pod (or reclaim a dead one) and verify it is gone. A pod a
    /// live `testkit-runner run` is using is stopped too: `down` says which
    /// run it interrupts, and that run reports its pod stopped by `pod down`.
    #[command(after_help = exit::help(exit::POD_DOWN))]
    Down {
        /// The pod's name, as `pod ls` shows it.
        name: String,
        /// How long the pod may take to exit after SIGTERM before SIGKILL.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        grace: Duration,
    },
}

#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// The suite whose `testkit.toml` says how to start the pod.
    #[arg(long, default_value = ".")]
    suite: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// The pod to start: a process (`[pod] command`) or a container
    /// (`[pod.container]`); `pod up` boots no machine (`vm`): `run --pod vm
    /// --keep` leaves one up.
    /// Default: a container for a pod of several nodes
    /// (`[pod.container.nodes]`) or a suite with `[pod.container]` and no
    /// `[pod] command`, else a process.
    #[arg(long, value_enum, value_name = "KIND")]
    pod: Option<crate::containers::PodMode>,
}

/// What `pod.json` records about a pod.
#[derive(Debug, Serialize, Deserialize)]
struct PodRecord {
    name: String,
    base_url: String,
    pid: u32,
    pgid: i32,
    start_ticks: Option<u64>,
    private_dir: PathBuf,
    home: PathBuf,
    logs_dir: PathBuf,
    health_path: String,
    started_at: u64,
    /// The run using the pod, when `run` started it (absent in records of
    /// `pod up`, and of older runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<RunOfPod>,
    /// A pod `run` started: the run's secrets dir, whose ledger names the
    /// credentials its processes obtained, redacted from the logs on `down`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secrets_dir: Option<PathBuf>,
    /// A pod a run is still booting: `setup` while a `[pod] setup`
    /// command runs (`pid` and `pgid` are its), `booting` until the pod is
    /// up. Absent once it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

/// The run a pod was started for: who to warn, and where to say it was
/// stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunOfPod {
    pub(crate) run_id: String,
    /// The runner's pid, with its start time: a later process of the same
    /// pid is not the runner.
    pub(crate) runner_pid: u32,
    pub(crate) runner_start_ticks: Option<u64>,
    pub(crate) results_dir: PathBuf,
}

impl RunOfPod {
    /// The run of this process (the runner).
    pub(crate) fn this_runner(run_id: &str, results_dir: &std::path::Path) -> RunOfPod {
        let pid = std::process::id();
        RunOfPod {
            run_id: run_id.to_owned(),
            runner_pid: pid,
            runner_start_ticks: testkit_engine::process::start_ticks(pid as i32),
            results_dir: results_dir.to_owned(),
        }
    }

    fn is_live(&self) -> bool {
        self.runner_start_ticks
            .is_some_and(|t| testkit_engine::process::is_running(self.runner_pid as i32, t))
    }
}

/// Where `pod down` says it stopped a run's pod: `<results>/pod/stopped-by.json`.
pub(crate) fn stopped_by_file(results_dir: &std::path::Path) -> PathBuf {
    results_dir.join("pod").join("stopped-by.json")
}

/// What `pod down` leaves in the results folder of the run it interrupts.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StoppedBy {
    /// The pid of the `pod down` that stopped the pod.
    pub(crate) pid: u32,
    /// When, in seconds since the Unix epoch.
    pub(crate) at: u64,
}

/// The word of a `pod down` that stopped the pod of the run whose results
/// folder is `results_dir`, if one did.
pub(crate) fn stopped_by(results_dir: &std::path::Path) -> Option<StoppedBy> {
    let bytes = std::fs::read(stopped_by_file(results_dir)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `TESTKIT_PODS_DIR`, when it is set, is a folder this process can write
/// in (created if missing): else records of pods would go nowhere, and
/// `pod ls` and `pod down` would not find them.
pub(crate) fn check_pods_dir(settings: &Settings) -> Result<(), ExpectedError> {
    let Some(value) = &settings.pods_dir else {
        return Ok(());
    };
    crate::verbs::writable_dir(value).map_err(|e| {
        ExpectedError::bad_args(format_args!(
            "{PODS_DIR}={:?} is invalid: {e}; give a folder you can write in (it is made \
             if missing), or unset it for $XDG_STATE_HOME/testkit/pods",
            value.as_os_str()
        ))
    })
}

/// Where the pods of `pod up` and of runs are recorded: `TESTKIT_PODS_DIR`,
/// else `$XDG_STATE_HOME/testkit/pods`, else `~/.local/state/testkit/pods`.
/// Absolute: the handles written there name paths in it, and a handle's
/// paths must mean the same folder from wherever a test reads it.
pub(crate) fn pods_dir(settings: &Settings) -> PathBuf {
    if let Some(dir) = &settings.pods_dir {
        return std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
    }
    if let Some(dir) = &settings.state_home {
        return dir.join("testkit/pods");
    }
    let home = settings.home.clone().unwrap_or_else(std::env::temp_dir);
    home.join(".local/state/testkit/pods")
}

pub(crate) fn run(cmd: PodCommand, settings: &Settings) -> Result<(), ExpectedError> {
    check_pods_dir(settings)?;
    let pods = pods_dir(settings);
    match cmd {
        PodCommand::Up(args) => block_on(up(args, &pods, settings)),
        PodCommand::Status { name } => block_on(status(name.as_deref(), &pods)),
        PodCommand::Ls => ls(&pods),
        PodCommand::Down { name, grace } => block_on(down(&name, grace, &pods)),
    }
}

async fn up(args: UpArgs, pods: &Path, settings: &Settings) -> Result<(), ExpectedError> {
    let config = SuiteConfig::load(&args.suite).map_err(ExpectedError::bad_args)?;
    if args.pod == Some(crate::containers::PodMode::Vm) {
        return Err(ExpectedError::BadArgs(
            crate::containers::ModeError::VmOutlivesRunner.to_string(),
        ));
    }
    let staging = pods.join(format!(".starting-{}-{}", std::process::id(), now()));
    let mut spec = LaunchSpec::from_config(&config, Some(&args.suite), staging.join("logs"));
    spec.target_dir = settings.target_dir.clone();
    spec.container = crate::containers::for_pod_up(args.pod, &config, &args.suite, &spec.logs_dir)
        .await
        .map_err(|e| ExpectedError::Incomplete(testkit_engine::error_chain(&e)))?;
    let launched = pod::launch(&spec)
        .await
        .map_err(|e| ExpectedError::Incomplete(format!("pod up: {e}")))?;
    let name = launched.handle.name().to_owned();
    let auth = match check_up_auth(&launched, &config).await {
        Ok(summary) => summary,
        Err(problem) => {
            // Said before the stop, which may take a while.
            eprintln!(
                "testkit-runner: pod up: auth check failed: {}",
                testkit_engine::error_chain(&problem)
            );
            return match launched.stop(config.pod.stop_grace).await {
                Ok(_) => Err(ExpectedError::ChecksReported),
                Err(e) => Err(ExpectedError::CheckFailed(format!(
                    "pod up: stopping it failed too: {e}"
                ))),
            };
        }
    };
    let dir = pods.join(&name);
    let handle_path = match record_up_pod(&staging, &dir, &launched, &config) {
        Ok(p) => p,
        Err(e) => {
            let _ = launched.stop(config.pod.stop_grace).await;
            return Err(ExpectedError::Incomplete(format!(
                "pod up: failed to record pod {name} under {}: {e}; stopping it",
                pods.display()
            )));
        }
    };
    print_up(args.json, &launched, &handle_path, &dir, &auth);
    // Leave it running: its output goes to files, not to this process.
    std::mem::forget(launched);
    Ok(())
}

/// Logs in to the pod `pod up` started and checks its auth: the check's
/// summary, or what is wrong.
async fn check_up_auth(
    launched: &testkit_engine::pod::LaunchedPod,
    config: &SuiteConfig,
) -> Result<String, UpAuthFailed> {
    match pod::connect(launched.handle.clone(), config, None).await {
        Ok(p) => match pod::check_auth(&p, Duration::from_secs(10)).await {
            Some(report) if !report.ok() => Err(UpAuthFailed::Check(report.summary())),
            Some(report) => Ok(report.summary()),
            None => Ok("the suite's [auth] sends no credential".to_owned()),
        },
        Err(e) => Err(UpAuthFailed::Login(e)),
    }
}

/// Why the auth check of a pod `pod up` started failed.
#[derive(Debug, thiserror::Error)]
enum UpAuthFailed {
    /// Logging in failed.
    #[error("logging in failed")]
    Login(#[source] pod::ConnectError),
    /// The check ran and failed: its summary.
    #[error("{0}")]
    Check(String),
}

/// A `pod.json` that cannot be read.
#[derive(Debug, thiserror::Error)]
enum UnreadableRecord {
    #[error(transparent)]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Parse(#[from] serde_json::Error),
}

/// The record `<dir>/pod.json`.
fn read_record(dir: &Path) -> Result<PodRecord, UnreadableRecord> {
    Ok(serde_json::from_slice(&std::fs::read(
        dir.join("pod.json"),
    )?)?)
}

/// Moves the state folder of a pod `pod up` started from `staging` to
/// `dir`, and writes its handle and record there: the handle's path.
fn record_up_pod(
    staging: &std::path::Path,
    dir: &std::path::Path,
    launched: &testkit_engine::pod::LaunchedPod,
    config: &SuiteConfig,
) -> std::io::Result<PathBuf> {
    if dir.exists() {
        return Err(std::io::Error::other(format!(
            "{} already exists",
            dir.display()
        )));
    }
    // The pod's stderr file stays open in the pod across the rename.
    std::fs::rename(staging, dir)?;
    let handle_path = dir.join("handle.json");
    launched
        .handle
        .with_folder_moved(staging, dir)
        .write_file(&handle_path)?;
    let health_path = launched.handle.health().unwrap_or(&config.pod.health_path);
    write_record(dir, launched, health_path, dir.join("logs"), None, None)?;
    Ok(handle_path)
}

/// Says where the pod `pod up` started is and how to use it: as JSON when
/// `json`, else for a person.
fn print_up(
    json: bool,
    launched: &testkit_engine::pod::LaunchedPod,
    handle_path: &std::path::Path,
    dir: &std::path::Path,
    auth: &str,
) {
    let name = launched.handle.name();
    if json {
        let out = serde_json::json!({
            "name": name,
            "base_url": launched.handle.base_url(),
            "port": launched.handle.port(),
            "handle": handle_path,
            "pid": launched.pid,
            "logs": dir.join("logs"),
            "boot_ms": launched.boot_time.as_millis() as u64,
            "health": launched.health,
            "auth": auth,
        });
        println!("{out}");
    } else {
        println!(
            "pod {name} is up at {} (pid {})",
            launched.handle.base_url(),
            launched.pid
        );
        println!(
            "  boot:   {:?}; health {}",
            launched.boot_time,
            launched.health.summary()
        );
        println!("  auth:   {auth}");
        println!("  handle: {}", handle_path.display());
        println!("  logs:   {}", dir.join("logs").display());
        println!(
            "use it:  TESTKIT_POD_HANDLE={} cargo test",
            handle_path.display()
        );
        println!("stop it: testkit-runner pod down {name}");
    }
}

/// Records a pod `run` started under `<pods dir>/<name>/pod.json`, so that
/// `pod ls` lists it and `pod down NAME` stops it while the run goes on (or
/// after its runner died, until the watchdog took it down). No handle is
/// written there: the run's credential stays where the run keeps it.
/// Returns the record's folder, removed when the pod goes down.
pub(crate) fn record_run_pod(
    pods: &Path,
    launched: &testkit_engine::pod::LaunchedPod,
    health_path: &str,
    run: RunOfPod,
    secrets_dir: &std::path::Path,
) -> std::io::Result<PathBuf> {
    let name = launched.handle.name();
    let dir = pods.join(name);
    if dir.exists() {
        return Err(std::io::Error::other(format!(
            "{} already exists",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir)?;
    write_record(
        &dir,
        launched,
        health_path,
        launched.logs_dir.clone(),
        Some(run),
        Some(secrets_dir.to_owned()),
    )?;
    Ok(dir)
}

/// The `pod ls` record of a pod a run is booting, under
/// `<pods dir>/booting-<run id>/`: written at each step of the boot, so
/// that `pod ls` shows the phase and `pod down` stops what runs now (a
/// setup command, or the pod). Replaced by the pod's own record once it
/// is up.
pub(crate) struct BootingRecord {
    dir: PathBuf,
    record: PodRecord,
}

impl BootingRecord {
    pub(crate) fn new(
        pods: &Path,
        run: RunOfPod,
        health_path: &str,
        logs_dir: &std::path::Path,
        secrets_dir: &std::path::Path,
    ) -> BootingRecord {
        let name = format!("booting-{}", run.run_id);
        BootingRecord {
            dir: pods.join(&name),
            record: PodRecord {
                name,
                base_url: "-".to_owned(),
                pid: 0,
                pgid: 0,
                start_ticks: None,
                private_dir: PathBuf::new(),
                home: PathBuf::new(),
                logs_dir: logs_dir.to_owned(),
                health_path: health_path.to_owned(),
                started_at: now(),
                run: Some(run),
                secrets_dir: Some(secrets_dir.to_owned()),
                phase: None,
            },
        }
    }

    /// The record's folder.
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Records `step`; returns whether the record was written (a step that
    /// started nothing writes none).
    pub(crate) fn step(&mut self, step: &pod::BootStep) -> std::io::Result<bool> {
        let r = &mut self.record;
        let (phase, pgid, ticks) = match step {
            pod::BootStep::PrivateDir(dir) => {
                r.private_dir = dir.clone();
                r.home = dir.join("home");
                return Ok(false);
            }
            pod::BootStep::Setup { pgid, start_ticks } => ("setup", *pgid, *start_ticks),
            pod::BootStep::Pod { pgid, start_ticks } => ("booting", *pgid, *start_ticks),
            // The pod is up and runs on: `pod down` still stops it.
            pod::BootStep::Bootstrap { .. } => ("bootstrap", r.pgid, r.start_ticks),
            _ => return Ok(false),
        };
        r.phase = Some(phase.to_owned());
        r.pid = pgid as u32;
        r.pgid = pgid;
        r.start_ticks = ticks;
        std::fs::create_dir_all(&self.dir)?;
        let bytes = serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?;
        std::fs::write(self.dir.join("pod.json"), bytes)?;
        Ok(true)
    }
}

/// Writes `<dir>/pod.json`.
fn write_record(
    dir: &std::path::Path,
    launched: &testkit_engine::pod::LaunchedPod,
    health_path: &str,
    logs_dir: PathBuf,
    run: Option<RunOfPod>,
    secrets_dir: Option<PathBuf>,
) -> std::io::Result<()> {
    let record = PodRecord {
        name: launched.handle.name().to_owned(),
        base_url: launched.handle.base_url().to_owned(),
        pid: launched.pid,
        pgid: launched.pgid,
        start_ticks: launched.start_ticks,
        private_dir: launched.private_dir.clone(),
        home: launched.home.clone(),
        logs_dir,
        health_path: health_path.to_owned(),
        started_at: now(),
        run,
        secrets_dir,
        phase: None,
    };
    std::fs::write(
        dir.join("pod.json"),
        serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?,
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn records(pods: &Path) -> Vec<(PathBuf, Result<PodRecord, UnreadableRecord>)> {
    let Ok(entries) = std::fs::read_dir(pods) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("pod.json").is_file())
        .map(|p| {
            let rec = read_record(&p);
            (p, rec)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn find(name: &str, pods: &Path) -> Result<(PathBuf, PodRecord), ExpectedError> {
    let dir = pods.join(name);
    if name.contains('/') || name.starts_with('.') || !dir.join("pod.json").is_file() {
        return Err(ExpectedError::bad_args(format_args!(
            "no pod named {name:?} under {} (see `testkit-runner pod ls`)",
            pods.display()
        )));
    }
    match read_record(&dir) {
        Ok(rec) => Ok((dir, rec)),
        Err(e) => Err(ExpectedError::Incomplete(format!(
            "unreadable {}: {e}",
            dir.join("pod.json").display()
        ))),
    }
}

fn ls(pods: &Path) -> Result<(), ExpectedError> {
    let all = records(pods);
    if all.is_empty() {
        println!("no pods under {}", pods.display());
        return Ok(());
    }
    println!("{:<24} {:<7} {:<8} BASE_URL", "NAME", "STATE", "PID");
    for (dir, rec) in all {
        match rec {
            Ok(r) => {
                let state = if !testkit_engine::process::is_alive(r.pgid, r.start_ticks) {
                    "dead"
                } else {
                    r.phase.as_deref().unwrap_or("alive")
                };
                println!(
                    "{:<24} {:<7} {:<8} {}{}",
                    r.name,
                    state,
                    r.pid,
                    r.base_url,
                    crate::containers::describe(&r.private_dir)
                        + &crate::machines::describe(&r.private_dir)
                );
            }
            Err(e) => println!(
                "{:<24} {:<7} {:<8} unreadable pod.json: {e}",
                dir.display(),
                "?",
                "-"
            ),
        }
    }
    Ok(())
}

async fn status(name: Option<&str>, pods: &Path) -> Result<(), ExpectedError> {
    let targets = match name {
        Some(n) => {
            let (dir, rec) = find(n, pods)?;
            vec![(dir, Ok(rec))]
        }
        None => records(pods),
    };
    let mut all_well = true;
    for (dir, rec) in targets {
        let Ok(r) = rec else {
            println!("{}: unreadable pod.json", dir.display());
            all_well = false;
            continue;
        };
        if !testkit_engine::process::is_alive(r.pgid, r.start_ticks) {
            println!(
                "{}: dead (pid {} is gone); reclaim it with `testkit-runner pod down {}`",
                r.name, r.pid, r.name
            );
            all_well = false;
            continue;
        }
        let health = pod::check_health(&r.base_url, &r.health_path, Duration::from_secs(5)).await;
        println!(
            "{}: alive (pid {}), health {}",
            r.name,
            r.pid,
            health.summary()
        );
        if !health.ok() {
            all_well = false;
        }
    }
    if all_well {
        Ok(())
    } else {
        Err(ExpectedError::ChecksReported)
    }
}

async fn down(name: &str, grace: Duration, pods: &Path) -> Result<(), ExpectedError> {
    let (dir, rec) = find(name, pods)?;
    let was_alive = testkit_engine::process::is_alive(rec.pgid, rec.start_ticks);
    // A pod a run kept: its logs are redacted of what the run's processes
    // obtained too, as the run's own stop would have.
    if let Some(dir) = &rec.secrets_dir {
        testkit_engine::redact::register_recorded(dir);
    }
    // A run still using the pod is interrupted by this: say so, and tell the
    // run (before the pod exits) that its pod was stopped, not crashed.
    let interrupted = rec.run.as_ref().filter(|r| was_alive && r.is_live());
    if let Some(run) = interrupted {
        tell_run_its_pod_stops(name, run);
    }
    match pod::stop_recorded(
        rec.pgid,
        rec.start_ticks,
        &rec.private_dir,
        Some(&rec.logs_dir),
        grace,
    )
    .await
    {
        Ok(report) => {
            let how = how_it_stopped(was_alive, &report);
            remove_pod_state(name, &dir)?;
            println!(
                "pod {name} is down: {how}; no process left; {} deleted ({:?})",
                report.removed.display(),
                report.duration
            );
            if let Some(note) = crate::containers::down_note(&report) {
                println!("{note}");
            }
            if let Some(note) = crate::machines::down_note(&report) {
                println!("{note}");
            }
            if let Some(run) = interrupted {
                println!(
                    "run {} (testkit-runner pid {}) was using it: that run is interrupted, and reports its pod stopped by `pod down` (pid {})",
                    run.run_id,
                    run.runner_pid,
                    std::process::id()
                );
            }
            Ok(())
        }
        Err(e @ (StopError::Survivors { .. } | StopError::HomeSurvived { .. })) => {
            Err(ExpectedError::CheckFailed(format!("pod down {name}: {e}")))
        }
        Err(e) => Err(ExpectedError::Incomplete(format!("pod down {name}: {e}"))),
    }
}

/// Warns that stopping the pod interrupts `run`, and writes the run the
/// word that its pod was stopped.
fn tell_run_its_pod_stops(name: &str, run: &RunOfPod) {
    eprintln!(
        "testkit-runner: pod {name} is in use by run {} (testkit-runner pid {}, results {}): stopping it interrupts that run",
        run.run_id,
        run.runner_pid,
        run.results_dir.display()
    );
    let word = StoppedBy {
        pid: std::process::id(),
        at: now(),
    };
    let file = stopped_by_file(&run.results_dir);
    let written = serde_json::to_vec(&word)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&file, bytes));
    if let Err(e) = written {
        eprintln!(
            "testkit-runner: cannot tell run {} that its pod was stopped ({}: {e}): it will report a crash",
            run.run_id,
            file.display()
        );
    }
}

/// How the pod's processes went.
fn how_it_stopped(was_alive: bool, report: &pod::StopReport) -> String {
    if !was_alive {
        "it was already dead; reclaimed what it left".to_owned()
    } else if report.drained_after_term {
        format!("{} process(es) exited after SIGTERM", report.processes)
    } else {
        format!("SIGKILL needed for {:?}", report.killed)
    }
}

/// Removes the state of the stopped pod `name`.
fn remove_pod_state(name: &str, dir: &std::path::Path) -> Result<(), ExpectedError> {
    // The run whose boot this stopped may have removed it first.
    let removed = std::fs::remove_dir_all(dir).or_else(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Ok(())
        } else {
            Err(e)
        }
    });
    if let Err(e) = removed {
        return Err(ExpectedError::CheckFailed(format!(
            "pod {name} stopped but its state {} could not be removed: {e}",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod unit {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let vars: Vec<(String, std::ffi::OsString)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).into()))
            .collect();
        Settings::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            .unwrap()
    }

    #[test]
    fn the_pods_dir_is_the_setting_else_the_state_home_else_home() {
        let all = [
            (PODS_DIR, "/p"),
            ("XDG_STATE_HOME", "/state"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(pods_dir(&settings(&all)), Path::new("/p"));
        assert_eq!(
            pods_dir(&settings(&all[1..])),
            Path::new("/state/testkit/pods")
        );
        assert_eq!(
            pods_dir(&settings(&all[2..])),
            Path::new("/home/u/.local/state/testkit/pods")
        );
    }
}
