//! The pod phases of a run: start (building the default pod, `sandboxd`,
//! when this runner was built from a checkout that has it and it is not
//! built yet), measure health, sweep for residue, stop and verify.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use testkit_engine::config::WitnessSection;
use testkit_engine::pod::{BootObserver, HealthReport, LaunchSpec, LaunchedPod, Pod, PodHandle};
use testkit_engine::resource::{
    check_witnesses, Kinds, PodHome, SweepBounds, SweepReport, WitnessReport, WitnessSite,
};

use super::plan::Plan;
use crate::checkout::{Sources, SourcesError, VERSION};
use crate::verdict::Verdict;

/// The default pod, a package of the workspace this runner comes from.
const DEFAULT_POD: &str = "sandboxd";

/// The directory of this executable.
fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe().ok()?.parent().map(Path::to_owned)
}

/// `PATH` with the runner's own directory (and that of a `sandboxd` it
/// built) first, so that pods and tests find the programs built with it.
pub(crate) fn path_with_exe_dir() -> Option<OsString> {
    let mut dirs: Vec<PathBuf> = exe_dir().into_iter().collect();
    if let Some(built) = BUILT_DIR.get() {
        dirs.insert(0, built.clone());
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).ok()
}

static BUILT_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn on_path(program: &str) -> Option<PathBuf> {
    let dirs = exe_dir().into_iter().chain(
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .collect::<Vec<_>>(),
    );
    dirs.map(|d| d.join(program))
        .find(|p| testkit_engine::process::is_executable(p))
}

/// The checkout that holds the default pod's sources, if the runner uses a
/// checkout's (`TESTKIT_SOURCES`; unset, the one it was built from).
fn source_workspace() -> Result<Option<PathBuf>, SourcesError> {
    let sources = Sources::from_env()?;
    Ok(sources
        .checkout()
        .filter(|root| root.join(DEFAULT_POD).join("Cargo.toml").is_file())
        .map(Path::to_owned))
}

/// Makes sure the default pod is built: next to the runner or on PATH, or
/// built now with `cargo build -p sandboxd` in the runner's own workspace
/// and target dir. Returns the program to start.
async fn ensure_default_pod(
    logs_dir: &Path,
    settings: &testkit_engine::settings::Settings,
) -> Result<PathBuf, StartError> {
    // A checkout named in `TESTKIT_SOURCES` is what the default pod is
    // built from, whatever `sandboxd` is installed: a stale one on PATH
    // must not stand in for the sources asked for.
    let named =
        std::env::var_os(crate::checkout::VAR).is_some_and(|v| !v.is_empty() && v != "none");
    if !named {
        if let Some(found) = on_path(DEFAULT_POD) {
            return Ok(found);
        }
    }
    let Some(workspace) = source_workspace().map_err(StartError::Sources)? else {
        return Err(StartError::NoDefaultPod {
            runner: std::env::current_exe()
                .map(|e| e.display().to_string())
                .unwrap_or_default(),
        });
    };
    let target = super::plan::target_dir(settings).unwrap_or_else(|| workspace.join("target"));
    let release = exe_dir().is_some_and(|d| d.file_name().is_some_and(|n| n == "release"));
    let profile = if release { "release" } else { "debug" };
    let _ = std::fs::create_dir_all(logs_dir);
    let log_path = logs_dir.join("build-sandboxd.log");
    super::suite::clear_progress();
    let why = if named {
        format!("{} names a checkout", crate::checkout::VAR)
    } else {
        format!("`{DEFAULT_POD}` is not built yet")
    };
    eprintln!(
        "up: {why}: cargo build -p {DEFAULT_POD} in {} (output in {})",
        workspace.display(),
        log_path.display()
    );
    let log = std::fs::File::create(&log_path).map_err(|source| StartError::BuildLog {
        path: log_path.clone(),
        source,
    })?;
    let mut cmd =
        tokio::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["build", "-p", DEFAULT_POD, "--bins", "--target-dir"])
        .arg(&target)
        .current_dir(&workspace)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        )
        .stderr(log);
    if release {
        cmd.arg("--release");
    }
    // As for the suite's build: what `cargo run` set for the runner would
    // make this build see another environment than the outer one, and
    // rebuild ring and what stands on it for it (and it for the next).
    for var in testkit_engine::process::vars_set_by_cargo() {
        cmd.env_remove(var);
    }
    let status = cmd.status().await.map_err(StartError::Cargo)?;
    let built = target.join(profile).join(DEFAULT_POD);
    if !status.success() || !testkit_engine::process::is_executable(&built) {
        return Err(StartError::Build {
            status: super::suite::describe_status(status),
            log: log_path,
        });
    }
    if let Some(dir) = built.parent() {
        let _ = BUILT_DIR.set(dir.to_owned());
    }
    Ok(built)
}

