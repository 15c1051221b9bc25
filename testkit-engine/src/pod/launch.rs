//! Pods that testkit starts itself: boot with a fresh HOME on a free loopback
//! port in a scrubbed environment, wait for the handle and a healthy answer
//! (inactivity timeout reset by every line the pod prints, under a hard
//! ceiling), and stop verifiably.
//!
//! Each pod gets a private directory `testkit-pod-<random id>/` (mode 0700)
//! holding `home/` (the pod's HOME) and `stdout.raw` (what the pod prints on
//! stdout, which includes its token). The raw stdout never goes to the
//! results folder: a redacted copy does, when the pod stops or fails to boot.
//! stderr goes straight to the log folder, and is redacted in place then too.
//! Because the pod writes to files rather than pipes, a pod outlives the
//! process that launched it without losing its output (`testkit-runner pod up`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::check::{check_health, HealthReport};
use super::container::{self, ContainerRecord, ContainerSpec, ContainerStop};
use super::handle::{HandleError, HandlePolicy, PodHandle};
use crate::config::{Ready, SuiteConfig};
use crate::process;

/// Environment variables a pod inherits from its launcher; everything else
/// (credentials, cloud config, the caller's HOME) stays out.
const INHERITED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ", "RUST_BACKTRACE", "RUST_LOG"];

/// How to start a pod.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LaunchSpec {
    /// Program and arguments; see [`crate::config::PodSection::command`].
    pub command: Vec<String>,
    /// When the pod counts as up.
    pub ready: Ready,
    /// The pod's unauthenticated health path.
    pub health_path: String,
    /// How long the pod may stay silent while booting.
    pub inactivity_timeout: Duration,
    /// The longest boot, progress or not.
    pub ceiling: Duration,
    /// What the printed handle may point at.
    pub policy: HandlePolicy,
    /// Where `pod.stdout.log` and `pod.stderr.log` go.
    pub logs_dir: PathBuf,
    /// Where the pod's private directory is created (default: the temp dir).
    pub private_parent: Option<PathBuf>,
    /// Where a relative program is looked up (the suite dir).
    pub base_dir: Option<PathBuf>,
    /// Extra environment for the pod.
    pub env: BTreeMap<String, String>,
    /// The handle's fields, for a pod that prints no handle (`[pod] fields`).
    pub fields: BTreeMap<String, String>,
    /// Commands to run before the pod (`[pod] setup`).
    pub setup: Vec<Vec<String>>,
    /// Commands to run once the pod is up (`[pod] bootstrap`).
    pub bootstrap: Vec<Vec<String>>,
    /// Environment templates of the pod and its setup (`[pod] env`).
    pub env_templates: BTreeMap<String, String>,
    /// Names of more free ports to reserve (`[pod] ports`).
    pub ports: Vec<String>,
    /// The target dir to look for the program in after the current
    /// executable's (`CARGO_TARGET_DIR` of the caller).
    pub target_dir: Option<PathBuf>,
    /// Run the pod as this container rather than `command` (`[pod.container]`).
    pub container: Option<ContainerSpec>,
    /// Told of each thing the boot makes that would outlive a launcher
    /// killed mid-boot, as it is made.
    pub observer: Option<BootObserver>,
}

/// Something a boot made that must not outlive it: the pod's private
/// directory, the group of a `[pod] setup` command, the pod's own group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BootStep {
    /// The private directory (HOME, raw stdout) was created.
    PrivateDir(PathBuf),
    /// A setup command was started in a process group of its own.
    Setup {
        /// Its group.
        pgid: i32,
        /// Its start time, against pid reuse.
        start_ticks: Option<u64>,
    },
    /// A `[pod] bootstrap` command was started, in a process group of its
    /// own, against the running pod.
    Bootstrap {
        /// Its group.
        pgid: i32,
        /// Its start time, against pid reuse.
        start_ticks: Option<u64>,
    },
    /// The pod was started in a process group of its own.
    Pod {
        /// Its group (the pod's pid).
        pgid: i32,
        /// Its start time, against pid reuse.
        start_ticks: Option<u64>,
    },
}

/// What a launcher is told of a boot as it goes (see [`BootStep`]): a
/// runner that can be SIGKILLed mid-boot hands each step to its watchdog,
/// so that nothing the boot made outlives it.
#[derive(Clone)]
pub struct BootObserver(Arc<dyn Fn(BootStep) + Send + Sync>);

impl BootObserver {
    /// An observer that calls `tell` with each step.
    pub fn new(tell: impl Fn(BootStep) + Send + Sync + 'static) -> BootObserver {
        BootObserver(Arc::new(tell))
    }

    fn tell(observer: Option<&BootObserver>, step: BootStep) {
        if let Some(o) = observer {
            (o.0)(step);
        }
    }
}

impl std::fmt::Debug for BootObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BootObserver")
    }
}

impl LaunchSpec {
    /// The spec of a suite's `[pod]` config, logging to `logs_dir`.
    pub fn from_config(
        config: &SuiteConfig,
        suite_dir: Option<&Path>,
        logs_dir: PathBuf,
    ) -> LaunchSpec {
        let pod = &config.pod;
        LaunchSpec {
            command: pod.command.clone(),
            ready: pod.ready,
            health_path: pod.health_path.clone(),
            inactivity_timeout: pod.inactivity_timeout,
            ceiling: pod.ceiling,
            policy: HandlePolicy::from_suite(config),
            logs_dir,
            private_parent: None,
            base_dir: suite_dir.map(Path::to_owned),
            env: BTreeMap::new(),
            fields: pod.fields.clone(),
            setup: pod.setup.clone(),
            bootstrap: pod.bootstrap.clone(),
            env_templates: pod.env.clone(),
            ports: pod.ports.clone(),
            target_dir: None,
            container: None,
            observer: None,
        }
    }
}

