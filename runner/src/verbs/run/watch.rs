//! Watching a pod the runner started.
//!
//! The dead-man's switch: the pod is put under a watchdog, this same binary
//! in a hidden mode (`testkit-runner watch-pod`), in a process group of its
//! own, whose stdin is a pipe only the runner holds the write end of (it is
//! close-on-exec, so no test process inherits it). It is armed before the
//! boot begins, and told, a line at a time, of each thing the boot makes as
//! it is made (the pod's private dir, each `[pod] setup` command's group,
//! the pod's group), then of other groups to end with it (the test
//! engine's), the pod's `pod ls` record, and, once the runner has stopped
//! or kept the pod itself, `release`. When the pipe closes without
//! `release` (the runner died, SIGKILL included, mid-boot as well), the
//! watchdog ends the groups and the pod's tree, verifies it drained, and
//! removes the pod's private dir, the run's secrets dir and the record. It
//! runs with an empty environment: what broke the runner through its
//! environment (a preloaded library, a variable) does not reach it.
//!
//! The crash watch: while the run goes on, the pod's process is polled; an
//! exit the runner did not ask for is a verdict of its own, and what the
//! pod's tree held is remembered, so that teardown ends what outlived the
//! pod. An exit is a crash unless `testkit-runner pod down` left word in the
//! results folder that it stopped the pod: then it is named as that stop.
//!
//! The node watch: the pod's process of a pod of several is the engine's
//! events of its nodes, which lives whatever becomes of a node. So each
//! node is watched from up to down, through the engine's events
//! ([`NodeWatch`]), and every exit of one is judged against the fault
//! journal: an exit that no fault of a test (a stop, a kill, a restart of
//! that node, from its journaling to its undo) explains is a [`NodeDeath`],
//! the `pod` verdict.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use testkit_engine::pod::fault::{self, Fault, FaultAction};
use testkit_engine::pod::nodes::{NodeExit, NodeWatch};
use testkit_engine::pod::{BootObserver, BootStep, LaunchedPod};
use testkit_engine::process;
use testkit_engine::resource::{Event, JournalEntry};

use crate::verbs::pod::BootingRecord;

/// How long the watchdog gives each group to end after SIGTERM.
const WATCHDOG_GRACE: Duration = Duration::from_secs(3);

/// The write end of the watchdog's pipe: process-wide, because the test
/// engine's group is registered from deep inside the tests phase.
static SWITCH: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// `testkit-runner watch-pod` (hidden): the watchdog.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    #[arg(long)]
    logs_dir: PathBuf,
    /// The run's secrets dir, removed with the pod.
    #[arg(long)]
    secrets_dir: Option<PathBuf>,
}

/// What the runner told the watchdog, line by line.
#[derive(Debug, Default)]
struct Told {
    released: bool,
    /// Groups that end with the runner: the setup commands', the test engine's.
    groups: Vec<(i32, Option<u64>)>,
    pod: Option<(i32, Option<u64>)>,
    private_dir: Option<PathBuf>,
    /// The pod's `pod ls` records: while it boots, then once it is up.
    records: Vec<PathBuf>,
    /// The run's browser: its run id and folder, told before any test runs.
    browser: Option<(String, PathBuf)>,
    /// Scratch folders (a build's copy of its context), told before they
    /// are made.
    scratch: Vec<PathBuf>,
}

impl Told {
    fn hear(&mut self, line: &str) {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let group = || -> Option<(i32, Option<u64>)> {
            let (pgid, ticks) = rest.split_once(' ').unwrap_or((rest, "-"));
            Some((pgid.parse().ok()?, ticks.parse().ok()))
        };
        match word {
            "release" => self.released = true,
            "group" => self.groups.extend(group()),
            "pod" => self.pod = group().or(self.pod),
            "private-dir" if !rest.is_empty() => self.private_dir = Some(rest.into()),
            "record" if !rest.is_empty() => self.records.push(rest.into()),
            "scratch" if !rest.is_empty() => self.scratch.push(rest.into()),
            // A machine kept past the run (`--keep`): its group and run
            // dir, told before QEMU started, are no longer the runner's.
            "keep-group" => {
                if let Some((pgid, _)) = group() {
                    self.groups.retain(|g| g.0 != pgid);
                }
            }
            "keep-scratch" => self.scratch.retain(|d| d.as_path() != Path::new(rest)),
            "browser" => {
                if let Some((run, dir)) = rest.split_once(' ') {
                    self.browser = Some((run.to_owned(), dir.into()));
                }
            }
            _ => {}
        }
    }
}