/// Why the pod of a run did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error(
        "`{DEFAULT_POD}` (the default pod) is neither next to {runner} nor on PATH, and no \
         testkit checkout holds its sources: install it (`cargo install {DEFAULT_POD} --version \
         {VERSION}`), name a checkout with TESTKIT_SOURCES, or set `[pod] command` in \
         testkit.toml"
    )]
    NoDefaultPod { runner: String },
    #[error("{0}")]
    Sources(SourcesError),
    #[error("cannot create {}", path.display())]
    BuildLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to start cargo to build `{DEFAULT_POD}`")]
    Cargo(#[source] std::io::Error),
    #[error("building `{DEFAULT_POD}` failed ({status}); output in {}", log.display())]
    Build { status: String, log: PathBuf },
    /// The container's spec (its image, its engine) could not be made.
    #[error(transparent)]
    Container(crate::containers::ContainersError),
    /// The machine's packages or image could not be made ready.
    #[error(transparent)]
    Machine(crate::machines::MachinesError),
    #[error(transparent)]
    Launch(#[from] testkit_engine::pod::LaunchError),
}

impl StartError {
    /// A machine pod's launch that failed: what ending its machine left
    /// (`Err`), or `Ok` when the launch ended what it had made. `None`
    /// when no launch began (the image, the packages, a process pod).
    pub(crate) fn machine_teardown(&self) -> Option<Result<(), String>> {
        match self {
            StartError::Launch(e) => Some(e.machine_left().map_or(Ok(()), Err)),
            _ => None,
        }
    }
}

/// Starts the suite's pod and waits until it is up.
pub(crate) async fn start(
    plan: &Plan,
    logs_dir: &Path,
    observer: BootObserver,
) -> Result<LaunchedPod, StartError> {
    let (config, suite_dir) = (&plan.config, plan.suite_dir.as_path());
    let (mode, run_id) = (plan.pod_mode, plan.run_id.as_str());
    let mut spec = LaunchSpec::from_config(config, Some(suite_dir), logs_dir.to_owned());
    spec.observer = Some(observer);
    spec.target_dir = plan.settings.target_dir.clone();
    if spec.command[0] == DEFAULT_POD {
        spec.command[0] = ensure_default_pod(logs_dir, &plan.settings)
            .await?
            .display()
            .to_string();
    }
    if let Some(path) = path_with_exe_dir() {
        spec.env
            .insert("PATH".to_owned(), path.to_string_lossy().into_owned());
    }
    if mode == crate::containers::PodMode::Container {
        // The build's copy of its context is the watchdog's to remove
        // before it exists: a runner killed mid-build leaves none.
        let staging = crate::containers::staging_dir();
        super::watch::tell_scratch(&staging);
        let container = crate::containers::spec(
            config,
            suite_dir,
            logs_dir,
            Some(run_id),
            path_with_exe_dir(),
            &staging,
            &super::watch::also_end,
        )
        .await
        .map_err(StartError::Container)?;
        spec.container = Some(container);
    }
    if mode == crate::containers::PodMode::Vm {
        let say = |line: &str| {
            super::suite::clear_progress();
            eprintln!("{line}");
        };
        let choice = plan
            .machine
            .as_ref()
            .expect("a machine pod's run has its environment and installer");
        let machine = crate::machines::spec(
            config,
            choice,
            run_id,
            suite_dir,
            logs_dir,
            path_with_exe_dir(),
            &plan.settings,
            &super::watch::also_end,
            &say,
        )
        .await
        .map_err(StartError::Machine)?;
        spec.machine = Some(machine);
    }
    Ok(testkit_engine::pod::launch(&spec).await?)
}

/// One measured health check, retried briefly: a caller's pod may be
/// momentarily busy.
pub(crate) async fn measure_health(handle: &PodHandle, path: &str) -> HealthReport {
    let mut report =
        testkit_engine::pod::check_health(handle.base_url(), path, Duration::from_secs(5)).await;
    for _ in 0..4 {
        if report.ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        report = testkit_engine::pod::check_health(handle.base_url(), path, Duration::from_secs(5))
            .await;
    }
    report
}

/// What the residue sweep goes after, and within which bounds.
pub(crate) struct ResidueSpec<'a> {
    pub(crate) kinds: &'a Kinds,
    pub(crate) prefix: &'a str,
    pub(crate) run_id: &'a str,
    /// The results folder, whose journal names what the tests created.
    pub(crate) results_dir: &'a Path,
    /// A test binary that sweeps the Rust kinds, with its environment.
    pub(crate) sweeper: Option<(&'a Path, Vec<(String, std::ffi::OsString)>)>,
    pub(crate) bounds: SweepBounds<'a>,
    /// The run's own container pod, which the sweep leaves to the down
    /// phase: `None` when the pod is not a container the run started.
    pub(crate) own_pod: Option<&'a str>,
}

/// The witnesses of the suite, and what they may need: the pod's HOME,
/// the handle's public fields, a directory and an environment to run in.
pub(crate) struct WitnessSpec<'a> {
    pub(crate) witnesses: &'a std::collections::BTreeMap<String, WitnessSection>,
    pub(crate) home: PodHome<'a>,
    pub(crate) public_fields: &'a [String],
    pub(crate) suite_dir: &'a Path,
    pub(crate) env: Vec<(String, OsString)>,
}