/// Why a pod did not come up. Its logs are kept; the message says where,
/// and what the pod last printed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The program is not on PATH nor next to the test binaries.
    #[error("pod program `{program}` not found next to the current executable, in the target dir, or on PATH: {hint}")]
    ProgramNotFound {
        /// The program.
        program: String,
        /// How to fix it.
        hint: String,
    },
    /// Setting up (directories, port, spawn) failed.
    #[error("failed to {what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        cause: std::io::Error,
    },
    /// The pod exited before it was up.
    #[error("the pod exited early ({status}) before it was up; last seen: {last_seen}; logs kept in {}", logs.display())]
    ExitedEarly {
        /// Its exit status.
        status: String,
        /// The last line it printed.
        last_seen: String,
        /// The logs folder.
        logs: PathBuf,
    },
    /// It was silent too long, or booted too long.
    #[error("the pod was not up after {waited:?} ({which}); last seen: {last_seen}; logs kept in {}", logs.display())]
    Timeout {
        /// `no progress for 20s` or `hard ceiling 2m`.
        which: String,
        /// How long it was given.
        waited: Duration,
        /// The last thing seen (a line, a health answer).
        last_seen: String,
        /// The logs folder.
        logs: PathBuf,
    },
    /// A `[pod] setup` or `[pod] bootstrap` command failed.
    #[error("the pod's {step} command `{command}` failed ({status}); last seen: {last_seen}; logs kept in {}", logs.display())]
    Setup {
        /// `setup` or `bootstrap`.
        step: &'static str,
        /// The command, redacted.
        command: String,
        /// How it ended.
        status: String,
        /// What it printed last, redacted.
        last_seen: String,
        /// The logs folder.
        logs: PathBuf,
    },
    /// The container engine refused part of a container pod's start.
    #[error("the container pod could not start: {0}")]
    Container(String),
    /// A `{placeholder}` of `[pod]` that nothing fills.
    #[error("invalid [pod] in testkit.toml: {0}")]
    Placeholder(String),
    /// It printed a handle that does not validate.
    #[error("the pod printed an unusable handle: {cause}; logs kept in {}", logs.display())]
    BadHandle {
        /// What is wrong with it.
        cause: HandleError,
        /// The logs folder.
        logs: PathBuf,
    },
}

/// A pod testkit started.
#[derive(Debug)]
pub struct LaunchedPod {
    /// Its validated handle.
    pub handle: PodHandle,
    /// Its process id.
    pub pid: u32,
    /// Its process group (equal to `pid`).
    pub pgid: i32,
    /// When its process started, in clock ticks since boot (guards against pid reuse).
    pub start_ticks: Option<u64>,
    /// Its private directory (deleted on stop).
    pub private_dir: PathBuf,
    /// Its HOME, inside `private_dir`.
    pub home: PathBuf,
    /// The folder of its logs.
    pub logs_dir: PathBuf,
    /// The health measurement that declared it up.
    pub health: HealthReport,
    /// How long the boot took.
    pub boot_time: Duration,
    child: Option<tokio::process::Child>,
}

/// What stopping a pod did, verified.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct StopReport {
    /// Processes of the pod's tree when the stop began.
    pub processes: usize,
    /// Whether everything ended after SIGTERM, within the grace period.
    pub drained_after_term: bool,
    /// Processes that needed SIGKILL.
    pub killed: Vec<i32>,
    /// The pod's private directory (with HOME), verified gone.
    pub removed: PathBuf,
    /// How long the stop took.
    pub duration: Duration,
    /// A container pod: what became of its containers, networks and volumes.
    pub containers: Option<ContainerStop>,
}

/// A stop that could not be verified: names what survived.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StopError {
    /// Processes still alive after SIGKILL.
    #[error(
        "processes of pod group {pgid} survived SIGTERM and SIGKILL: {}",
        describe(survivors)
    )]
    Survivors {
        /// The group.
        pgid: i32,
        /// `(pid, command)`.
        survivors: Vec<(i32, String)>,
    },
    /// The pod's containers, networks or volumes could not be removed, or
    /// not proven gone.
    #[error("the pod's containers could not be stopped and removed: {problem}")]
    Containers {
        /// What the engine answered, or what is still there.
        problem: String,
    },
    /// The HOME could not be deleted.
    #[error("the pod's HOME {} survived: {problem}", path.display())]
    HomeSurvived {
        /// The directory.
        path: PathBuf,
        /// What deleting it answered.
        problem: String,
    },
}