fn ticks_word(ticks: Option<u64>) -> String {
    ticks.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

/// The watchdog's life: read the runner's lines until the pipe closes, then
/// end what the runner did not.
pub(crate) fn watchdog(args: WatchArgs) -> u8 {
    // The runner started this process: its pid is the one that claims the
    // run id (see `secrets_dir` below).
    let runner = nix::unistd::getppid().as_raw() as u32;
    let mut told = Told::default();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        told.hear(&line);
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 1;
    };
    // The runner removes its scratch when done with it; what is left is
    // the dead runner's.
    for dir in &told.scratch {
        remove_dir(dir);
    }
    rt.block_on(async {
        // A container pod's containers first: the `docker run` of a setup
        // or of the pod waits for its container, which the daemon keeps
        // whatever becomes of that process.
        if let (false, Some(dir)) = (told.released, &told.private_dir) {
            end_containers_of_boot(dir).await;
        }
        for &(pgid, ticks) in &told.groups {
            if let Err(survivors) = process::terminate_group(pgid, ticks, WATCHDOG_GRACE).await {
                eprintln!("watchdog: group {pgid} survived: {survivors:?}");
            }
        }
        // After the test engine: no test is left to start it again.
        if let (false, Some((run_id, dir))) = (told.released, &told.browser) {
            if let Err(e) = testkit_engine::browser::end(dir, run_id, WATCHDOG_GRACE).await {
                eprintln!("watchdog: the run's browser: {e}");
            }
        }
        if told.released {
            return 0;
        }
        // The pod's logs are redacted as they are kept: with every
        // credential any process of the run obtained, not only the handle's.
        if let Some(dir) = &args.secrets_dir {
            testkit_engine::redact::register_recorded(dir);
        }
        if !stop_pod(&told, &args).await {
            return 1;
        }
        if remove_run_dirs(&told, &args, runner) {
            0
        } else {
            1
        }
    })
}

/// Stops the pod the runner left, or cleans up after the boot it left
/// unfinished; whether all of it went.
async fn stop_pod(told: &Told, args: &WatchArgs) -> bool {
    match (told.pod, &told.private_dir) {
        (Some((pgid, ticks)), Some(private_dir)) => {
            eprintln!("watchdog: the runner is gone; stopping pod group {pgid}");
            match testkit_engine::pod::stop_recorded(
                pgid,
                ticks,
                private_dir,
                Some(&args.logs_dir),
                WATCHDOG_GRACE,
            )
            .await
            {
                Ok(r) => {
                    eprintln!(
                        "watchdog: {} processes ended; {} deleted",
                        r.processes,
                        r.removed.display()
                    );
                    true
                }
                Err(e) => {
                    eprintln!("watchdog: {e}");
                    false
                }
            }
        }
        (None, Some(private_dir)) => {
            eprintln!("watchdog: the runner is gone before its pod started");
            end_containers_of_boot(private_dir).await && remove_dir(private_dir)
        }
        _ => true,
    }
}

/// Removes the run's record dirs and its secrets dir, unless `runner` no
/// longer owns that; whether all of them went.
fn remove_run_dirs(told: &Told, args: &WatchArgs, runner: u32) -> bool {
    // A runner that took the run id over once the dead one's claim
    // lapsed owns the secrets dir now: leave it.
    let secrets = args
        .secrets_dir
        .as_ref()
        .filter(|dir| testkit_engine::run::read_claim(dir).is_none_or(|c| c.pid == runner));
    told.records
        .iter()
        .chain(secrets)
        .all(|dir| remove_dir(dir))
}

/// Removes what a container pod's boot made in the engine before its pod
/// started (its network, volumes, setup containers); says why not.
async fn end_containers_of_boot(private_dir: &Path) -> bool {
    match testkit_engine::pod::container::stop_of_private_dir(private_dir, WATCHDOG_GRACE).await {
        Ok(_) => true,
        Err(e) => {
            eprintln!(
                "watchdog: the boot's containers: {}",
                testkit_engine::errors::error_chain(&e)
            );
            false
        }
    }
}

/// Removes `dir`, which may be gone already; says why not.
fn remove_dir(dir: &Path) -> bool {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            eprintln!("watchdog: cannot remove {}: {e}", dir.display());
            false
        }
    }
}

/// Arms the watchdog before a boot: it ends whatever the boot makes
/// (told by [`boot_observer`]) and removes `secrets_dir`, should the
/// runner die. Its output goes to `watchdog.log` in `logs_dir`.
pub(crate) fn arm(logs_dir: &Path, secrets_dir: &Path) -> Result<(), ArmError> {
    let exe = std::env::current_exe().map_err(ArmError::NoRunner)?;
    let create = |path: &Path| {
        let path = path.to_owned();
        move |source| ArmError::Create { path, source }
    };
    std::fs::create_dir_all(logs_dir).map_err(create(logs_dir))?;
    let log_path = logs_dir.join("watchdog.log");
    let log = std::fs::File::create(&log_path).map_err(create(&log_path))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("watch-pod")
        .arg("--logs-dir")
        .arg(logs_dir)
        .arg("--secrets-dir")
        .arg(secrets_dir)
        // Nothing of the runner's environment: not a preloaded library
        // that could kill the watchdog with the runner, not a variable.
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(false);
    let (mut child, _) = process::spawn_in_group(&mut cmd).map_err(ArmError::Start)?;
    let stdin = child.stdin.take().ok_or(ArmError::NoStdin)?;
    let fd: OwnedFd = stdin.into_owned_fd().map_err(ArmError::Pipe)?;
    // Writes are a few bytes into an empty pipe: they never wait.
    *SWITCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::fs::File::from(fd));
    // Reaped whenever it ends; the runner never waits for it.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

