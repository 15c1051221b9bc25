//! Container pods, the runner's side: which kind of pod a run starts
//! (`--pod process|container`), the image (an image the engine holds, or
//! one built from the suite's context dir and tagged by its content), the
//! engine's part of the residue sweep and of the janitor.
//!
//! Images are built by the runner only (they need a content hash, and test
//! processes never start pods), so their dependencies stay out of the test
//! binaries.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::verdict::Verdict;
use testkit_engine::config::{BuildSection, SuiteConfig};
use testkit_engine::containers::{
    Engine, EngineError, EngineKind, EngineObjects, Filter, PacketFilterError, RemoveError,
};
use testkit_engine::errors::error_chain;
use testkit_engine::pod::container::{ContainerSpec, OWNER_LABEL, POD_LABEL, RUN_LABEL};
use testkit_engine::settings::Settings;

/// Why the engine's part of a run, of `pod up` or of the janitor failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ContainersError {
    #[error(transparent)]
    Mode(#[from] ModeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Remove(#[from] RemoveError),
    #[error(transparent)]
    PacketFilter(#[from] PacketFilterError),
    #[error("the suite's testkit.toml has no [pod.container]")]
    NoSection,
    #[error("[pod.container] has neither `image` nor `build`: give it one")]
    NoImage,
    #[error("[pod.container] build.context: {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}", path.display())]
    LogsDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot copy the build context {} to {}", from.display(), to.display())]
    CopyContext {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot hash the build context")]
    Hash(#[source] std::io::Error),
    #[error("[pod.container] build.prepare")]
    Prepare(#[source] RunError),
    #[error("building the pod's image")]
    Build(#[source] EngineError),
}

/// Why a command of the build's `prepare` failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("cannot open {}", log.display())]
    Open {
        log: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{shown} could not start")]
    Spawn {
        shown: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{shown} failed ({status}); its output is in {}", log.display())]
    Failed {
        shown: String,
        status: std::process::ExitStatus,
        log: PathBuf,
    },
}

/// What a run (or `pod up`) starts: the suite's service as a process
/// (`[pod] command`), as a container (`[pod.container]`) or in a machine
/// (`[pod.vm]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum PodMode {
    /// `[pod] command`, a process group on this machine.
    #[default]
    Process,
    /// `[pod.container]`, a container of the local Docker Engine.
    Container,
    /// `[pod.vm]`, a QEMU machine with the service installed from its
    /// Debian package.
    Vm,
}

/// The mode `--pod` asked for, or else the suite's own: a container for a
/// pod of several nodes (which only containers can be) or for a suite whose
/// only pod is `[pod.container]` (no `[pod] command`), a process otherwise;
/// and the mode's mistakes, found with the run's other arguments.
pub(crate) fn check_mode(
    mode: Option<PodMode>,
    config: &SuiteConfig,
) -> Result<PodMode, ModeError> {
    let nodes = config
        .pod
        .container
        .as_ref()
        .is_some_and(|c| !c.nodes.is_empty());
    let mode = mode.unwrap_or(if config.pod.container_by_default() {
        PodMode::Container
    } else {
        PodMode::Process
    });
    if mode == PodMode::Process && nodes {
        return Err(ModeError::NodesAsProcess);
    }
    if mode == PodMode::Container && config.pod.container.is_none() {
        return Err(ModeError::NoContainerSection);
    }
    if mode == PodMode::Vm && config.pod.vm.is_none() {
        return Err(ModeError::NoVmSection);
    }
    if mode == PodMode::Vm && !config.pod.bootstrap.is_empty() {
        return Err(ModeError::VmBootstrap);
    }
    Ok(mode)
}

/// A `--pod` the suite's pod cannot run as.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModeError {
    #[error(
        "--pod process: the suite's pod is several nodes ([pod.container.nodes]), which run \
         only as containers: leave out --pod, or say --pod container"
    )]
    NodesAsProcess,
    #[error(
        "--pod container: the suite's testkit.toml has no [pod.container] (the image, its \
         port): add one (see {})",
        crate::checkout::book_page("book/src/pod-container.md#your-service-as-a-container")
    )]
    NoContainerSection,
    #[error(
        "--pod vm: the suite's testkit.toml has no [pod.vm] (the image, the packages, the \
         port): add one (see {})",
        crate::checkout::book_page("book/src/pod-machine.md#your-product-on-a-machine")
    )]
    NoVmSection,
    #[error(
        "--pod vm: the suite's [pod] bootstrap is not run against a machine pod yet: leave \
         out --pod vm, or do the bootstrap in the package (its postinst)"
    )]
    VmBootstrap,
    #[error(
        "--pod vm: `pod up` does not boot machines: use `testkit-runner run SUITE --pod vm \
         --keep`, which leaves the machine up after the run (`pod ls` lists it, `pod down` \
         ends it)"
    )]
    VmOutlivesRunner,
}