fn describe(procs: &[(i32, String)]) -> String {
    procs
        .iter()
        .map(|(p, c)| format!("{p} ({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Starts a pod and waits until it is up (handle printed, health answered).
pub async fn launch(spec: &LaunchSpec) -> Result<LaunchedPod, LaunchError> {
    let program = match &spec.container {
        Some(c) => c.docker.clone(),
        None => resolve_program(
            &spec.command[0],
            spec.base_dir.as_deref(),
            spec.target_dir.as_deref(),
        )?,
    };
    let io = |what: String| {
        move |source| LaunchError::Io {
            what,
            cause: source,
        }
    };
    std::fs::create_dir_all(&spec.logs_dir)
        .map_err(io(format!("create {}", spec.logs_dir.display())))?;
    let private_dir = create_private_dir(spec.private_parent.as_deref())?;
    BootObserver::tell(
        spec.observer.as_ref(),
        BootStep::PrivateDir(private_dir.clone()),
    );
    let booted = boot(spec, &program, private_dir.clone()).await;
    if booted.is_err() {
        remove_containers(&private_dir).await;
        let _ = std::fs::remove_dir_all(&private_dir);
    }
    booted
}

async fn boot(
    spec: &LaunchSpec,
    program: &Path,
    private_dir: PathBuf,
) -> Result<LaunchedPod, LaunchError> {
    let home = private_dir.join("home");
    std::fs::create_dir(&home).map_err(|source| LaunchError::Io {
        what: format!("create {}", home.display()),
        cause: source,
    })?;
    let site = PodSite {
        home: home.to_string_lossy().into_owned(),
        ports: PodPorts::find(spec)?,
    };
    let port = site.ports.port;
    let fields = fill_fields(spec, &site)?;
    let made_handle = made_handle(spec, &site.ports, &fields)?;
    let values = site
        .values()
        .extend(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (env, for_bootstrap) = split_env(spec, &values);
    let host_ports = node_ports(spec, port)?;
    let container = match &spec.container {
        Some(c) => Some(container_commands(c, spec, &private_dir, &host_ports, &fields).await?),
        None => None,
    };
    let cluster = spec
        .container
        .as_ref()
        .zip(container.as_ref())
        .and_then(|(c, p)| super::cluster::describe(c, p, &host_ports, &spec.health_path));
    let args = pod_args(spec, container.as_ref(), &site, &values)?;

    let stdout_raw = private_dir.join("stdout.raw");
    let stderr_log = spec.logs_dir.join("pod.stderr.log");
    let (out, err) = (create_private_log(&stdout_raw)?, create_log(&stderr_log)?);
    let pod = PodEnv {
        spec,
        home: &home,
        private_dir: &private_dir,
        port,
        env: &env,
        container: container.as_ref(),
    };
    run_setups(spec, container.as_ref(), &values, &pod).await?;
    if let Some(c) = &container {
        super::cluster::start_nodes(&c.node_args, &spec.logs_dir, || pod.command(&c.docker))
            .await
            .map_err(LaunchError::Container)?;
    }
    let mut cmd = pod.command(program);
    cmd.args(&args).stdout(out).stderr(err).kill_on_drop(false);
    let started = Instant::now();
    let (mut child, pgid, start_ticks) = spawn_pod(spec, cmd, program)?;

    let result = async {
        let (handle, health) = wait_until_up(
            spec,
            &mut child,
            &stdout_raw,
            &stderr_log,
            started,
            made_handle,
            spec.container.as_ref().map(|_| port),
        )
        .await?;
        let handle = match cluster {
            Some(info) => {
                info.wait_healthy(started + spec.ceiling)
                    .await
                    .map_err(LaunchError::Container)?;
                handle.with_cluster(info)
            }
            None => handle,
        };
        bootstrap_running(spec, &handle, &values, &for_bootstrap, &pod).await?;
        Ok((handle, health))
    }
    .await;
    match result {
        Ok((handle, health)) => Ok(LaunchedPod {
            handle,
            pid: pgid as u32,
            pgid,
            start_ticks,
            private_dir,
            home,
            logs_dir: spec.logs_dir.clone(),
            health,
            boot_time: started.elapsed(),
            child: Some(child),
        }),
        Err(e) => {
            abandon(spec, child, pgid, &private_dir, &stdout_raw, &stderr_log).await;
            Err(e)
        }
    }
}

/// Creates a file the pod's output goes to.
fn create_log(path: &Path) -> Result<File, LaunchError> {
    File::create(path).map_err(|source| LaunchError::Io {
        what: format!("create {}", path.display()),
        cause: source,
    })
}

/// Creates the file the pod's stdout goes to, which holds its token until
/// it is redacted: mode 0600, in the private dir (0700), for the owner
/// alone whatever the umask.
fn create_private_log(path: &Path) -> Result<File, LaunchError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| LaunchError::Io {
            what: format!("create {}", path.display()),
            cause: source,
        })
}

/// Starts the pod's process in a process group of its own, and tells the
/// observer: its child, group and start time.
fn spawn_pod(
    spec: &LaunchSpec,
    mut cmd: tokio::process::Command,
    program: &Path,
) -> Result<(tokio::process::Child, i32, Option<u64>), LaunchError> {
    let (child, pgid) = process::spawn_in_group(&mut cmd).map_err(|source| LaunchError::Io {
        what: format!("start {}", program.display()),
        cause: source,
    })?;
    let start_ticks = process::start_ticks(pgid);
    BootObserver::tell(spec.observer.as_ref(), BootStep::Pod { pgid, start_ticks });
    Ok((child, pgid, start_ticks))
}

/// The loopback ports of a pod: `{port}`, and `{port_<name>}` of each of
/// `[pod] ports`.
struct PodPorts {
    port: u16,
    port_text: String,
    listen: String,
    keys: Vec<String>,
    texts: Vec<String>,
}

impl PodPorts {
    fn find(spec: &LaunchSpec) -> Result<PodPorts, LaunchError> {
        // Free ports, held open together while they are found, so that no
        // two are one.
        let all_ports = free_ports(1 + spec.ports.len()).map_err(|source| LaunchError::Io {
            what: "find a free loopback port".to_owned(),
            cause: source,
        })?;
        let (port, extra_ports) = (all_ports[0], &all_ports[1..]);
        Ok(PodPorts {
            port,
            port_text: port.to_string(),
            listen: format!("127.0.0.1:{port}"),
            keys: spec.ports.iter().map(|n| format!("port_{n}")).collect(),
            texts: extra_ports.iter().map(u16::to_string).collect(),
        })
    }

    /// `port_<name>` and its port, for each of `[pod] ports`.
    fn named(&self) -> impl Iterator<Item = (&str, &str)> {
        self.keys
            .iter()
            .map(String::as_str)
            .zip(self.texts.iter().map(String::as_str))
    }
}

/// What a pod's placeholders are filled from before anything of it runs:
/// its HOME and its ports.
struct PodSite {
    home: String,
    ports: PodPorts,
}

impl PodSite {
    fn values(&self) -> crate::template::Values<'_> {
        crate::template::Values::new()
            .with("home", &self.home)
            .with("port", &self.ports.port_text)
            .with("listen", &self.ports.listen)
            .extend(self.ports.named())
    }
}

/// `[pod] fields`, filled: each may use the pod's site and a `{random}` of
/// its own.
fn fill_fields(spec: &LaunchSpec, site: &PodSite) -> Result<BTreeMap<String, String>, LaunchError> {
    let randoms: Vec<String> = spec
        .fields
        .keys()
        .map(|_| crate::ids::random_id(24))
        .collect();
    let mut fields = BTreeMap::new();
    for ((key, value), random) in spec.fields.iter().zip(&randoms) {
        let values = site.values().with("random", random);
        let filled = crate::template::fill(value, &values, crate::template::verbatim)
            .map_err(|p| LaunchError::Placeholder(format!("pod.fields.{key}: {p}")))?;
        fields.insert(key.clone(), filled);
    }
    Ok(fields)
}

/// A pod that prints no handle gets one made of `[pod] fields`.
fn made_handle(
    spec: &LaunchSpec,
    ports: &PodPorts,
    fields: &BTreeMap<String, String>,
) -> Result<Option<PodHandle>, LaunchError> {
    if spec.fields.is_empty() {
        return Ok(None);
    }
    let mut obj = serde_json::Map::new();
    obj.insert(
        "name".into(),
        format!("pod-{}", crate::ids::random_id(6)).into(),
    );
    obj.insert("base_url".into(), format!("http://{}", ports.listen).into());
    obj.insert("port".into(), ports.port.into());
    for (k, v) in fields {
        obj.insert(k.clone(), v.clone().into());
    }
    let handle = PodHandle::parse(&serde_json::Value::Object(obj).to_string(), &spec.policy)
        .map_err(|source| LaunchError::BadHandle {
            cause: source,
            logs: spec.logs_dir.clone(),
        })?;
    handle.register_secrets();
    Ok(Some(handle))
}

/// `[pod] env` split in two: the entries filled now, for the pod, and the
/// names of those left for the bootstrap commands.
fn split_env<'s>(
    spec: &'s LaunchSpec,
    values: &crate::template::Values<'_>,
) -> (BTreeMap<&'s str, String>, Vec<&'s str>) {
    // An entry that needs what only the running pod's handle says
    // (`{base_url}`, a printed handle's `{token}`) is for the bootstrap
    // commands, filled once the pod is up; the rest is the pod's too.
    let mut env = BTreeMap::new();
    let mut later = Vec::new();
    for (k, v) in &spec.env_templates {
        match crate::template::fill(v, values, crate::template::verbatim) {
            Ok(filled) => {
                env.insert(k.as_str(), filled);
            }
            Err(_) => later.push(k.as_str()),
        }
    }
    (env, later)
}