/// Why the watchdog could not be armed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArmError {
    #[error("cannot find the runner")]
    NoRunner(#[source] std::io::Error),
    #[error("cannot create {}", path.display())]
    Create {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the pod's watchdog")]
    Start(#[source] std::io::Error),
    #[error("the watchdog has no stdin")]
    NoStdin,
    #[error("the watchdog's pipe")]
    Pipe(#[source] std::io::Error),
}

/// Why ending an interrupted boot left something behind.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BootNotEnded {
    #[error("the setup command's group {pgid} survived SIGTERM and SIGKILL: {survivors:?}")]
    SetupSurvived {
        pgid: i32,
        survivors: Vec<(i32, String)>,
    },
    #[error("the machine's QEMU group {pgid} survived SIGTERM and SIGKILL: {survivors:?}")]
    MachineSurvived {
        pgid: i32,
        survivors: Vec<(i32, String)>,
    },
    #[error(transparent)]
    Stop(#[from] testkit_engine::pod::StopError),
    #[error("its private dir {} survived", .0.display())]
    PrivateDir(std::path::PathBuf),
}

/// What the boot has made so far, as the engine told it.
#[derive(Debug, Default, Clone)]
struct BootTrace {
    private_dir: Option<PathBuf>,
    setups: Vec<(i32, Option<u64>)>,
    /// A machine pod's QEMU group, told before QEMU starts.
    machine: Option<(i32, Option<u64>)>,
    pod: Option<(i32, Option<u64>)>,
}

static TRACE: Mutex<BootTrace> = Mutex::new(BootTrace {
    private_dir: None,
    setups: Vec::new(),
    machine: None,
    pod: None,
});

/// Tells the watchdog (and the runner itself, for an interrupted boot) of
/// each thing the boot makes, as it is made, and keeps the boot's `pod ls`
/// record in step.
pub(crate) fn boot_observer(record: BootingRecord) -> BootObserver {
    let record = Mutex::new(record);
    BootObserver::new(move |step| {
        let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
        match record.step(&step) {
            Ok(true) => tell_record(record.dir()),
            Ok(false) => {}
            Err(e) => eprintln!(
                "testkit-runner: cannot list the booting pod for `pod ls` ({}): {e}",
                record.dir().display()
            ),
        }
        let mut trace = TRACE.lock().unwrap_or_else(|e| e.into_inner());
        match step {
            BootStep::PrivateDir(dir) => {
                send(&format!("private-dir {}", dir.display()));
                trace.private_dir = Some(dir);
            }
            BootStep::Setup { pgid, start_ticks } | BootStep::Bootstrap { pgid, start_ticks } => {
                send(&format!("group {pgid} {}", ticks_word(start_ticks)));
                trace.setups.push((pgid, start_ticks));
            }
            BootStep::Pod { pgid, start_ticks } => {
                send(&format!("pod {pgid} {}", ticks_word(start_ticks)));
                trace.pod = Some((pgid, start_ticks));
            }
            // A machine's group, told before QEMU starts in it, and its
            // run dir (the overlay): both end with the runner.
            BootStep::MachineGroup { pgid, start_ticks } => {
                send(&format!("group {pgid} {}", ticks_word(start_ticks)));
                trace.machine = Some((pgid, start_ticks));
            }
            BootStep::MachineDir(dir) => tell_scratch(&dir),
            _ => {}
        }
    })
}

/// Ends what an interrupted boot made (its future dropped midway): the
/// setup commands' groups, the pod's tree, its private dir, its logs kept
/// redacted. Says what it ended, or what survived.
pub(crate) async fn end_interrupted_boot(logs_dir: &Path) -> Result<String, BootNotEnded> {
    let trace = TRACE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut ended = Vec::new();
    for (pgid, ticks) in trace.setups {
        if let Err(survivors) = process::terminate_group(pgid, ticks, WATCHDOG_GRACE).await {
            return Err(BootNotEnded::SetupSurvived { pgid, survivors });
        }
    }
    if let Some((pgid, ticks)) = trace.machine {
        if let Err(survivors) = process::terminate_group(pgid, ticks, WATCHDOG_GRACE).await {
            return Err(BootNotEnded::MachineSurvived { pgid, survivors });
        }
        ended.push(format!(
            "the booting machine's QEMU (group {pgid}) was ended, verified gone"
        ));
    }
    match (trace.pod, &trace.private_dir) {
        (Some((pgid, ticks)), Some(dir)) => {
            let r = testkit_engine::pod::stop_recorded(
                pgid,
                ticks,
                dir,
                Some(logs_dir),
                WATCHDOG_GRACE,
            )
            .await?;
            ended.push(format!(
                "the booting pod (group {pgid}, {} process(es)) was stopped and verified gone",
                r.processes
            ));
        }
        (None, Some(dir)) => {
            if !end_containers_of_boot(dir).await || !remove_dir(dir) {
                return Err(BootNotEnded::PrivateDir(dir.clone()));
            }
            ended.push(match trace.machine {
                Some(_) => format!(
                    "its private dir {} (with the machine's overlay) removed",
                    dir.display()
                ),
                None => "the pod had not started yet".to_owned(),
            });
        }
        _ => ended.push("nothing had been started yet".to_owned()),
    }
    Ok(ended.join("; "))
}

/// A `pod ls` record of the pod, removed with it should the runner die.
pub(crate) fn tell_record(dir: &Path) {
    send(&format!("record {}", dir.display()));
}

fn send(line: &str) {
    if let Some(f) = SWITCH.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = writeln!(f, "{line}");
    }
}

/// A scratch folder, removed should the runner die: told before it is
/// made.
pub(crate) fn tell_scratch(dir: &Path) {
    send(&format!("scratch {}", dir.display()));
}

/// The group `pgid` (the test engine's) ends with the runner.
pub(crate) fn also_end(pgid: i32) {
    if let Some(ticks) = process::start_ticks(pgid) {
        send(&format!("group {pgid} {ticks}"));
    }
}

/// The run's browser (its folder `dir`, its processes tagged with
/// `run_id`) ends with the runner: told before any test can start it.
pub(crate) fn tell_browser(run_id: &str, dir: &Path) {
    send(&format!("browser {run_id} {}", dir.display()));
}

/// A machine kept past the run (`--keep`): the watchdog, released or not,
/// no longer ends its group nor removes its run dir.
pub(crate) fn keep_machine(pgid: i32, run_dir: &Path) {
    send(&format!("keep-group {pgid}"));
    send(&format!("keep-scratch {}", run_dir.display()));
}

/// The runner has stopped (or keeps) the pod itself: the watchdog leaves
/// it alone, and exits.
pub(crate) fn disarm() {
    send("release");
    SWITCH.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// An exit of the pod the runner did not ask for: a crash, or a stop by
/// `pod down`.
#[derive(Debug, Clone)]
pub(crate) struct Crash {
    /// `exit status 134`, `killed by SIGABRT`.
    pub(crate) status: String,
    /// The pid of the `testkit-runner pod down` that stopped it, when one
    /// did: a stop, not a crash.
    pub(crate) stopped_by: Option<u32>,
    /// A container pod whose container someone outside the run stopped or
    /// removed (`docker stop`, `docker rm -f`): a stop, not a crash.
    pub(crate) stopped_outside: bool,
    /// A machine pod's machine, described: its QEMU is what exited.
    pub(crate) machine: Option<String>,
    pub(crate) at: SystemTime,
    /// How long after it was up.
    pub(crate) after: Duration,
    /// The last lines of its stderr, redacted.
    pub(crate) last_lines: Vec<String>,
}

impl Crash {
    pub(crate) fn describe(&self) -> String {
        let at = humantime::format_rfc3339_seconds(self.at);
        let lines = if self.last_lines.is_empty() {
            "it printed nothing on stderr".to_owned()
        } else {
            format!("its last lines: {}", self.last_lines.join(" | "))
        };
        let after = humantime::format_duration(Duration::from_secs(self.after.as_secs()));
        match self.stopped_by {
            Some(pid) => format!(
                "the pod was stopped by `pod down` (pid {pid}) mid-run: {} at {at}, {after} after it was up; {lines}",
                self.status
            ),
            None if self.machine.is_some() => format!(
                "the pod's machine ({}) went down mid-run: {} at {at}, {after} after it was up; {}",
                self.machine.as_deref().unwrap_or_default(),
                self.status,
                match self.last_lines.is_empty() {
                    true => "its console printed nothing".to_owned(),
                    false => format!("its console's last lines: {}", self.last_lines.join(" | ")),
                }
            ),
            None if self.stopped_outside => format!(
                "the pod was stopped from outside the run mid-run, not by testkit: {} at {at}, {after} after it was up; {lines}",
                self.status
            ),
            None => format!(
                "the pod crashed mid-run: {} at {at}, {after} after it was up; {lines}",
                self.status
            ),
        }
    }

    /// What happened to the pod, in a few words: `the pod crashed`.
    pub(crate) fn what(&self) -> &'static str {
        match self.stopped_by {
            Some(_) => "the pod was stopped by `pod down`",
            None if self.machine.is_some() => "the pod's machine went down",
            None if self.stopped_outside => "the pod was stopped from outside the run",
            None => "the pod crashed",
        }
    }
}

#[derive(Default)]
struct Seen {
    crash: Option<Crash>,
    tree: BTreeSet<(i32, u64)>,
}

/// Watches the pod's process, and the nodes of a pod of several, until
/// [`PodWatch::stop`].
pub(crate) struct PodWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
    nodes: Nodes,
    up_at: SystemTime,
    watched: Arc<Watched>,
}

/// The pod's process as the crash watch looks at it.
struct Watched {
    pid: i32,
    pgid: i32,
    results_dir: PathBuf,
    stderr_log: PathBuf,
    private_dir: PathBuf,
    /// A machine pod's machine: its QEMU is `pid`.
    machine: Option<testkit_engine::machine::MachineRecord>,
    up: Instant,
}

impl Watched {
    /// Looks at the pod's process once: whether it has exited (its crash
    /// then recorded in `seen`, unless one is already).
    async fn look(&self, seen: &Mutex<Seen>) -> bool {
        // WNOWAIT: the status is read, the child left for its owner to reap.
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        let status = match waitid(Id::Pid(Pid::from_raw(self.pid)), flags) {
            Ok(WaitStatus::Exited(_, code)) => Some(format!("exit status {code}")),
            Ok(WaitStatus::Signaled(_, sig, _)) => Some(format!("killed by {sig}")),
            Ok(_) => None,
            Err(e) => Some(format!("gone ({e})")),
        };
        // A container pod's `docker run` exits with its container:
        // the engine says whether someone stopped it.
        let fate = match status {
            Some(_) => testkit_engine::pod::container::fate(&self.private_dir).await,
            None => None,
        };
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        let Some(status) = status else {
            s.tree.extend(process::tree_of(self.pgid));
            return false;
        };
        if s.crash.is_none() {
            let (status, last_lines) = match &self.machine {
                Some(m) => (
                    crate::machines::went_down(m, &status),
                    last_lines(&m.console_log(), 5),
                ),
                None => (
                    match &fate {
                        Some(Ok(how) | Err(how)) => format!("{status}: {how}"),
                        None => status,
                    },
                    last_lines(&self.stderr_log, 5),
                ),
            };
            s.crash = Some(Crash {
                status,
                stopped_outside: matches!(fate, Some(Ok(_))),
                // Written before `pod down` signals the pod.
                stopped_by: crate::verbs::pod::stopped_by(&self.results_dir).map(|w| w.pid),
                machine: self.machine.as_ref().map(|m| m.describe()),
                at: SystemTime::now(),
                after: self.up.elapsed(),
                last_lines,
            });
        }
        true
    }
}

/// The nodes of a pod of several, as watched.
enum Nodes {
    /// A pod of one process or one container: its process is the watch.
    None,
    Watched {
        watch: NodeWatch,
        entry: String,
    },
    /// Its node watch could not start: why.
    Blind(String),
}

impl PodWatch {
    /// Watches `pod`, the pod of the run whose results folder is
    /// `results_dir` (where `pod down` says it stopped it).
    pub(crate) fn start(pod: &LaunchedPod, results_dir: &Path) -> PodWatch {
        let watched = Arc::new(Watched {
            pid: pod.pid as i32,
            pgid: pod.pgid,
            results_dir: results_dir.to_owned(),
            stderr_log: pod.logs_dir.join("pod.stderr.log"),
            private_dir: pod.private_dir.clone(),
            machine: pod.machine_record().cloned(),
            up: Instant::now(),
        });
        PodWatch::of(watched)
    }

    fn of(watched: Arc<Watched>) -> PodWatch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let nodes = watch_nodes(&watched.private_dir);
        let (shared, looking) = (seen.clone(), watched.clone());
        let task = tokio::spawn(async move {
            while !looking.look(&shared).await {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        PodWatch {
            seen,
            task,
            nodes,
            up_at: SystemTime::now(),
            watched,
        }
    }

    /// Looks at the pod's process once more, now: an exit since the last
    /// poll (up to 200 ms ago) is seen before the runner stops or keeps
    /// the pod, not taken for the stop's own doing.
    pub(crate) async fn settle(&self) {
        self.watched.look(&self.seen).await;
    }

    /// The node exits of a pod of several that no fault journaled in
    /// `results_dir` explains, in order; or why its nodes were not
    /// watched (all along, or since when).
    pub(crate) fn node_deaths(&self, results_dir: &Path) -> (Vec<NodeDeath>, Option<String>) {
        match &self.nodes {
            Nodes::None => (Vec::new(), None),
            Nodes::Blind(why) => (Vec::new(), Some(why.clone())),
            Nodes::Watched { watch, entry } => {
                let deaths = unexplained(watch.exits(), results_dir, entry, self.up_at);
                (deaths, watch.ended())
            }
        }
    }

    /// The crash, if the pod exited.
    pub(crate) fn crash(&self) -> Option<Crash> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .crash
            .clone()
    }

    /// Stops watching (the runner is about to stop the pod); returns every
    /// process the pod's tree was seen to hold.
    pub(crate) fn stop(self) -> Vec<(i32, u64)> {
        self.task.abort();
        if let Nodes::Watched { watch, .. } = self.nodes {
            watch.stop();
        }
        let s = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        s.tree.iter().copied().collect()
    }
}

/// Starts watching the nodes of the pod whose private dir is
/// `private_dir`, when it is a pod of several; its `docker events` ends
/// with the runner, should the runner die.
fn watch_nodes(private_dir: &Path) -> Nodes {
    let Some(record) = testkit_engine::pod::container::ContainerRecord::read(private_dir) else {
        return Nodes::None;
    };
    let Some(entry) = record.entry.clone() else {
        return Nodes::None;
    };
    match NodeWatch::start(&record) {
        Ok(watch) => {
            also_end(watch.pgid());
            Nodes::Watched { watch, entry }
        }
        // The cause printed once, after the context.
        Err(e) => Nodes::Blind(match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        }),
    }
}

/// An exit of a node that no fault of a test explains.
#[derive(Debug, Clone)]
pub(crate) struct NodeDeath {
    pub(crate) exit: NodeExit,
    /// The node is the pod's entry: its API went with it.
    pub(crate) entry: bool,
    /// How long after the pod was up (zero when before).
    pub(crate) after: Duration,
    /// The tests that were running when it exited, by their records; or
    /// why the records could not be read.
    pub(crate) tests: Result<Running, std::sync::Arc<testkit_engine::report::ReportError>>,
}

impl NodeDeath {
    /// `node `worker-1` exited mid-run, no fault of a test doing it: exit
    /// code 0 at …, 12s after the pod was up, while t1 ran; its last
    /// lines: …`.
    pub(crate) fn describe(&self) -> String {
        let exit = &self.exit;
        let which = if self.entry {
            format!("the entry node `{}`", exit.node)
        } else {
            format!("node `{}`", exit.node)
        };
        let at = humantime::format_rfc3339_seconds(exit.at);
        let after = humantime::format_duration(Duration::from_secs(self.after.as_secs()));
        let during = match &self.tests {
            Ok(Running::During(tests)) => format!("while {} ran", tests.join(", ")),
            Ok(Running::JustAfter(tests)) => format!(
                "while no test was running, within a second after {} ended",
                tests.join(", ")
            ),
            Ok(Running::Nothing) => "while no test was running".to_owned(),
            Err(e) => format!("the tests running then are unknown ({e})"),
        };
        let lines = if exit.last_lines.is_empty() {
            "its output could not be read (its container is gone)".to_owned()
        } else {
            format!("its last lines: {}", exit.last_lines.join(" | "))
        };
        let api = if self.entry {
            "; the pod's API went with it"
        } else {
            ""
        };
        format!(
            "{which} exited mid-run, no fault of a test doing it: {} at {at}, {after} after \
             the pod was up, {during} (container {}){api}; {lines}",
            exit.status(),
            &exit.container[..exit.container.len().min(12)],
        )
    }
}

/// How far apart the runner's and the engine's clocks may be when an
/// exit is matched with the fault that explains it.
const CLOCK_SLACK_MS: u64 = 1000;

/// A fault that ends its node's container (a stop, a kill, a restart),
/// from its journaling to its undo (`None`: not undone yet).
#[derive(Debug)]
struct FaultWindow {
    name: String,
    node: String,
    from_ms: u64,
    to_ms: Option<u64>,
}

/// The windows of the faults journaled in `entries` that end a node.
fn fault_windows(entries: &[JournalEntry]) -> Vec<FaultWindow> {
    let mut windows: Vec<FaultWindow> = Vec::new();
    for e in entries.iter().filter(|e| e.kind == fault::JOURNAL_KIND) {
        if e.event == Event::Pending {
            let Some(fault) = e.id.as_deref().and_then(|j| Fault::from_json(j).ok()) else {
                continue;
            };
            if matches!(
                fault.action,
                FaultAction::Stop | FaultAction::Kill | FaultAction::Restart
            ) {
                windows.push(FaultWindow {
                    name: e.name.clone(),
                    node: fault.node,
                    from_ms: e.time,
                    to_ms: None,
                });
            }
        } else if e.event.is_settled() || e.event == Event::Leaked {
            // The journal is in time order: the latest open window of
            // that name is the one this closes.
            if let Some(w) = windows
                .iter_mut()
                .rev()
                .find(|w| w.name == e.name && w.to_ms.is_none())
            {
                w.to_ms = Some(e.time);
            }
        }
    }
    windows
}

/// The tests that were running when a node exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Running {
    /// These tests were running.
    During(Vec<String>),
    /// None was, but these had ended in the second before the engine
    /// stamped the exit, which it does once it has handled it, a moment
    /// after the process ended.
    JustAfter(Vec<String>),
    /// No test was running.
    Nothing,
}