/// The `docker` CLI, and a daemon that answers it.
async fn engine() -> Result<Engine, EngineError> {
    let engine = Engine::on_path(EngineKind::Docker)?;
    engine.server_version().await?;
    Ok(engine)
}

/// The container spec of the suite's `[pod.container]`, its image built
/// when the suite builds it. `path` is what the build's `prepare` commands
/// get as `PATH`.
pub(crate) async fn spec(
    config: &SuiteConfig,
    suite_dir: &Path,
    logs_dir: &Path,
    run_id: Option<&str>,
    path: Option<std::ffi::OsString>,
    staging: &Path,
    groups: &(dyn Fn(i32) + Sync),
) -> Result<ContainerSpec, ContainersError> {
    let Some(section) = &config.pod.container else {
        return Err(ContainersError::NoSection);
    };
    let engine = engine().await?;
    let image = match (&section.image, &section.build) {
        (Some(image), _) => image.clone(),
        (None, Some(build)) => {
            let scratch = Scratch {
                dir: staging,
                groups,
            };
            build_image(&engine, build, config, suite_dir, logs_dir, path, scratch).await?
        }
        (None, None) => return Err(ContainersError::NoImage),
    };
    let mut spec = ContainerSpec::new(section, image, engine.program().to_owned());
    spec.run_id = run_id.map(str::to_owned);
    Ok(spec)
}

/// Where a build copies its context, and who is told of the process
/// groups its `prepare` commands run in.
#[derive(Clone, Copy)]
struct Scratch<'a> {
    dir: &'a Path,
    groups: &'a (dyn Fn(i32) + Sync),
}

/// A new path for the copy of a build context: the caller tells whoever
/// must remove it should the process die (the run's watchdog) before the
/// copy begins.
pub(crate) fn staging_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "testkit-context-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

/// Copies the context, runs its `prepare` commands in the copy, hashes
/// what they made, and builds it as `testkit-<prefix>-<dir>:<hash>` unless
/// the engine holds that tag already. Nothing secret exists yet: the
/// handle's fields are made after the image.
async fn build_image(
    engine: &Engine,
    build: &BuildSection,
    config: &SuiteConfig,
    suite_dir: &Path,
    logs_dir: &Path,
    path: Option<std::ffi::OsString>,
    scratch: Scratch<'_>,
) -> Result<String, ContainersError> {
    let Scratch {
        dir: staging,
        groups,
    } = scratch;
    let source = suite_dir.join(&build.context);
    if !source.is_dir() {
        return Err(ContainersError::NotADirectory(source));
    }
    std::fs::create_dir_all(logs_dir).map_err(|source| ContainersError::LogsDir {
        path: logs_dir.to_owned(),
        source,
    })?;
    let log_path = logs_dir.join("image.build.log");
    let built = async {
        prepare_context(build, &source, staging, path.as_deref(), &log_path, groups).await?;
        let hash = hash_dir(staging).map_err(ContainersError::Hash)?;
        let tag = image_tag(config, build, &hash);
        if engine.inspect_image(&tag).await.is_ok() {
            return Ok(tag);
        }
        // Labelled with its hash, and as testkit's.
        let labels = std::collections::BTreeMap::from([
            (OWNER_LABEL.to_owned(), "testkit".to_owned()),
            ("testkit.context".to_owned(), hash.clone()),
        ]);
        engine
            .build(
                staging,
                &staging.join(&build.dockerfile),
                &tag,
                &labels,
                &log_path,
            )
            .await
            .map_err(ContainersError::Build)?;
        Ok(tag)
    }
    .await;
    let _ = std::fs::remove_dir_all(staging);
    built
}