/// The pod's arguments: a container pod's `docker run`, or `[pod] command`
/// filled, given `--home` and `--listen` when it places neither itself.
fn pod_args(
    spec: &LaunchSpec,
    container: Option<&container::Prepared>,
    site: &PodSite,
    values: &crate::template::Values<'_>,
) -> Result<Vec<String>, LaunchError> {
    let mut args: Vec<String> = match container {
        Some(c) => c.run_args.clone(),
        None => spec.command[1..]
            .iter()
            .map(|a| {
                crate::template::fill(a, values, crate::template::verbatim)
                    .map_err(|p| LaunchError::Placeholder(format!("pod.command: {p}")))
            })
            .collect::<Result<_, _>>()?,
    };
    if container.is_none()
        && !spec
            .command
            .iter()
            .any(|a| a.contains("{home}") || a.contains("{port}") || a.contains("{listen}"))
    {
        args.extend([
            "--home".to_owned(),
            site.home.clone(),
            "--listen".to_owned(),
            site.ports.listen.clone(),
        ]);
    }
    Ok(args)
}

/// The scrubbed environment every command of a pod runs in: the pod's
/// own, its setup's and its bootstrap's.
struct PodEnv<'a> {
    spec: &'a LaunchSpec,
    home: &'a Path,
    private_dir: &'a Path,
    port: u16,
    /// The `[pod] env` entries filled before the pod runs.
    env: &'a BTreeMap<&'a str, String>,
    container: Option<&'a container::Prepared>,
}