/// The tests of `records` that were running when a node exited, which the
/// engine stamped `at_ms`, by name.
fn running_at(records: &[testkit_engine::report::TestRecord], at_ms: u64) -> Running {
    let names = |keep: &dyn Fn(u64, u64) -> bool| -> Vec<String> {
        let mut tests: Vec<String> = records
            .iter()
            .filter(|r| r.started_at_ms > 0)
            .filter(|r| {
                // A test that waited for the pod's lock ran from when it
                // took it.
                let from = r
                    .lock
                    .as_ref()
                    .map_or(r.started_at_ms, |l| l.acquired_at_ms.max(r.started_at_ms));
                keep(from, r.started_at_ms + r.duration_ms)
            })
            .map(|r| r.name.clone())
            .collect();
        tests.sort();
        tests.dedup();
        tests
    };
    let during = names(&|from, to| from <= at_ms && at_ms <= to);
    if !during.is_empty() {
        return Running::During(during);
    }
    let before = names(&|_, to| to < at_ms && at_ms <= to + CLOCK_SLACK_MS);
    if before.is_empty() {
        Running::Nothing
    } else {
        Running::JustAfter(before)
    }
}

/// Whether a fault of `windows` explains an exit of `node` at `at_ms`.
fn explained(windows: &[FaultWindow], node: &str, at_ms: u64) -> bool {
    windows.iter().any(|w| {
        w.node == node
            && w.from_ms <= at_ms + CLOCK_SLACK_MS
            && w.to_ms.is_none_or(|to| at_ms <= to + CLOCK_SLACK_MS)
    })
}