/// Copies the build context `source` to `staging`, and runs the build's
/// `prepare` commands in the copy.
async fn prepare_context(
    build: &BuildSection,
    source: &Path,
    staging: &Path,
    path: Option<&std::ffi::OsStr>,
    log_path: &Path,
    groups: &(dyn Fn(i32) + Sync),
) -> Result<(), ContainersError> {
    copy_dir(source, staging).map_err(|e| ContainersError::CopyContext {
        from: source.to_owned(),
        to: staging.to_owned(),
        source: e,
    })?;
    for command in &build.prepare {
        run_logged(&command[0], &command[1..], staging, path, log_path, groups)
            .await
            .map_err(ContainersError::Prepare)?;
    }
    Ok(())
}

/// `testkit-<prefix>-<dir>:<hash>`: the tag of the image of a context
/// whose content hashes to `hash`.
fn image_tag(config: &SuiteConfig, build: &BuildSection, hash: &str) -> String {
    let dir = build
        .context
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>();
    format!(
        "testkit-{}-{}:{}",
        config.suite.name_prefix,
        dir.trim_matches('-'),
        &hash[..16]
    )
}

/// Runs a command to completion in `dir`, its output appended to `log`,
/// in a process group of its own told to `groups`.
pub(crate) async fn run_logged(
    program: &str,
    args: &[String],
    dir: &Path,
    path: Option<&std::ffi::OsStr>,
    log: &Path,
    groups: &(dyn Fn(i32) + Sync),
) -> Result<(), RunError> {
    let open = |source| RunError::Open {
        log: log.to_owned(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(open)?;
    let err = file.try_clone().map_err(open)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(err)
        // A group of its own, named to `groups` (the run's watchdog): what
        // the command starts ends with a runner that dies mid-build.
        .process_group(0)
        .kill_on_drop(true);
    testkit_engine::process::default_signals(&mut cmd);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let shown = format!("`{program} {}`", args.join(" "));
    let spawn = |source| RunError::Spawn {
        shown: shown.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn)?;
    if let Some(pid) = child.id() {
        groups(pid as i32);
    }
    let status = child.wait().await.map_err(spawn)?;
    if status.success() {
        Ok(())
    } else {
        Err(RunError::Failed {
            shown,
            status,
            log: log.to_owned(),
        })
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A hash of every file's relative path, kind, executable bit and content:
/// the same context gives the same tag, whatever the copy's timestamps.
fn hash_dir(root: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.path());
            }
            files.push(entry.path());
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let meta = std::fs::symlink_metadata(&file)?;
        if meta.file_type().is_symlink() {
            hasher.update(b"l");
            hasher.update(std::fs::read_link(&file)?.to_string_lossy().as_bytes());
        } else if meta.is_dir() {
            hasher.update(b"d");
        } else {
            hasher.update(if meta.permissions().mode() & 0o111 != 0 {
                b"x"
            } else {
                b"f"
            });
            // Streamed: a context may hold a file of gigabytes.
            std::io::copy(&mut std::fs::File::open(&file)?, &mut hasher)?;
        }
        hasher.update([0]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The id of the pod started in `private_dir` (the value of its
/// `testkit.pod` label), when it is a container: the run keeps it, so that
/// the residue sweep leaves it to the down phase.
pub(crate) fn own_pod(private_dir: &Path) -> Option<String> {
    testkit_engine::pod::container::ContainerRecord::read(private_dir).map(|r| r.pod_id)
}

/// The engine's part of the residue sweep of a run whose pod is a
/// container, `own_pod` (from [`own_pod`]): every container, network and
/// volume labelled with the run but not its own pod's is a leak, named and
/// removed. `None` when the run's pod is not a container.
pub(crate) async fn residue(
    run_id: &str,
    own_pod: Option<&str>,
) -> Option<Result<Vec<String>, ContainersError>> {
    Some(sweep(run_id, Some(own_pod?)).await)
}

/// The residue verdict of the resource kinds, `of_kinds`, with the
/// engine's: a container, network or volume of the run left over is a leak
/// like any resource; an engine that cannot be listed leaves it unknown.
pub(crate) fn with_engine_residue(
    of_kinds: (Verdict, String, Vec<String>, bool),
    engine: Result<Vec<String>, ContainersError>,
    run_id: &str,
) -> (Verdict, String, Vec<String>, bool) {
    let (verdict, evidence, mut leaks, unknown) = of_kinds;
    match engine {
        Ok(found) if found.is_empty() => (
            verdict,
            format!(
                "{evidence}; the Docker Engine by label {RUN_LABEL}={run_id}: nothing but the pod"
            ),
            leaks,
            unknown,
        ),
        Ok(found) => {
            let evidence = format!(
                "{evidence}; the Docker Engine by label {RUN_LABEL}={run_id}: {} leaked: {}",
                found.len(),
                found.join("; ")
            );
            leaks.extend(found);
            (Verdict::Fail, evidence, leaks, unknown)
        }
        Err(e) => (
            Verdict::Fail,
            format!(
                "{evidence}; the Docker Engine could not be listed ({}): what the run left there is unknown",
                error_chain(&e)
            ),
            leaks,
            true,
        ),
    }
}

/// Lists the engine objects labelled `testkit.run=<run_id>` (exactly), but
/// for those of the pod `spare`, removes them and proves them gone: each
/// one `container NAME (…): removed, verified gone`.
async fn sweep(run_id: &str, spare: Option<&str>) -> Result<Vec<String>, ContainersError> {
    let engine = engine().await?;
    let own = match spare {
        Some(pod) => engine.list_by_label(POD_LABEL, pod).await?,
        None => EngineObjects::default(),
    };
    let found = engine.list_by_label(RUN_LABEL, run_id).await?.without(&own);
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let pods = pods_of_run(&engine, run_id, spare).await?;
    let left = engine
        .remove_by_label(&found, RUN_LABEL, run_id)
        .await?
        .without(&own)
        .describe();
    let mut report = Vec::new();
    for item in found.describe() {
        // Listed again by label: a name in the new listing is still there.
        let name = item.split(" (").next().unwrap_or(&item);
        let fate = if left.iter().any(|l| l.split(" (").next() == Some(name)) {
            "could not be removed"
        } else {
            "removed, verified gone"
        };
        report.push(format!("{item}: {fate}"));
    }
    // A cut whose undo never ran outlives the nodes its rules name; its
    // rules carry the pod's id, not the run's.
    for pod in pods {
        for rule in testkit_engine::pod::container::remove_pod_rules(&pod).await? {
            report.push(format!("packet-filter rule {rule}: removed, verified gone"));
        }
    }
    Ok(report)
}

/// The pods (their `testkit.pod` label) of the containers labelled with
/// the run `run_id`, but `spare`.
async fn pods_of_run(
    engine: &Engine,
    run_id: &str,
    spare: Option<&str>,
) -> Result<Vec<String>, EngineError> {
    let listed = engine
        .containers(&[Filter::label(RUN_LABEL, run_id)])
        .await?;
    let mut pods: Vec<String> = listed
        .iter()
        .filter_map(|c| c.label(POD_LABEL))
        .map(str::trim)
        .filter(|p| !p.is_empty() && Some(*p) != spare)
        .map(str::to_owned)
        .collect();
    pods.sort();
    pods.dedup();
    Ok(pods)
}

/// `janitor --run ID`: sweeps the engine and prints what it did; whether
/// all is well. Without `docker` on PATH there is nothing to sweep, which
/// is said, and fails only when the engine is all that was asked for; so
/// does a live run, when `refuse_live` (this run was asked for by name:
/// a janitor that did not do what it was asked does not succeed).
pub(crate) async fn janitor_print(
    run_id: &str,
    engine_only: bool,
    refuse_live: bool,
    settings: &Settings,
) -> bool {
    if let Err(e) = Engine::on_path(EngineKind::Docker) {
        println!("engine: not swept: {e}");
        return !engine_only;
    }
    match janitor(run_id, settings).await {
        Ok(Janitored::Live(live)) => {
            println!(
                "engine: skipped run {run_id}: it is live ({live}); the janitor leaves a live run's containers alone"
            );
            !(engine_only && refuse_live)
        }
        Ok(Janitored::Swept(found)) => {
            for item in &found {
                println!("engine: {item}");
            }
            let left = found
                .iter()
                .filter(|f| !f.ends_with("verified gone"))
                .count();
            println!(
                "engine: {} of run {run_id} found by label {RUN_LABEL}={run_id}, {} removed, {left} could not be removed",
                found.len(),
                found.len() - left
            );
            left == 0
        }
        Err(e) => {
            println!("engine: error: {}", error_chain(&e));
            false
        }
    }
}

/// `janitor --older-than AGE`: the engine objects of every run whose
/// newest container, network or volume is older than `age`, run by run as
/// [`janitor_print`] does; whether all is well.
pub(crate) async fn janitor_older_print(age: std::time::Duration, settings: &Settings) -> bool {
    let engine = match Engine::on_path(EngineKind::Docker) {
        Ok(e) => e,
        Err(e) => {
            println!("engine: not swept: {e}");
            return false;
        }
    };
    let runs = match newest_of_each_run(&engine).await {
        Ok(runs) => runs,
        Err(e) => {
            println!("engine: error: {}", error_chain(&e));
            return false;
        }
    };
    let now = std::time::SystemTime::now();
    let mut clean = true;
    let mut young = 0;
    for (run, newest) in &runs {
        if now.duration_since(*newest).unwrap_or_default() < age {
            young += 1;
            continue;
        }
        // A live run among the old ones is left alone, and that is no
        // failure: this sweep asked for no run by name.
        clean &= janitor_print(run, true, false, settings).await;
    }
    println!(
        "engine: {} run(s) with objects in the Docker Engine, {young} with one made within {}: left alone",
        runs.len(),
        humantime::format_duration(age)
    );
    clean
}

/// Each run that has containers, networks or volumes in the engine (by
/// its label), with when the newest of them was made.
async fn newest_of_each_run(
    engine: &Engine,
) -> Result<std::collections::BTreeMap<String, std::time::SystemTime>, EngineError> {
    let filter = [Filter::HasLabel(RUN_LABEL.to_owned())];
    let mut made = Vec::new();
    for c in engine.containers(&filter).await? {
        made.extend(c.label(RUN_LABEL).map(|run| (run.to_owned(), c.created.0)));
    }
    for n in engine.networks(&filter).await? {
        made.extend(
            n.labels
                .get(RUN_LABEL)
                .map(|run| (run.clone(), n.created.0)),
        );
    }
    for v in engine.volumes(&filter).await? {
        made.extend(
            v.labels
                .get(RUN_LABEL)
                .map(|run| (run.clone(), v.created.0)),
        );
    }
    let mut runs = std::collections::BTreeMap::new();
    for (run, made) in made {
        let newest = runs.entry(run).or_insert(made);
        if made > *newest {
            *newest = made;
        }
    }
    Ok(runs)
}

/// What `janitor --run ID` did of a run.
enum Janitored {
    /// Nothing: the run is live, for this reason.
    Live(String),
    /// Its objects, each with its fate.
    Swept(Vec<String>),
}

/// `janitor --run ID`: the run's containers, networks and volumes, by
/// label, removed and proven gone. Nothing of a live run is touched:
/// [`Janitored::Live`] when it is, which its objects'
/// [`MAKER_LABEL`](testkit_engine::pod::container::MAKER_LABEL) say
/// (checked against `/proc`, whatever this process's environment), or its
/// runner's claim, where this process finds it.
async fn janitor(run_id: &str, settings: &Settings) -> Result<Janitored, ContainersError> {
    let engine = engine().await?;
    let live: Vec<String> = testkit_engine::pod::container::makers(&engine, RUN_LABEL, run_id)
        .await?
        .into_iter()
        .filter(|m| testkit_engine::pod::container::maker_is_live(m))
        .collect();
    if let Some(maker) = live.first() {
        let pid = maker.split('-').next().unwrap_or(maker);
        return Ok(Janitored::Live(format!(
            "its objects were made by pid {pid}, which still runs"
        )));
    }
    if let Some(claim) = testkit_engine::run::live_runner(settings, run_id) {
        return Ok(Janitored::Live(format!(
            "testkit-runner pid {} holds it",
            claim.pid
        )));
    }
    sweep(run_id, None).await.map(Janitored::Swept)
}

/// `, container NAME of image TAG` for a container pod, else nothing: what
/// the up verdict and `pod ls` add after the pod's pid or URL.
pub(crate) fn describe(private_dir: &Path) -> String {
    match testkit_engine::pod::container::ContainerRecord::read(private_dir) {
        Some(r) if r.nodes.is_empty() => format!(", container {} of image {}", r.name, r.image),
        Some(r) => format!(
            ", nodes {} (containers {}-<node>) of image {}",
            r.nodes.join(", "),
            r.name,
            r.image
        ),
        None => String::new(),
    }
}

/// The down verdict of a container pod: its containers ended (a container
/// that ignored SIGTERM for the whole grace fails it, named), and every
/// container, network and volume of the pod removed, listed by label and
/// found gone.
pub(crate) fn stopped(
    name: &str,
    pid: u32,
    report: &testkit_engine::pod::StopReport,
) -> (Verdict, String) {
    let Some(c) = &report.containers else {
        return (Verdict::Pass, String::new());
    };
    let took = humantime::format_duration(std::time::Duration::from_millis(
        report.duration.as_millis() as u64,
    ));
    let removed = format!(
        "removed {} and listed label {POD_LABEL}={}: none left; its HOME ({}) deleted, verified gone",
        c.removed.join(", "),
        c.pod_id,
        report.removed.display()
    );
    if c.killed_after_grace.is_empty() {
        (
            Verdict::Pass,
            format!(
                "stopped pod {name} (pid {pid}): {} running container(s) ended after SIGTERM in {took}; {removed}",
                c.running.len()
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!(
                "stopped pod {name} (pid {pid}) in {took}, but container {} ignored SIGTERM for the whole grace and was killed (SIGKILL): the service does not stop when asked; {removed}",
                c.killed_after_grace.join(", ")
            ),
        )
    }
}

/// The container of `pod up --pod KIND`: none for a process pod. A pod up
/// belongs to no run: its engine objects carry the pod's label only.
pub(crate) async fn for_pod_up(
    mode: Option<PodMode>,
    config: &SuiteConfig,
    suite_dir: &Path,
    logs_dir: &Path,
) -> Result<Option<ContainerSpec>, ContainersError> {
    match check_mode(mode, config)? {
        PodMode::Process => return Ok(None),
        PodMode::Vm => return Err(ModeError::VmOutlivesRunner.into()),
        PodMode::Container => {}
    }
    // The prepare step finds the programs built with the runner, as the
    // pod's command does.
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_owned));
    let path = std::env::join_paths(
        exe_dir.into_iter().chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .collect::<Vec<_>>(),
        ),
    )
    .ok();
    // `pod up` has no watchdog: its copy goes with it only when it ends.
    spec(
        config,
        suite_dir,
        logs_dir,
        None,
        path,
        &staging_dir(),
        &|_| {},
    )
    .await
    .map(Some)
}

/// What `pod down` did to a container pod's engine objects.
pub(crate) fn down_note(report: &testkit_engine::pod::StopReport) -> Option<String> {
    let c = report.containers.as_ref()?;
    let killed = if c.killed_after_grace.is_empty() {
        String::new()
    } else {
        format!(
            "; IGNORED SIGTERM, killed after the grace: {}",
            c.killed_after_grace.join(", ")
        )
    };
    Some(format!(
        "  containers: {} running ended{killed}; removed {}; label {POD_LABEL}={} lists nothing now",
        c.running.len(),
        c.removed.join(", "),
        c.pod_id
    ))
}

/// How to reach and stop a container pod kept by `--keep`: `pod down`,
/// which removes its containers, network and volumes by label (a signal
/// to its `docker run` would leave them to the daemon).
pub(crate) fn keep_note(
    pod: &testkit_engine::pod::LaunchedPod,
    handle_file: &Path,
    run_id: &str,
) -> Option<String> {
    let record = testkit_engine::pod::container::ContainerRecord::read(&pod.private_dir)?;
    Some(format!(
        "pod {name} is still running at {url} (container {container}, pid {pid})\n\
         \x20 reach it: TESTKIT_POD_HANDLE={handle} TESTKIT_RUN_ID={run_id} cargo nextest run   (in the suite)\n\
         \x20 stop it:  testkit-runner pod down {name} && rm -rf {secrets}\n",
        name = pod.handle.name(),
        url = pod.handle.base_url(),
        container = record.name,
        pid = pod.pid,
        handle = handle_file.display(),
        secrets = handle_file.parent().unwrap_or(Path::new(".")).display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A suite whose only pod is `[pod.container]` runs it as a container
    /// when `--pod` says nothing: it used to start the default `sandboxd`
    /// as a process and wait two minutes for "/health answered 401". A
    /// suite that writes `[pod] command` keeps its process by default.
    #[test]
    fn a_suite_whose_only_pod_is_a_container_runs_it_by_default() {
        let parse = |text: &str| SuiteConfig::parse(text, Path::new("/s/testkit.toml")).unwrap();
        let container = "[pod]\nready = \"health\"\nhealth_path = \"/health\"\n\
                         [pod.container]\nimage = \"kv:1\"\nport = 2379\n";
        assert_eq!(
            check_mode(None, &parse(container)).unwrap(),
            PodMode::Container
        );
        let both = format!("{container}\n").replace(
            "[pod.container]",
            "command = [\"kv\", \"--listen\", \"{listen}\"]\n[pod.container]",
        );
        assert_eq!(check_mode(None, &parse(&both)).unwrap(), PodMode::Process);
        assert_eq!(
            check_mode(Some(PodMode::Process), &parse(container)).unwrap(),
            PodMode::Process,
            "--pod process still asks for the process"
        );
        assert_eq!(check_mode(None, &parse("")).unwrap(), PodMode::Process);
    }

    #[test]
    fn the_context_hash_follows_content_and_mode_not_timestamps() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir(a.path().join("bin")).unwrap();
        std::fs::write(a.path().join("bin/svc"), b"binary").unwrap();
        std::fs::write(a.path().join("Dockerfile"), b"FROM scratch").unwrap();
        let first = hash_dir(a.path()).unwrap();
        let b = tempfile::tempdir().unwrap();
        copy_dir(a.path(), b.path()).unwrap();
        assert_eq!(hash_dir(b.path()).unwrap(), first, "a copy hashes the same");
        std::fs::set_permissions(
            b.path().join("bin/svc"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let executable = hash_dir(b.path()).unwrap();
        assert_ne!(executable, first, "the executable bit counts");
        std::fs::write(b.path().join("bin/svc"), b"binarY").unwrap();
        assert_ne!(hash_dir(b.path()).unwrap(), executable, "content counts");
    }
}