impl PodEnv<'_> {
    fn command(&self, program: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
            )
            .env("HOME", self.home)
            .env("TMPDIR", self.private_dir)
            .env("TESTKIT_POD_PORT", self.port.to_string())
            .envs(&self.spec.env)
            .envs(self.env)
            .envs(self.container.iter().flat_map(|c| &c.client_env))
            .current_dir(self.private_dir)
            .stdin(Stdio::null());
        cmd
    }
}

/// Runs what comes before the pod: a container pod's `docker` setup
/// commands, or a process pod's `[pod] setup`.
async fn run_setups(
    spec: &LaunchSpec,
    container: Option<&container::Prepared>,
    values: &crate::template::Values<'_>,
    pod: &PodEnv<'_>,
) -> Result<(), LaunchError> {
    if let Some(c) = container {
        for args in &c.setup_args {
            run_setup(pod.command(&c.docker), args, spec, Step::Setup).await?;
        }
        return Ok(());
    }
    for setup in &spec.setup {
        let program = resolve_program(
            &setup[0],
            spec.base_dir.as_deref(),
            spec.target_dir.as_deref(),
        )?;
        let args: Vec<String> = setup[1..]
            .iter()
            .map(|a| {
                crate::template::fill(a, values, crate::template::verbatim)
                    .map_err(|p| LaunchError::Placeholder(format!("pod.setup: {p}")))
            })
            .collect::<Result<_, _>>()?;
        run_setup(pod.command(&program), &args, spec, Step::Setup).await?;
    }
    Ok(())
}

/// Runs the bootstrap commands against the pod that is up.
async fn bootstrap_running(
    spec: &LaunchSpec,
    handle: &PodHandle,
    values: &crate::template::Values<'_>,
    later: &[&str],
    pod: &PodEnv<'_>,
) -> Result<(), LaunchError> {
    // Against the running pod: the handle's own fields too.
    let port_text = handle.port().to_string();
    let values = values
        .clone()
        .extend(handle.values(&port_text).pairs().iter().copied());
    bootstrap(spec, &values, later, &|program: &Path| pod.command(program)).await
}

/// Cleans up after a pod that did not come up.
async fn abandon(
    spec: &LaunchSpec,
    mut child: tokio::process::Child,
    pgid: i32,
    private_dir: &Path,
    stdout_raw: &Path,
    stderr_log: &Path,
) {
    // Leave nothing running; keep the logs.
    remove_containers(private_dir).await;
    let reaped = tokio::spawn(async move { child.wait().await });
    let _ = process::kill_group(pgid, Duration::from_secs(5)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), reaped).await;
    keep_logs(stdout_raw, &spec.logs_dir, stderr_log);
    let _ = std::fs::remove_dir_all(private_dir);
}

/// `n` distinct free loopback ports: each bound until all are found.
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// A command run around the pod's start, each in its own log.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// `[pod] setup`: before the pod.
    Setup,
    /// `[pod] bootstrap`: once the pod is up.
    Bootstrap,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Bootstrap => "bootstrap",
        }
    }
}

/// Runs the `[pod] bootstrap` commands against the running pod, in turn,
/// with the `[pod] env` entries `later` that only the running pod could
/// fill (filled, and checked, even when there is no command to give them).
async fn bootstrap(
    spec: &LaunchSpec,
    values: &crate::template::Values<'_>,
    later: &[&str],
    pod_command: &dyn Fn(&Path) -> tokio::process::Command,
) -> Result<(), LaunchError> {
    let env: Vec<(&str, String)> = later
        .iter()
        .map(|k| {
            let template = spec.env_templates.get(*k).map_or("", String::as_str);
            crate::template::fill(template, values, crate::template::verbatim)
                .map(|v| (*k, v))
                .map_err(|p| LaunchError::Placeholder(format!("pod.env.{k}: {p}")))
        })
        .collect::<Result<_, _>>()?;
    for command in &spec.bootstrap {
        let with_env = |program: &Path| {
            let mut cmd = pod_command(program);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            cmd
        };
        run_bootstrap(command, values, spec, &with_env).await?;
    }
    Ok(())
}

/// Runs one `[pod] bootstrap` command against the running pod: its
/// arguments filled with `values` (the handle's fields among them), in the
/// pod's environment and `TESTKIT_BASE_URL`.
async fn run_bootstrap(
    command: &[String],
    values: &crate::template::Values<'_>,
    spec: &LaunchSpec,
    pod_command: &dyn Fn(&Path) -> tokio::process::Command,
) -> Result<(), LaunchError> {
    let program = resolve_program(
        &command[0],
        spec.base_dir.as_deref(),
        spec.target_dir.as_deref(),
    )?;
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            crate::template::fill(a, values, crate::template::verbatim)
                .map_err(|p| LaunchError::Placeholder(format!("pod.bootstrap: {p}")))
        })
        .collect::<Result<_, _>>()?;
    let mut cmd = pod_command(&program);
    if let Some(base_url) = values.get("base_url") {
        cmd.env("TESTKIT_BASE_URL", base_url);
    }
    run_setup(cmd, &args, spec, Step::Bootstrap).await
}