fn ms_of(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The exits of `exits` that no fault journaled in `results_dir` explains,
/// each with the tests running then.
fn unexplained(
    exits: Vec<NodeExit>,
    results_dir: &Path,
    entry: &str,
    up_at: SystemTime,
) -> Vec<NodeDeath> {
    if exits.is_empty() {
        return Vec::new();
    }
    let windows = fault_windows(&testkit_engine::resource::read_journal(results_dir));
    let records = testkit_engine::report::read_records(results_dir).map_err(std::sync::Arc::new);
    exits
        .into_iter()
        .filter(|exit| !explained(&windows, &exit.node, ms_of(exit.at)))
        .map(|exit| {
            let at = ms_of(exit.at);
            let tests = records
                .as_ref()
                .map(|records| running_at(records, at))
                .map_err(Clone::clone);
            NodeDeath {
                entry: exit.node == entry,
                after: exit.at.duration_since(up_at).unwrap_or_default(),
                tests,
                exit,
            }
        })
        .collect()
}

/// Ends the processes of `seen` still alive (the same pid with the same
/// start time): what a crashed pod left behind, outside its tree now.
/// SIGTERM, a grace, SIGKILL, verified. Returns how many there were, or the
/// survivors with their command lines.
pub(crate) async fn end_left_behind(seen: &[(i32, u64)]) -> Result<usize, Vec<(i32, String)>> {
    use nix::sys::signal::{kill, Signal};
    let alive = |set: &[(i32, u64)]| -> Vec<(i32, u64)> {
        set.iter()
            .copied()
            .filter(|&(p, t)| running(p, t))
            .collect()
    };
    let left = alive(seen);
    for signal in [Signal::SIGTERM, Signal::SIGKILL] {
        for &(pid, t) in &alive(&left) {
            if running(pid, t) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
        let deadline = Instant::now() + WATCHDOG_GRACE;
        while !alive(&left).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let still = alive(&left);
    if still.is_empty() {
        Ok(left.len())
    } else {
        Err(still
            .into_iter()
            .map(|(p, _)| (p, process::command_of(p)))
            .collect())
    }
}

/// `pid` runs (not a zombie) and started at `ticks`.
fn running(pid: i32, ticks: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    !matches!(f.first(), Some(&"Z") | Some(&"X"))
        && f.get(19).and_then(|t| t.parse().ok()) == Some(ticks)
}

fn last_lines(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let mut lines: Vec<String> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| testkit_engine::redact(l).into_owned())
        .collect();
    lines.reverse();
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: &str, name: &str, time: u64, fault: Option<&str>) -> JournalEntry {
        serde_json::from_value(serde_json::json!({
            "event": event, "kind": "fault", "name": name, "run": "r", "test": "t",
            "pid": 1, "time": time, "id": fault,
        }))
        .unwrap()
    }

    fn fault(node: &str, action: &str) -> String {
        format!(r#"{{"node":"{node}","action":{{"action":"{action}"}},"container":"c"}}"#)
    }

    #[test]
    fn the_tests_running_at_an_exit_are_those_whose_time_holds_it() {
        use testkit_engine::report::TestRecord;
        let test = |name: &str, started: u64| {
            let mut r = TestRecord::new("r", "b", name);
            r.started_at_ms = started;
            r.duration_ms = 1000;
            r
        };
        let records = [test("a", 1000), test("b", 2500), test("never", 0)];
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(running_at(&records, 1500), Running::During(names(&["a"])));
        assert_eq!(
            running_at(&records, 2200),
            Running::JustAfter(names(&["a"]))
        );
        assert_eq!(running_at(&records, 2600), Running::During(names(&["b"])));
        assert_eq!(running_at(&records, 9000), Running::Nothing);
    }

    #[test]
    fn a_node_exit_is_explained_only_by_a_fault_that_ends_it_while_it_is_held() {
        let stop = fault("w1", "stop");
        let pause = fault("w2", "pause");
        let journal = [
            entry("pending", "fault-01-stop-w1", 10_000, Some(&stop)),
            entry("created", "fault-01-stop-w1", 10_100, None),
            entry("verified", "fault-01-stop-w1", 20_000, None),
            entry("pending", "fault-01-pause-w2", 30_000, Some(&pause)),
            // The same name again, in another test process: still held.
            entry("pending", "fault-01-stop-w1", 40_000, Some(&stop)),
        ];
        let windows = fault_windows(&journal);
        assert!(explained(&windows, "w1", 10_050), "stopped by the fault");
        assert!(!explained(&windows, "w2", 10_050), "another node");
        assert!(!explained(&windows, "w1", 30_000), "after its undo");
        assert!(
            !explained(&windows, "w2", 30_500),
            "a pause ends no container"
        );
        assert!(explained(&windows, "w1", 50_000), "a fault not undone yet");
        assert!(!explained(&windows, "w1", 5_000), "before it");
    }

    /// A `sleep` standing in for the pod's process, in a group of its
    /// own, under a crash watch whose first look is done.
    async fn watched_stand_in(
        dir: &Path,
        machine: Option<testkit_engine::machine::MachineRecord>,
    ) -> (tokio::process::Child, PodWatch) {
        let child = tokio::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap() as i32;
        let watch = PodWatch::of(Arc::new(Watched {
            pid,
            pgid: pid,
            results_dir: dir.to_owned(),
            stderr_log: dir.join("pod.stderr.log"),
            private_dir: dir.join("private"),
            machine,
            up: Instant::now(),
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
        (child, watch)
    }

    /// Waits until `pid` is a zombie: exited, not reaped.
    async fn exited(pid: u32) {
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{pid} did not exit");
    }

    /// A pod that exits between two polls of the watch, just before the
    /// runner stops it, is seen by `settle`: its crash is the `pod`
    /// verdict, not taken for the stop's doing.
    #[tokio::test]
    async fn an_exit_since_the_last_poll_is_seen_when_the_watch_settles() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, watch) = watched_stand_in(dir.path(), None).await;
        assert!(watch.crash().is_none());
        child.start_kill().unwrap();
        exited(child.id().unwrap()).await;
        watch.settle().await;
        let crash = watch.crash().expect("the exit, seen at once");
        assert!(crash.status.contains("SIGKILL"), "{}", crash.status);
        watch.stop();
        let _ = child.wait().await;
    }

    /// A machine pod's QEMU that exits is the machine going down, named,
    /// with what its console said it did.
    #[tokio::test]
    async fn a_machine_that_goes_down_is_named_with_what_its_guest_did() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("testkit-machine-x");
        std::fs::create_dir(&run_dir).unwrap();
        std::fs::write(
            run_dir.join("console.log"),
            "[  OK  ] Reached target poweroff.target\n[   42.1] reboot: Power down\n",
        )
        .unwrap();
        let record = serde_json::json!({
            "image": "debian-12", "qemu_pid": 1, "qemu_start_ticks": null, "pgid": 1,
            "ports": { "8080": 40001 }, "run_dir": run_dir, "owner": null,
        });
        std::fs::write(run_dir.join("machine.json"), record.to_string()).unwrap();
        let record = testkit_engine::machine::MachineRecord::read(&run_dir).unwrap();
        let (mut child, watch) = watched_stand_in(dir.path(), Some(record)).await;
        child.start_kill().unwrap();
        exited(child.id().unwrap()).await;
        watch.settle().await;
        let described = watch.crash().unwrap().describe();
        for says in [
            "the pod's machine (QEMU pid 1, image debian-12, 127.0.0.1:40001 → guest 8080) \
             went down mid-run: the guest powered off; QEMU (pid 1) killed by SIGKILL",
            "its console's last lines: [  OK  ] Reached target poweroff.target | [   42.1] \
             reboot: Power down",
        ] {
            assert!(described.contains(says), "{described}");
        }
        watch.stop();
        let _ = child.wait().await;
    }

    /// A kept machine's group and run dir, told before QEMU started, are
    /// no longer ended nor removed by the watchdog; the rest still is.
    #[test]
    fn a_kept_machine_is_taken_off_the_watchdog_s_lists() {
        let mut told = Told::default();
        for line in [
            "group 100 5",
            "group 200 -",
            "scratch /tmp/p/testkit-machine-x",
            "scratch /tmp/stage",
            "keep-group 200",
            "keep-scratch /tmp/p/testkit-machine-x",
            "release",
        ] {
            told.hear(line);
        }
        assert_eq!(told.groups, [(100, Some(5))]);
        assert_eq!(told.scratch, [PathBuf::from("/tmp/stage")]);
        assert!(told.released);
    }
}
