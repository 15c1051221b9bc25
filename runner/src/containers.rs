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
use testkit_engine::pod::container::{
    ContainerSpec, Docker, EngineObjects, OWNER_LABEL, POD_LABEL, RUN_LABEL,
};

/// What a run (or `pod up`) starts: the suite's service as a process
/// (`[pod] command`) or as a container (`[pod.container]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum PodMode {
    /// `[pod] command`, a process group on this machine.
    #[default]
    Process,
    /// `[pod.container]`, a container of the local Docker Engine.
    Container,
}

/// The pod of a run that is a container: its id (the value of
/// `testkit.pod`), so that the residue sweep leaves it to the down phase.
static OWN_POD: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// The mode `--pod` asked for, or else the suite's own: a container for a
/// pod of several nodes (which only containers can be), a process
/// otherwise; and the mode's mistakes, found with the run's other arguments.
pub(crate) fn check_mode(mode: Option<PodMode>, config: &SuiteConfig) -> Result<PodMode, String> {
    let nodes = config
        .pod
        .container
        .as_ref()
        .is_some_and(|c| !c.nodes.is_empty());
    let mode = mode.unwrap_or(if nodes {
        PodMode::Container
    } else {
        PodMode::Process
    });
    if mode == PodMode::Process && nodes {
        return Err(
            "--pod process: the suite's pod is several nodes ([pod.container.nodes]), which run \
             only as containers: leave out --pod, or say --pod container"
                .to_owned(),
        );
    }
    if mode == PodMode::Container && config.pod.container.is_none() {
        return Err(
            "--pod container: the suite's testkit.toml has no [pod.container] (the image, \
             its port): add one (see TESTING.md, \"Your service as a container\")"
                .to_owned(),
        );
    }
    Ok(mode)
}

/// The `docker` CLI, and a daemon that answers it.
async fn engine() -> Result<Docker, String> {
    let docker = Docker::on_path()?;
    docker
        .run(&["version", "--format", "{{.Server.Version}}"])
        .await
        .map_err(|e| format!("the Docker Engine does not answer: {e}"))?;
    Ok(docker)
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
) -> Result<ContainerSpec, String> {
    let Some(section) = &config.pod.container else {
        return Err("the suite's testkit.toml has no [pod.container]".to_owned());
    };
    let docker = engine().await?;
    let image = match (&section.image, &section.build) {
        (Some(image), _) => image.clone(),
        (None, Some(build)) => {
            build_image(&docker, build, config, suite_dir, logs_dir, path).await?
        }
        (None, None) => {
            return Err("[pod.container] has neither `image` nor `build`: give it one".to_owned())
        }
    };
    let mut spec = ContainerSpec::new(section, image, docker.0.clone());
    spec.run_id = run_id.map(str::to_owned);
    Ok(spec)
}