/// Runs one `[pod] setup` or `bootstrap` command to completion under the boot ceiling, its
/// output appended to `pod.setup.log`.
async fn run_setup(
    mut cmd: tokio::process::Command,
    args: &[String],
    spec: &LaunchSpec,
    step: Step,
) -> Result<(), LaunchError> {
    let log_path = spec.logs_dir.join(format!("pod.{}.log", step.name()));
    let io = |what: String| {
        move |source| LaunchError::Io {
            what,
            cause: source,
        }
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(io(format!("open {}", log_path.display())))?;
    let shown = crate::redact(&format!(
        "{:?} {}",
        cmd.as_std().get_program(),
        args.join(" ")
    ))
    .into_owned();
    cmd.args(args)
        .stdout(
            log.try_clone()
                .map_err(io("open the setup log".to_owned()))?,
        )
        .stderr(log)
        .kill_on_drop(true);
    let (mut child, pgid) = process::spawn_in_group(&mut cmd)
        .map_err(io(format!("start the {} command {shown}", step.name())))?;
    let start_ticks = process::start_ticks(pgid);
    BootObserver::tell(
        spec.observer.as_ref(),
        match step {
            Step::Setup => BootStep::Setup { pgid, start_ticks },
            Step::Bootstrap => BootStep::Bootstrap { pgid, start_ticks },
        },
    );
    let status = match tokio::time::timeout(spec.ceiling, child.wait()).await {
        Ok(status) => status.map_err(io(format!("run the {} command {shown}", step.name())))?,
        Err(_) => {
            let _ = process::kill_group(pgid, Duration::from_secs(5)).await;
            let _ = child.wait().await;
            return Err(LaunchError::Setup {
                step: step.name(),
                command: shown,
                status: format!(
                    "still running after {}",
                    humantime::format_duration(spec.ceiling)
                ),
                last_seen: last_line(&log_path),
                logs: spec.logs_dir.clone(),
            });
        }
    };
    redact_in_place(&log_path);
    if status.success() {
        Ok(())
    } else {
        Err(LaunchError::Setup {
            step: step.name(),
            command: shown,
            status: status.to_string(),
            last_seen: last_line(&log_path),
            logs: spec.logs_dir.clone(),
        })
    }
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .map(|l| crate::redact(&l).into_owned())
        .unwrap_or_else(|| "nothing".to_owned())
}

fn redact_in_place(path: &Path) {
    if let Ok(text) = std::fs::read_to_string(path) {
        if let std::borrow::Cow::Owned(r) = crate::redact(&text) {
            let _ = std::fs::write(path, r);
        }
    }
}

async fn wait_until_up(
    spec: &LaunchSpec,
    child: &mut tokio::process::Child,
    stdout_raw: &Path,
    stderr_log: &Path,
    started: Instant,
    made_handle: Option<PodHandle>,
    published_port: Option<u16>,
) -> Result<(PodHandle, HealthReport), LaunchError> {
    let mut watch = BootWatch {
        out: Tail::new(stdout_raw),
        err: Tail::new(stderr_log),
        last_activity: Instant::now(),
        last_seen: "nothing (the pod printed no output)".to_owned(),
        handle: made_handle,
        next_health: Instant::now(),
    };
    loop {
        watch.read_output(spec, published_port)?;
        if let Some(up) = watch.check_health(spec).await {
            return Ok(up);
        }
        if let Some(exited) = watch.exited(spec, child) {
            return Err(exited);
        }
        watch.within_limits(spec, started)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a booting pod has shown so far, and when it last showed anything.
struct BootWatch {
    out: Tail,
    err: Tail,
    last_activity: Instant,
    /// The latest sign of life, for the error if the pod never comes up.
    last_seen: String,
    handle: Option<PodHandle>,
    next_health: Instant,
}

impl BootWatch {
    /// Reads the new lines the pod printed; a line of stdout that opens a
    /// JSON object, while there is no handle, is the pod's handle.
    fn read_output(
        &mut self,
        spec: &LaunchSpec,
        published_port: Option<u16>,
    ) -> Result<(), LaunchError> {
        let mut progressed = false;
        for line in self.out.lines() {
            progressed = true;
            if self.handle.is_none() && spec.fields.is_empty() && line.trim_start().starts_with('{')
            {
                // A container's service prints its address inside the
                // container; the tests reach it at the published port.
                let line = match published_port {
                    Some(port) => container::rewrite_printed_handle(&line, port),
                    None => line.clone(),
                };
                match PodHandle::parse(line.trim(), &spec.policy) {
                    Ok(h) => {
                        h.register_secrets();
                        self.last_seen =
                            format!("the handle of pod {} at {}", h.name(), h.base_url());
                        self.handle = Some(h);
                        continue;
                    }
                    Err(source) => {
                        return Err(LaunchError::BadHandle {
                            cause: source,
                            logs: spec.logs_dir.clone(),
                        })
                    }
                }
            }
            self.last_seen = format!("stdout: {}", crate::redact(&line));
        }
        for line in self.err.lines() {
            progressed = true;
            self.last_seen = format!("stderr: {}", crate::redact(&line));
        }
        if progressed {
            self.last_activity = Instant::now();
        }
        Ok(())
    }

    /// The handle and its health once a pod with a handle answers healthy;
    /// asked at most every 200ms.
    async fn check_health(&mut self, spec: &LaunchSpec) -> Option<(PodHandle, HealthReport)> {
        let h = self.handle.as_ref()?;
        if Instant::now() < self.next_health {
            return None;
        }
        let path = h.health().unwrap_or(&spec.health_path).to_owned();
        let report = check_health(h.base_url(), &path, Duration::from_secs(2)).await;
        if report.ok() {
            return Some((self.handle.take().expect("checked"), report));
        }
        self.last_seen = format!("health {}", report.summary());
        self.next_health = Instant::now() + Duration::from_millis(200);
        None
    }

    /// The error of a pod that exited before it was up.
    fn exited(
        &mut self,
        spec: &LaunchSpec,
        child: &mut tokio::process::Child,
    ) -> Option<LaunchError> {
        let Ok(Some(status)) = child.try_wait() else {
            return None;
        };
        // Read what it printed last before reporting.
        for line in self.out.lines().into_iter().chain(self.err.lines()) {
            self.last_seen = crate::redact(&line).into_owned();
        }
        Some(LaunchError::ExitedEarly {
            status: status.to_string(),
            last_seen: self.last_seen.clone(),
            logs: spec.logs_dir.clone(),
        })
    }

    /// Fails a boot past the hard ceiling, or silent for the inactivity
    /// timeout.
    fn within_limits(&self, spec: &LaunchSpec, started: Instant) -> Result<(), LaunchError> {
        if started.elapsed() >= spec.ceiling {
            return Err(LaunchError::Timeout {
                which: format!("hard ceiling {}", humantime::format_duration(spec.ceiling)),
                waited: started.elapsed(),
                last_seen: self.last_seen.clone(),
                logs: spec.logs_dir.clone(),
            });
        }
        if self.last_activity.elapsed() >= spec.inactivity_timeout {
            return Err(LaunchError::Timeout {
                which: format!(
                    "no progress for {}",
                    humantime::format_duration(spec.inactivity_timeout)
                ),
                waited: started.elapsed(),
                last_seen: self.last_seen.clone(),
                logs: spec.logs_dir.clone(),
            });
        }
        Ok(())
    }
}

/// Follows a file the pod appends to, a line at a time.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_owned(),
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn lines(&mut self) -> Vec<String> {
        let mut buf = Vec::new();
        if let Ok(mut f) = File::open(&self.path) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                let _ = f.read_to_end(&mut buf);
            }
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut lines = Vec::new();
        while let Some(pos) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            lines.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        lines
    }
}

impl LaunchedPod {
    /// Stops the pod: SIGTERM to its group, waits up to `grace` for the tree
    /// to drain, SIGKILLs what remains, deletes its HOME, and verifies both.
    pub async fn stop(mut self, grace: Duration) -> Result<StopReport, StopError> {
        let stdout_raw = self.private_dir.join("stdout.raw");
        let stderr_log = self.logs_dir.join("pod.stderr.log");
        let child = self.child.take();
        let reaper = child.map(|mut c| tokio::spawn(async move { c.wait().await }));
        let result = stop_group(
            self.pgid,
            self.start_ticks,
            (&self.private_dir, Some(&self.logs_dir)),
            grace,
            || keep_logs(&stdout_raw, &self.logs_dir, &stderr_log),
        )
        .await;
        if let Some(r) = reaper {
            r.abort();
        }
        result
    }
}

/// Stops the pod whose group is `pgid` and whose private directory is
/// `private_dir` (a pod started by another process, or one whose launcher
/// died). `start_ticks` guards against a reused pid. Dead pods are reclaimed:
/// their directory is deleted and verified gone.
pub async fn stop_recorded(
    pgid: i32,
    start_ticks: Option<u64>,
    private_dir: &Path,
    logs_dir: Option<&Path>,
    grace: Duration,
) -> Result<StopReport, StopError> {
    let stdout_raw = private_dir.join("stdout.raw");
    stop_group(pgid, start_ticks, (private_dir, logs_dir), grace, || {
        if let Some(logs) = logs_dir {
            keep_logs(&stdout_raw, logs, &logs.join("pod.stderr.log"))
        }
    })
    .await
}

async fn stop_group(
    pgid: i32,
    start_ticks: Option<u64>,
    (private_dir, logs_dir): (&Path, Option<&Path>),
    grace: Duration,
    save_logs: impl FnOnce(),
) -> Result<StopReport, StopError> {
    let began = Instant::now();
    // The container first: its `docker run` waits for it, and the daemon
    // keeps it whatever becomes of that process.
    let containers = match ContainerRecord::read(private_dir) {
        Some(record) => match stop_containers(&record, logs_dir, grace).await {
            Ok(stop) => Some(stop),
            Err(problem) => {
                let _ = process::terminate_group(pgid, start_ticks, grace).await;
                save_logs();
                return Err(StopError::Containers { problem });
            }
        },
        None => None,
    };
    let ended = match process::terminate_group(pgid, start_ticks, grace).await {
        Ok(ended) => ended,
        Err(survivors) => {
            save_logs();
            return Err(StopError::Survivors { pgid, survivors });
        }
    };
    save_logs();
    if let Err(e) = std::fs::remove_dir_all(private_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(StopError::HomeSurvived {
                path: private_dir.to_owned(),
                problem: e.to_string(),
            });
        }
    }
    if private_dir.exists() {
        return Err(StopError::HomeSurvived {
            path: private_dir.to_owned(),
            problem: "it still exists after deletion".to_owned(),
        });
    }
    Ok(StopReport {
        processes: ended.processes,
        drained_after_term: ended.killed.is_empty(),
        killed: ended.killed,
        removed: private_dir.to_owned(),
        duration: began.elapsed(),
        containers,
    })
}

