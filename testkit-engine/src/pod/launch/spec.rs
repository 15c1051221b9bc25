//! What a launch is: its spec, what it tells as it boots, the pod it
//! makes, and how a launch or a stop fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{BootstrapStep, GuestField, Ready, SuiteConfig, VmSection};
use crate::machine::{AccelChoice, Image, Machine, MachineError, MachineRecord};
use crate::pod::check::HealthReport;
use crate::pod::container::{ContainerSpec, ContainerStop};
use crate::pod::handle::{HandleError, HandlePolicy, PodHandle};
use crate::process;

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
    /// Steps to run once the pod is up (`[pod] bootstrap`).
    pub bootstrap: Vec<BootstrapStep>,
    /// Environment templates of the pod and its setup (`[pod] env`).
    pub env_templates: BTreeMap<String, String>,
    /// Names of more free ports to reserve (`[pod] ports`).
    pub ports: Vec<String>,
    /// The target dir to look for the program in after the current
    /// executable's (`CARGO_TARGET_DIR` of the caller).
    pub target_dir: Option<PathBuf>,
    /// Run the pod as this container rather than `command` (`[pod.container]`).
    pub container: Option<ContainerSpec>,
    /// Run the pod in this machine rather than `command` (`[pod.vm]`).
    pub machine: Option<MachineLaunch>,
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
    /// The process group a machine pod's QEMU will run in exists (its
    /// leader is the machine's guard); told before QEMU starts.
    MachineGroup {
        /// Its group.
        pgid: i32,
        /// Its leader's start time, against pid reuse.
        start_ticks: Option<u64>,
    },
    /// A machine pod's run directory (its overlay, sockets, console log)
    /// was created.
    MachineDir(PathBuf),
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

    pub(super) fn tell(observer: Option<&BootObserver>, step: BootStep) {
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
            machine: None,
            observer: None,
        }
    }
}

/// A machine pod, made ready by the caller: `[pod.vm]` with its image in
/// the cache and its packages found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MachineLaunch {
    /// The image it boots.
    pub image: Image,
    /// Where the image came from, for people (`cached`, `built in 1m 20s`).
    pub image_note: String,
    /// The `.deb` files installed in the guest, in this order.
    pub debs: Vec<PathBuf>,
    /// The guest port of the service, forwarded from a free loopback port.
    pub port: u16,
    /// The guest's memory, in MiB.
    pub memory_mib: u32,
    /// The guest's CPUs.
    pub cpus: u32,
    /// The handle's fields, read in the guest.
    pub fields: BTreeMap<String, GuestField>,
    /// The longest boot, from QEMU's start to the first healthy answer.
    pub ceiling: Duration,
    /// The size of its data disk, in MiB, when it has one.
    pub data_disk_mib: Option<u32>,
    /// The installer `binaries`: when set, it installs the product, and
    /// `debs` is not used.
    pub binaries: Option<BinariesLaunch>,
    /// The run the machine is booted for (its record names it).
    pub run_id: Option<String>,
}

/// The installer `binaries` of a machine pod: files of this host copied
/// to paths in the guest, commands run there as root, then the product's
/// unit enabled and started.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BinariesLaunch {
    /// `(file here, path in the guest, mode)`, in order.
    pub files: Vec<(PathBuf, String, u32)>,
    /// Commands run in the guest after the copy.
    pub setup: Vec<Vec<String>>,
    /// The unit started last.
    pub unit: String,
}

impl BinariesLaunch {
    /// The installer of `section`, its files relative to `suite_dir`.
    pub fn new(section: &crate::config::BinariesSection, suite_dir: &Path) -> BinariesLaunch {
        BinariesLaunch {
            files: section
                .files
                .iter()
                .map(|f| {
                    (
                        suite_dir.join(&f.from),
                        f.to.clone(),
                        f.mode_bits().unwrap_or(0o644),
                    )
                })
                .collect(),
            setup: section.setup.clone(),
            unit: section.unit.clone(),
        }
    }
}

impl MachineLaunch {
    /// The launch of `section`, booting `image` with `debs`.
    pub fn new(
        section: &VmSection,
        image: Image,
        image_note: String,
        debs: Vec<PathBuf>,
    ) -> MachineLaunch {
        MachineLaunch {
            image,
            image_note,
            debs,
            port: section.port,
            memory_mib: section.memory_mib,
            cpus: section.cpus,
            fields: section.fields.clone(),
            ceiling: section.ceiling,
            data_disk_mib: section.data_disk_mib,
            binaries: None,
            run_id: None,
        }
    }
}

/// The machine a machine pod runs in, and what its boot found.
#[derive(Debug)]
pub(crate) struct BootedMachine {
    pub(crate) machine: Machine,
    /// The image's name.
    pub(crate) image: String,
    /// Where the image came from.
    pub(crate) image_note: String,
}