/// Copies the context, runs its `prepare` commands in the copy, hashes
/// what they made, and builds it as `testkit-<prefix>-<dir>:<hash>` unless
/// the engine holds that tag already. Nothing secret exists yet: the
/// handle's fields are made after the image.
async fn build_image(
    docker: &Docker,
    build: &BuildSection,
    config: &SuiteConfig,
    suite_dir: &Path,
    logs_dir: &Path,
    path: Option<std::ffi::OsString>,
) -> Result<String, String> {
    let source = suite_dir.join(&build.context);
    if !source.is_dir() {
        return Err(format!(
            "[pod.container] build.context: {} is not a directory",
            source.display()
        ));
    }
    std::fs::create_dir_all(logs_dir).map_err(|e| format!("{}: {e}", logs_dir.display()))?;
    let log_path = logs_dir.join("image.build.log");
    let staging = std::env::temp_dir().join(format!(
        "testkit-context-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let built = async {
        prepare_context(build, &source, &staging, path.as_deref(), &log_path).await?;
        let hash = hash_dir(&staging).map_err(|e| format!("cannot hash the build context: {e}"))?;
        let tag = image_tag(config, build, &hash);
        if docker.run(&["image", "inspect", &tag]).await.is_ok() {
            return Ok(tag);
        }
        let image = ImageBuild {
            dockerfile: staging.join(&build.dockerfile),
            context: &staging,
            tag: &tag,
            hash: &hash,
        };
        image.run(docker, &log_path).await?;
        Ok(tag)
    }
    .await;
    let _ = std::fs::remove_dir_all(&staging);
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
) -> Result<(), String> {
    copy_dir(source, staging).map_err(|e| {
        format!(
            "cannot copy the build context {} to {}: {e}",
            source.display(),
            staging.display()
        )
    })?;
    for command in &build.prepare {
        run_logged(&command[0], &command[1..], staging, path, log_path)
            .await
            .map_err(|e| format!("[pod.container] build.prepare: {e}"))?;
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

/// A `docker build` of a prepared context, labelled with its hash.
struct ImageBuild<'a> {
    dockerfile: PathBuf,
    context: &'a Path,
    tag: &'a str,
    hash: &'a str,
}

impl ImageBuild<'_> {
    async fn run(&self, docker: &Docker, log_path: &Path) -> Result<(), String> {
        let program = docker.0.display().to_string();
        let args: Vec<String> = vec![
            "build".into(),
            "--quiet".into(),
            "--label".into(),
            format!("{OWNER_LABEL}=testkit"),
            "--label".into(),
            format!("testkit.context={}", self.hash),
            "--tag".into(),
            self.tag.to_owned(),
            "--file".into(),
            self.dockerfile.display().to_string(),
            self.context.display().to_string(),
        ];
        run_logged(&program, &args, self.context, None, log_path)
            .await
            .map_err(|e| format!("building the pod's image: {e}"))
    }
}

/// Runs a command to completion, its output appended to `log`.
async fn run_logged(
    program: &str,
    args: &[String],
    dir: &Path,
    path: Option<&std::ffi::OsStr>,
    log: &Path,
) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let err = file
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(err)
        .kill_on_drop(true);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let shown = format!("`{program} {}`", args.join(" "));
    let status = cmd
        .status()
        .await
        .map_err(|e| format!("{shown} could not start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown} failed ({status}); its output is in {}",
            log.display()
        ))
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
            hasher.update(std::fs::read(&file)?);
        }
        hasher.update([0]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The run's own container pod, which the residue sweep leaves to the down
/// phase.
pub(crate) fn set_own_pod(private_dir: &Path) {
    if let Some(record) = testkit_engine::pod::container::ContainerRecord::read(private_dir) {
        *OWN_POD.lock().unwrap_or_else(|e| e.into_inner()) = Some(record.pod_id);
    }
}

/// The engine's part of the residue sweep of a run whose pod is a
/// container: every container, network and volume labelled with the run
/// but not its own pod's is a leak, named and removed. `None` when the
/// run's pod is not a container.
pub(crate) async fn residue(run_id: &str) -> Option<Result<Vec<String>, String>> {
    let own = OWN_POD.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    Some(sweep(run_id, Some(&own)).await)
}

/// The residue verdict of the resource kinds, `of_kinds`, with the
/// engine's: a container, network or volume of the run left over is a leak
/// like any resource; an engine that cannot be listed leaves it unknown.
pub(crate) fn with_engine_residue(
    of_kinds: (Verdict, String, Vec<String>, bool),
    engine: Result<Vec<String>, String>,
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
                "{evidence}; the Docker Engine could not be listed ({e}): what the run left there is unknown"
            ),
            leaks,
            true,
        ),
    }
}

/// Lists the engine objects labelled `testkit.run=<run_id>` (exactly), but
/// for those of the pod `spare`, removes them and proves them gone: each
/// one `container NAME (…): removed, verified gone`.
async fn sweep(run_id: &str, spare: Option<&str>) -> Result<Vec<String>, String> {
    let docker = engine().await?;
    let own = match spare {
        Some(pod) => docker.list(POD_LABEL, pod).await?,
        None => EngineObjects::default(),
    };
    let found = docker.list(RUN_LABEL, run_id).await?.without(&own);
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let pods = pods_of_run(&docker, run_id, spare).await?;
    let left = docker
        .remove(&found, RUN_LABEL, run_id)
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
        for rule in testkit_engine::pod::fault::remove_pod_rules(&pod).await? {
            report.push(format!("packet-filter rule {rule}: removed, verified gone"));
        }
    }
    Ok(report)
}