/// Stops a container pod's containers, after keeping what each node of a
/// pod of several printed (`node-<name>.log`, redacted), every start of it.
async fn stop_containers(
    record: &ContainerRecord,
    logs_dir: Option<&Path>,
    grace: Duration,
) -> Result<ContainerStop, String> {
    if let (Some(logs), Some(_)) = (logs_dir, &record.entry) {
        container::save_node_logs(record, logs).await;
    }
    container::stop_pod(record, grace).await
}

/// Removes what a container pod that failed to boot left in the engine.
async fn remove_containers(private_dir: &Path) {
    if let Some(record) = ContainerRecord::read(private_dir) {
        let _ = container::stop_pod(&record, Duration::from_secs(5)).await;
    }
}

/// The loopback port each node of a container pod is published on, by
/// name: the pod's `port` for the entry (or, for a pod of one container,
/// for the name `""`), a free one for each other node.
fn node_ports(spec: &LaunchSpec, port: u16) -> Result<BTreeMap<String, u16>, LaunchError> {
    let mut ports = BTreeMap::from([(String::new(), port)]);
    let Some(c) = &spec.container else {
        return Ok(ports);
    };
    if let Some(entry) = &c.entry {
        ports.insert(entry.clone(), port);
    }
    let others: Vec<&String> = c.other_nodes().map(|(n, _)| n).collect();
    let free = free_ports(others.len() + 1).map_err(|source| LaunchError::Io {
        what: "find free loopback ports for the pod's nodes".to_owned(),
        cause: source,
    })?;
    // The pod's own port was free a moment ago, and may be again: skip it.
    let mut free = free.into_iter().filter(|p| *p != port);
    for name in others {
        let p = free.next().ok_or_else(|| LaunchError::Io {
            what: "find free loopback ports for the pod's nodes".to_owned(),
            cause: std::io::Error::other("too few"),
        })?;
        ports.insert(name.clone(), p);
    }
    Ok(ports)
}