/// Deletes by exact name what the journal says may still exist (a lagging
/// listing cannot hide it), then lists every kind by `<prefix>-<run id>-`:
/// anything found is a leak, named, deleted and verified gone, concurrently
/// and within the bounds. Then asks every witness what carries the run id
/// below the API, once the sweep's deletes are done, and then the Docker
/// Engine. Returns the verdict, its evidence, the leaks (`kind name: what
/// became of it`), and whether what is left is unknown (a listing or a
/// witness failed).
pub(crate) async fn residue(
    pod: &Pod,
    spec: ResidueSpec<'_>,
    witnesses: WitnessSpec<'_>,
) -> (Verdict, String, Vec<String>, bool) {
    let run_id = spec.run_id.to_owned();
    let (kinds, prefix, own_pod) = (spec.kinds, spec.prefix, spec.own_pod);
    let of_kinds = residue_of_kinds(pod, spec).await;
    let site = WitnessSite::new(pod, prefix, &run_id)
        .home(witnesses.home)
        .public_fields(witnesses.public_fields)
        .namings_of(kinds)
        .env(witnesses.env)
        .dir(witnesses.suite_dir);
    let reports = check_witnesses(witnesses.witnesses, &site).await;
    let of_kinds = with_witness_residue(of_kinds, &reports);
    let of_kinds = crate::machines::with_machine_residue(of_kinds, &run_id).await;
    match crate::containers::residue(&run_id, own_pod).await {
        None => of_kinds,
        Some(engine) => crate::containers::with_engine_residue(of_kinds, engine, &run_id),
    }
}

/// The residue verdict of the resource kinds, `of_kinds`, with what the
/// witnesses saw: a name of the run below the API is a leak nothing can
/// delete; a witness that could not look leaves the residue unknown.
fn with_witness_residue(
    of_kinds: (Verdict, String, Vec<String>, bool),
    reports: &[WitnessReport],
) -> (Verdict, String, Vec<String>, bool) {
    let (mut verdict, mut evidence, mut leaks, mut unknown) = of_kinds;
    for report in reports {
        evidence.push_str("; ");
        evidence.push_str(&report.summary());
        for name in report.residue() {
            leaks.push(format!(
                "{}: {name} (still there below the API: a witness only looks, it deletes nothing)",
                report.label()
            ));
            verdict = Verdict::Fail;
        }
        if report.failed() {
            verdict = Verdict::Fail;
            unknown = true;
        }
    }
    (verdict, evidence, leaks, unknown)
}

async fn residue_of_kinds(
    pod: &Pod,
    spec: ResidueSpec<'_>,
) -> (Verdict, String, Vec<String>, bool) {
    let ResidueSpec {
        kinds,
        prefix,
        run_id,
        results_dir,
        sweeper,
        bounds,
        own_pod: _,
    } = spec;
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    if names.is_empty() {
        return (
            Verdict::Pass,
            "no resource kinds declared in testkit.toml: nothing to list".to_owned(),
            Vec::new(),
            false,
        );
    }
    // Rust kinds first: the runner links no suite code, a test binary sweeps
    // them. They are often what lives inside a templated kind (records in a
    // collection): swept after it, they would vanish with it unreported.
    let mut report = sweep_rust_kinds(kinds, sweeper.as_ref()).await;
    // Then the journal's exact names and the listing of every other kind,
    // bounded.
    report.merge(
        testkit_engine::resource::sweep_run(pod, kinds, prefix, run_id, Some(results_dir), bounds)
            .await,
    );
    let leaks = leaks_of(&report);
    let listed = what_was_swept(&report, &names, run_id);
    if report.found.is_empty() && report.is_clean() {
        return (
            Verdict::Pass,
            format!("{listed}: nothing left"),
            leaks,
            false,
        );
    }
    // A listing that failed leaves the residue unknown. A sweep its deadline
    // cut short is the caller's bound: it fails, naming what it did not do.
    let unknown = !report.errors.is_empty() && report.cut_short.is_none();
    let mut parts = Vec::new();
    if !leaks.is_empty() {
        parts.push(format!("{} leaked: {}", leaks.len(), leaks.join("; ")));
    }
    parts.extend(report.errors.iter().cloned());
    if unknown {
        parts.push("what is left on the pod is unknown".to_owned());
    }
    (
        Verdict::Fail,
        format!("{listed}: {}", parts.join("; ")),
        leaks,
        unknown,
    )
}