/// The pods (their `testkit.pod` label) of the containers labelled with
/// the run `run_id`, but `spare`.
async fn pods_of_run(
    docker: &Docker,
    run_id: &str,
    spare: Option<&str>,
) -> Result<Vec<String>, String> {
    let filter = format!("label={RUN_LABEL}={run_id}");
    let format = format!("{{{{.Label \"{POD_LABEL}\"}}}}");
    let listed = docker
        .run(&["ps", "--all", "--filter", &filter, "--format", &format])
        .await?;
    let mut pods: Vec<String> = listed
        .lines()
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
pub(crate) async fn janitor_print(run_id: &str, engine_only: bool, refuse_live: bool) -> bool {
    if let Err(e) = Docker::on_path() {
        println!("engine: not swept: {e}");
        return !engine_only;
    }
    match janitor(run_id).await {
        Ok(Err(live)) => {
            println!(
                "engine: skipped run {run_id}: it is live ({live}); the janitor leaves a live run's containers alone"
            );
            !(engine_only && refuse_live)
        }
        Ok(Ok(found)) => {
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
            println!("engine: error: {e}");
            false
        }
    }
}

/// `janitor --older-than AGE`: the engine objects of every run whose
/// newest container, network or volume is older than `age`, run by run as
/// [`janitor_print`] does; whether all is well.
pub(crate) async fn janitor_older_print(age: std::time::Duration) -> bool {
    let docker = match Docker::on_path() {
        Ok(d) => d,
        Err(e) => {
            println!("engine: not swept: {e}");
            return false;
        }
    };
    let runs = match newest_of_each_run(&docker).await {
        Ok(runs) => runs,
        Err(e) => {
            println!("engine: error: {e}");
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
        clean &= janitor_print(run, true, false).await;
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
    docker: &Docker,
) -> Result<std::collections::BTreeMap<String, std::time::SystemTime>, String> {
    let filter = format!("label={RUN_LABEL}");
    let mut lines = Vec::new();
    let ids = docker.run(&["ps", "-a", "-q", "--filter", &filter]).await?;
    let label = format!("{{{{index .Config.Labels \"{RUN_LABEL}\"}}}} {{{{.Created}}}}");
    if !ids.is_empty() {
        let mut args = vec!["inspect", "--format", &label];
        args.extend(ids.split_whitespace());
        lines.extend(docker.run(&args).await?.lines().map(str::to_owned));
    }
    let networks = docker
        .run(&[
            "network",
            "ls",
            "--filter",
            &filter,
            "--format",
            &format!("{{{{.Label \"{RUN_LABEL}\"}}}} {{{{.CreatedAt}}}}"),
        ])
        .await?;
    lines.extend(networks.lines().map(str::to_owned));
    let volumes = docker
        .run(&["volume", "ls", "-q", "--filter", &filter])
        .await?;
    let volume_label = format!("{{{{index .Labels \"{RUN_LABEL}\"}}}} {{{{.CreatedAt}}}}");
    if !volumes.is_empty() {
        let mut args = vec!["volume", "inspect", "--format", &volume_label];
        args.extend(volumes.split_whitespace());
        lines.extend(docker.run(&args).await?.lines().map(str::to_owned));
    }
    let mut runs = std::collections::BTreeMap::new();
    for line in lines {
        let Some((run, created)) = line.split_once(' ') else {
            continue;
        };
        // Containers say `2026-12-01T23:45:55.58Z`, networks `2026-12-01
        // 23:45:55.58 +0000 UTC`, volumes `2026-12-01T23:45:55Z`: UTC to
        // the second, all of them.
        let second: String = created
            .chars()
            .take(19)
            .collect::<String>()
            .replace(' ', "T");
        let made = humantime::parse_rfc3339(&format!("{second}Z")).map_err(|e| {
            format!("the engine says run {run}'s object was made at {created:?}, which does not parse: {e}")
        })?;
        let newest = runs.entry(run.to_owned()).or_insert(made);
        if made > *newest {
            *newest = made;
        }
    }
    Ok(runs)
}

/// `janitor --run ID`: the run's containers, networks and volumes, by
/// label, removed and proven gone. Nothing of a live run is touched:
/// `Err(why)` when it is live, which its objects'
/// [`MAKER_LABEL`](testkit_engine::pod::container::MAKER_LABEL) say
/// (checked against `/proc`, whatever this process's environment), or its
/// runner's claim, where this process finds it.
async fn janitor(run_id: &str) -> Result<Result<Vec<String>, String>, String> {
    let docker = engine().await?;
    let live: Vec<String> = docker
        .makers(RUN_LABEL, run_id)
        .await?
        .into_iter()
        .filter(|m| testkit_engine::pod::container::maker_is_live(m))
        .collect();
    if let Some(maker) = live.first() {
        let pid = maker.split('-').next().unwrap_or(maker);
        return Ok(Err(format!(
            "its objects were made by pid {pid}, which still runs"
        )));
    }
    if let Some(claim) = testkit_engine::run::live_runner(crate::verbs::settings(), run_id) {
        return Ok(Err(format!("testkit-runner pid {} holds it", claim.pid)));
    }
    sweep(run_id, None).await.map(Ok)
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
) -> Result<Option<ContainerSpec>, String> {
    if check_mode(mode, config)? == PodMode::Process {
        return Ok(None);
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
    spec(config, suite_dir, logs_dir, None, path)
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