/// The `docker` commands of a container pod: its placeholders are the
/// container's (`{port}` and `{listen}` inside it) and the handle's fields.
async fn container_commands(
    c: &ContainerSpec,
    spec: &LaunchSpec,
    private_dir: &Path,
    host_ports: &BTreeMap<String, u16>,
    fields: &BTreeMap<String, String>,
) -> Result<container::Prepared, LaunchError> {
    let port = c.port.to_string();
    let listen = format!("0.0.0.0:{port}");
    let values = crate::template::Values::new()
        .with("port", &port)
        .with("listen", &listen)
        .extend(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    container::prepare(
        c,
        private_dir,
        spec.base_dir.as_deref(),
        host_ports,
        &values,
    )
    .await
    .map_err(LaunchError::Container)
}

/// Copies the raw stdout, redacted, to the logs folder, and redacts stderr
/// in place.
fn keep_logs(stdout_raw: &Path, logs_dir: &Path, stderr_log: &Path) {
    if let Ok(text) = std::fs::read(stdout_raw) {
        let text = String::from_utf8_lossy(&text);
        // The process that stops a pod may not be the one that read its
        // handle (`pod down` of a kept pod): the handle the pod printed is
        // in this very output, so its secrets are registered from there.
        for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
            let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(line.trim()) else {
                continue;
            };
            if !obj.contains_key("token") {
                continue;
            }
            for (key, value) in &obj {
                if let (false, Some(v)) = (
                    matches!(key.as_str(), "name" | "base_url" | "health"),
                    value.as_str(),
                ) {
                    crate::register_secret(v);
                }
            }
        }
        let _ = std::fs::write(
            logs_dir.join("pod.stdout.log"),
            crate::redact(&text).as_bytes(),
        );
    }
    if let Ok(text) = std::fs::read(stderr_log) {
        let text = String::from_utf8_lossy(&text);
        let redacted = crate::redact(&text);
        if let std::borrow::Cow::Owned(r) = redacted {
            let _ = std::fs::write(stderr_log, r.as_bytes());
        }
    }
}

fn create_private_dir(parent: Option<&Path>) -> Result<PathBuf, LaunchError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = parent
        .map(Path::to_owned)
        .unwrap_or_else(std::env::temp_dir);
    let mut last = None;
    for _ in 0..8 {
        let dir = parent.join(format!("testkit-pod-{}", crate::ids::random_id(10)));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    Err(LaunchError::Io {
        what: format!("create a private directory under {}", parent.display()),
        cause: last.expect("tried"),
    })
}

/// Finds a pod (or CLI) program: a path as given (relative to `base_dir`),
/// else next to the current executable, in `target_dir`, then on PATH.
pub fn resolve_program(
    program: &str,
    base_dir: Option<&Path>,
    target_dir: Option<&Path>,
) -> Result<PathBuf, LaunchError> {
    process::find_program(program, base_dir, target_dir).ok_or_else(|| {
        LaunchError::ProgramNotFound {
            program: program.to_owned(),
            hint: format!(
                "build it (`cargo build -p {program}` in the testkit workspace) or put it on PATH, \
                 or set `[pod] command` in testkit.toml"
            ),
        }
    })
}