/// Sweeps the kinds that are Rust code in the suite's test binary
/// `sweeper`, or says why they could not be.
async fn sweep_rust_kinds(
    kinds: &Kinds,
    sweeper: Option<&(&Path, Vec<(String, OsString)>)>,
) -> SweepReport {
    let delegated: Vec<String> = kinds
        .iter()
        .filter(|k| k.is_elsewhere())
        .map(|k| k.name().to_owned())
        .collect();
    let mut report = SweepReport::default();
    if !delegated.is_empty() {
        match sweeper {
            Some((binary, env)) => {
                report.merge(
                    testkit_engine::resource::sweep_in_binary(binary, env, &delegated).await,
                );
            }
            None => report.errors.push(format!(
                "kinds {} are Rust code, swept by a test binary of the suite, and this run \
                 knows none (run the suite with the nextest engine from its sources)",
                delegated.join(", ")
            )),
        }
    }
    report
}

/// Each resource the sweep found, `kind name: what became of it`.
fn leaks_of(report: &SweepReport) -> Vec<String> {
    let mut leaks = Vec::new();
    for item in &report.found {
        let fate = if report.deleted.contains(item) {
            "deleted, verified gone".to_owned()
        } else if let Some((_, why)) = report.leaked.iter().find(|(l, _)| l == item) {
            format!("could not be deleted: {why}")
        } else {
            "not deleted".to_owned()
        };
        leaks.push(format!("{} `{}`: {fate}", item.kind, item.name));
    }
    leaks
}

/// What the sweep went through, and whether its deadline cut it short.
fn what_was_swept(report: &SweepReport, names: &[&str], run_id: &str) -> String {
    match &report.cut_short {
        Some(why) => format!(
            "cut short ({why}) with {} not done; the journal's names and the listing of {} by the run id `{run_id}`",
            report.leaked.len(),
            names.join(", ")
        ),
        None => format!(
            "the journal's names and the listing of {} by the run id `{run_id}`",
            names.join(", ")
        ),
    }
}

/// Stops a pod the runner started, giving it `grace` (`[pod] stop_grace`)
/// to stop when asked, and verifies its processes and HOME gone.
pub(crate) async fn stop(pod: LaunchedPod, grace: Duration) -> (Verdict, String) {
    let name = pod.handle.name().to_owned();
    let pid = pod.pid;
    match pod.stop(grace).await {
        Ok(r) if r.containers.is_some() => crate::containers::stopped(&name, pid, &r),
        Ok(r) if r.machine.is_some() => crate::machines::stopped(&name, pid, &r),
        Ok(r) => {
            let how = if r.drained_after_term {
                "after SIGTERM".to_owned()
            } else {
                format!("{} needed SIGKILL", r.killed.len())
            };
            (
                Verdict::Pass,
                format!(
                    "stopped pod {name} (pid {pid}): {} processes ended {how} in {}; its HOME ({}) deleted, verified gone",
                    r.processes,
                    humantime::format_duration(Duration::from_millis(r.duration.as_millis() as u64)),
                    r.removed.display()
                ),
            )
        }
        Err(e) => (
            Verdict::Fail,
            format!("stopping pod {name} (pid {pid}) failed: {e}"),
        ),
    }
}

/// How to reach and stop a pod kept by `--keep`; `machine`, the record of
/// a machine pod's machine, kept.
pub(crate) fn keep_note(
    pod: &LaunchedPod,
    machine: Option<&testkit_engine::machine::MachineRecord>,
    handle_file: &Path,
    run_id: &str,
) -> String {
    if let Some(record) = machine {
        return crate::machines::keep_note(pod, record, handle_file, run_id);
    }
    if let Some(note) = crate::containers::keep_note(pod, handle_file, run_id) {
        return note;
    }
    format!(
        "pod {name} is still running at {url} (pid {pid}, process group {pgid})\n\
         \x20 reach it: TESTKIT_POD_HANDLE={handle} TESTKIT_RUN_ID={run_id} cargo nextest run   (in the suite)\n\
         \x20 stop it:  kill -TERM -- -{pgid} && rm -rf {private} {secrets}\n",
        name = pod.handle.name(),
        url = pod.handle.base_url(),
        pid = pod.pid,
        pgid = pod.pgid,
        handle = handle_file.display(),
        secrets = handle_file.parent().unwrap_or(Path::new(".")).display(),
        private = pod.private_dir.display(),
    )
}