impl BootedMachine {
    pub(crate) fn accel(&self) -> &AccelChoice {
        self.machine.accel()
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
    /// A container pod's engine could not publish its port: something
    /// else holds it.
    #[error("the pod's container did not start ({status}): {taken}; logs kept in {}", logs.display())]
    PortTaken {
        /// How the engine's `run` exited.
        status: String,
        /// The port, and what the engine said of it.
        taken: crate::containers::PortTaken,
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
    /// A unit of the guest failed after the product was installed, before
    /// the pod answered health: the product's own service, as a rule.
    #[error("the machine pod's unit(s) {units} failed after the install, before health answered (`systemctl list-units --state=failed` in the guest); their last lines:\n{journal}\nlogs kept in {}", logs.display())]
    UnitFailed {
        /// The units that failed, comma-separated.
        units: String,
        /// Their last journal lines, redacted.
        journal: String,
        /// The logs folder.
        logs: PathBuf,
    },
    /// The guest stopped answering its agent while health did not answer
    /// either: hung, or too loaded to run.
    #[error("the machine pod's guest has not answered its agent for {silent:?} while its health did not answer either: it looks hung (QEMU runs it, nothing in it answers); the end of its console:\n{console}\nlogs kept in {}", logs.display())]
    GuestSilent {
        /// How long the agent was silent.
        silent: Duration,
        /// The end of the guest's console, redacted.
        console: String,
        /// The logs folder.
        logs: PathBuf,
    },
    /// A step of a machine pod's boot failed.
    #[error("the machine pod could not {what}; logs kept in {}", logs.display())]
    Machine {
        /// What it was doing.
        what: String,
        /// The logs folder.
        logs: PathBuf,
        /// Why.
        #[source]
        source: MachineError,
    },
    /// A machine pod's boot failed, and ending its machine failed too:
    /// what is left is named.
    #[error("{boot}; and ending its machine failed: {left}")]
    MachineNotEnded {
        /// Why the boot failed.
        #[source]
        boot: Box<LaunchError>,
        /// What ending the machine left, or why it failed.
        left: String,
    },
    /// A handle field of `[pod.vm] fields` could not be read in the guest.
    #[error("[pod.vm] fields.{field}: {problem}")]
    GuestField {
        /// The field.
        field: String,
        /// What is wrong, and how to mend it.
        problem: String,
    },
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

impl LaunchError {
    /// A machine pod whose boot failed and whose machine could not be
    /// ended: what is left. `None` when the failed boot ended what it had
    /// made (or made no machine).
    pub fn machine_left(&self) -> Option<String> {
        match self {
            LaunchError::MachineNotEnded { left, .. } => Some(left.clone()),
            LaunchError::Machine {
                source: MachineError::BootNotEnded { left, .. },
                ..
            } => Some(crate::errors::error_chain(left.as_ref())),
            _ => None,
        }
    }
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
    pub(super) child: Option<tokio::process::Child>,
    /// A machine pod's machine (its QEMU is `pid`, its guard's group `pgid`).
    pub(super) machine: Option<BootedMachine>,
}

impl LaunchedPod {
    /// A machine pod's record: what another process needs to list, reach
    /// and end its machine; `None` for any other pod.
    pub fn machine_record(&self) -> Option<&MachineRecord> {
        self.machine.as_ref().map(|m| m.machine.record())
    }

    /// Lets a machine pod's machine outlive this process (`--keep`): its
    /// guard released, its record left ownerless, QEMU running until `pod
    /// down`. The record, or `None` for any other pod.
    pub async fn keep_machine(&mut self) -> Result<Option<MachineRecord>, MachineError> {
        match self.machine.take() {
            Some(booted) => booted.machine.keep().await.map(Some),
            None => Ok(None),
        }
    }

    /// A machine pod (its `pid` is QEMU's): its image, where the image came
    /// from, and which accelerator its CPU runs under, and why; `None` for
    /// any other pod.
    pub fn machine_summary(&self) -> Option<String> {
        let m = self.machine.as_ref()?;
        let accel = m.accel();
        Some(format!(
            "QEMU, image {} ({}), under {} ({})",
            m.image,
            m.image_note,
            accel.accel.as_str().to_uppercase(),
            accel.why,
        ))
    }
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
    /// A machine pod: what became of its QEMU and its overlay.
    pub machine: Option<MachineStop>,
}

/// What ending a machine pod did, verified.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct MachineStop {
    /// QEMU's pid, verified gone.
    pub qemu_pid: i32,
    /// Whether QEMU exited on its own when asked (`quit`), or was killed.
    pub exited_cleanly: bool,
    /// QEMU had exited before the stop (stopped from outside, or crashed).
    pub already_gone: bool,
    /// The machine's run directory (its overlay), verified gone.
    pub run_dir: PathBuf,
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
    /// A machine pod's QEMU or overlay outlived its stop, or could not be
    /// proven gone.
    #[error("the pod's machine did not end cleanly: {problem}")]
    Machine {
        /// What is still there, or what failed.
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
            hint: "build or install it and put it on PATH (or give its path, relative to \
                   the suite's folder), or set `[pod] command` in testkit.toml"
                .to_owned(),
        }
    })
}

/// The handle testkit makes of `fields` for a pod that prints none: a
/// fresh name (unless `fields` names it), the base URL and port of `port`
/// on 127.0.0.1, the fields;
/// its secrets registered.
pub(super) fn handle_of_fields(
    spec: &LaunchSpec,
    port: u16,
    fields: &BTreeMap<String, String>,
) -> Result<PodHandle, LaunchError> {
    let mut obj = serde_json::Map::new();
    obj.insert(
        "name".into(),
        format!("pod-{}", crate::ids::random_id(6)).into(),
    );
    obj.insert("base_url".into(), format!("http://127.0.0.1:{port}").into());
    obj.insert("port".into(), port.into());
    for (k, v) in fields {
        obj.insert(k.clone(), v.clone().into());
    }
    let handle = PodHandle::parse(&serde_json::Value::Object(obj).to_string(), &spec.policy)
        .map_err(|source| LaunchError::BadHandle {
            cause: source,
            logs: spec.logs_dir.clone(),
        })?;
    handle.register_secrets();
    Ok(handle)
}
