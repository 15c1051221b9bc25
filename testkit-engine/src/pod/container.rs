//! Pods that are containers: run by the Docker Engine through the `docker`
//! CLI, labelled, published on 127.0.0.1 only, and removed and proven gone
//! by label.
//!
//! The pod's process is `docker run` itself, attached, in the pod's process
//! group: the container's stdout and stderr stream through it into the
//! pod's log files (so the handle, the boot wait and the redaction of the
//! logs are those of a process pod), and it exits with the container's exit
//! code. The container belongs to the daemon, not to that group, so every
//! stop (the runner's, `pod down`'s, the watchdog's) first ends the
//! containers of the pod by label, then the group.
//!
//! Everything a pod creates in the engine (its container, the one-off
//! containers of its setup, its network, its volumes) carries the labels
//! [`OWNER_LABEL`]` = testkit`, [`POD_LABEL`]` = <pod id>` and, in a run,
//! [`RUN_LABEL`]` = <run id>` and [`MAKER_LABEL`]` = <runner pid>-<its start
//! time>` (by which a janitor tells a live run); it is found and removed by those labels,
//! never by name. The container's `env` (where secrets belong) reaches it
//! through an env file in the pod's private directory (mode 0700), read by
//! the `docker` client: not an argument of a command line, and never a
//! label, an image layer or a build context.
//!
//! Every call to the engine goes through [`crate::containers`]: this module
//! decides what a pod is made of, and says it in the engine's types.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::{ContainerSection, MountSection, NodeSection};
use crate::containers::{
    Engine, EngineError, Filter, Mount, MountKind, PacketFilterError, RemoveError, RunOptions,
};
use crate::errors::error_chain;

/// The label every engine object testkit creates carries, with value `testkit`.
pub const OWNER_LABEL: &str = "testkit.owner";
/// The label naming the run an engine object belongs to.
pub const RUN_LABEL: &str = "testkit.run";
/// The label naming the pod an engine object belongs to.
pub const POD_LABEL: &str = "testkit.pod";
/// The label saying what a container is to its pod: `pod` or `setup`.
pub const ROLE_LABEL: &str = "testkit.role";
/// The label naming the node a container is, in a pod of several.
pub const NODE_LABEL: &str = "testkit.node";
/// The label naming the process that made an engine object of a run (the
/// runner): `<pid>-<start time in clock ticks since boot>`. Whether the run
/// is live is read from it and `/proc`, the same for every process on the
/// machine whatever its environment ([`maker_is_live`]).
pub const MAKER_LABEL: &str = "testkit.maker";

/// The value of [`MAKER_LABEL`] for this process.
fn maker_value() -> Option<String> {
    let pid = std::process::id();
    let ticks = crate::process::start_ticks(pid as i32)?;
    Some(format!("{pid}-{ticks}"))
}

/// Whether the [`MAKER_LABEL`] value `value` names a process that still
/// runs (the same pid, started at the same time). A value that does not
/// parse names none.
pub fn maker_is_live(value: &str) -> bool {
    value
        .split_once('-')
        .and_then(|(pid, ticks)| Some((pid.parse::<i32>().ok()?, ticks.parse::<u64>().ok()?)))
        .is_some_and(|(pid, ticks)| crate::process::is_running(pid, ticks))
}

/// The file in a pod's private directory that makes it a container pod.
const RECORD_FILE: &str = "container.json";
/// The env file the `docker` client reads the container's environment from.
const ENV_FILE: &str = "container.env";

/// Why a container pod could not be made, stopped or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// The engine refused an operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The engine holds no such image.
    #[error(
        "the {engine} holds no image `{image}`, and testkit pulls nothing: build it \
         (`docker build -t {image} …`), or give `[pod.container] build` a context dir"
    )]
    NoImage {
        /// The image.
        image: String,
        /// `Docker Engine` or `Podman`.
        engine: &'static str,
    },
    /// A placeholder of `[pod.container]` that nothing fills.
    #[error("invalid [pod.container] in testkit.toml: {key}: {problem}")]
    Placeholder {
        /// The dotted key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// An env value an env file cannot carry.
    #[error("{key}: its value holds a line break, which an env file cannot carry")]
    LineBreak {
        /// The dotted key.
        key: String,
    },
    /// A file of the pod's private directory could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A bind mount's source does not resolve.
    #[error("pod.container.mounts: {}", path.display())]
    MountSource {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A mount that names nothing to mount.
    #[error("pod.container.mounts: the entry for {target} has neither `volume` nor `source`")]
    MountWithoutSource {
        /// Where it was to be mounted.
        target: String,
    },
    /// A mount whose paths `--mount` cannot carry.
    #[error(
        "pod.container.mounts: {source_path} or {target} holds a `,`, which `docker --mount` \
         cannot carry"
    )]
    MountComma {
        /// The volume or host path.
        source_path: String,
        /// Where it was to be mounted.
        target: String,
    },
    /// Removing the pod's objects by label failed.
    #[error(transparent)]
    Remove(#[from] RemoveError),
    /// Objects of the pod are still there after their removal.
    #[error(
        "still in the Docker Engine after removal, listed by label {POD_LABEL}={pod_id}: {}",
        left.join(", ")
    )]
    Left {
        /// The pod's id.
        pod_id: String,
        /// What is left.
        left: Vec<String>,
    },
    /// A rule of the pod's faults could not be removed.
    #[error(transparent)]
    PacketFilter(#[from] PacketFilterError),
}

/// How to run a pod as a container: the suite's `[pod.container]` with the
/// image resolved (built, when the suite builds it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ContainerSpec {
    /// An image the engine holds.
    pub image: String,
    /// The container port, published on `127.0.0.1:<free port>`.
    pub port: u16,
    /// The command, or empty for the image's.
    pub command: Vec<String>,
    /// The container's environment (placeholders unfilled).
    pub env: BTreeMap<String, String>,
    /// Mounts; `source` paths are resolved against `base_dir`.
    pub mounts: Vec<MountSection>,
    /// One-off commands run before `command`.
    pub setup: Vec<Vec<String>>,
    /// The run whose label the pod's engine objects carry.
    pub run_id: Option<String>,
    /// The `docker` program.
    pub docker: PathBuf,
    /// The nodes of a pod of several, by name; empty for one container.
    pub nodes: BTreeMap<String, NodeSection>,
    /// The node whose API is the pod's (with `nodes`).
    pub entry: Option<String>,
    /// How one node proves it reaches another (`[pod.container] reach`).
    pub reach: Vec<String>,
}

impl ContainerSpec {
    /// The engine that runs it.
    pub fn engine(&self) -> Engine {
        Engine::new(self.docker.clone())
    }

    /// The spec of `section`, its image being `image`.
    pub fn new(section: &ContainerSection, image: String, docker: PathBuf) -> ContainerSpec {
        ContainerSpec {
            image,
            port: section.port,
            command: section.command.clone(),
            env: section.env.clone(),
            mounts: section.mounts.clone(),
            setup: section.setup.clone(),
            run_id: None,
            docker,
            nodes: section.nodes.clone(),
            entry: section.entry.clone(),
            reach: section.reach.clone(),
        }
    }

    /// The nodes other than the entry, which start first, detached.
    pub(super) fn other_nodes(&self) -> impl Iterator<Item = (&String, &NodeSection)> {
        self.nodes
            .iter()
            .filter(|(name, _)| Some(*name) != self.entry.as_ref())
    }
}

/// What a container pod's private directory records of it, for whoever
/// stops it (this process, `pod down`, the watchdog).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerRecord {
    /// The pod's id: the value of [`POD_LABEL`].
    pub pod_id: String,
    /// The run, the value of [`RUN_LABEL`], when there is one.
    pub run_id: Option<String>,
    /// The container's name (for people: it is found by label).
    pub name: String,
    /// The image.
    pub image: String,
    /// The `docker` program.
    pub docker: PathBuf,
    /// When the container was started, in seconds since the Unix epoch.
    pub started_at: u64,
    /// The entry node of a pod of several: the container whose `docker
    /// run` is the pod's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The nodes of a pod of several, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

impl ContainerRecord {
    /// The record of the container pod whose private directory is `dir`;
    /// `None` for a process pod.
    pub fn read(private_dir: &Path) -> Option<ContainerRecord> {
        let bytes = std::fs::read(private_dir.join(RECORD_FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The engine that runs it.
    pub fn engine(&self) -> Engine {
        Engine::new(self.docker.clone())
    }
}

/// A pod that is one container, as the handle's `container` field gives
/// it: how a test process finds the container (by label) to say what
/// state it was in when a test hung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PodContainer {
    /// The pod's id: the value of [`POD_LABEL`].
    pub pod_id: String,
    /// The `docker` program.
    pub docker: PathBuf,
}

impl PodContainer {
    /// The container of pod `pod_id`, run by `docker`.
    pub fn new(pod_id: String, docker: PathBuf) -> PodContainer {
        PodContainer { pod_id, docker }
    }

    /// `node pod: STATE; its last N lines:` and those lines, indented, as
    /// a cluster's nodes are described; what could not be read said.
    pub async fn describe(&self, tail: usize) -> String {
        let engine = Engine::new(self.docker.clone());
        let found = engine
            .ps(
                &[
                    Filter::label(POD_LABEL, &self.pod_id),
                    Filter::label(ROLE_LABEL, "pod"),
                ],
                true,
            )
            .await;
        match found.as_deref() {
            Ok([one]) => describe_container(&engine, "pod", &one.id, tail).await,
            Ok([]) => format!(
                "node pod: gone (no container labelled {POD_LABEL}={})",
                self.pod_id
            ),
            Ok(many) => format!(
                "node pod: {} containers labelled {POD_LABEL}={}, expected one",
                many.len(),
                self.pod_id
            ),
            Err(e) => format!("node pod: unknown ({})", error_chain(e)),
        }
    }
}

/// The `docker run` that is a container pod's process, and the setup
/// commands before it.
pub(super) struct Prepared {
    pub(super) engine: Engine,
    pub(super) run_args: Vec<String>,
    pub(super) setup_args: Vec<Vec<String>>,
    /// Environment the `docker` client needs (its daemon, its config).
    pub(super) client_env: BTreeMap<String, String>,
    /// The `docker run --detach` of each node of a pod of several, in start
    /// order: the entry last.
    pub(super) node_args: Vec<(String, Vec<String>)>,
    /// The network the pod's containers share.
    pub(super) network: String,
    /// The pod's id: the value of [`POD_LABEL`].
    pub(super) pod_id: String,
}

/// Records the pod, creates its network and volumes (labelled), writes the
/// env file, and returns the commands to run. `values` fills placeholders
/// (the handle's fields among them); `host_port` is the loopback port the
/// container port is published on.
pub(super) async fn prepare(
    spec: &ContainerSpec,
    private_dir: &Path,
    base_dir: Option<&Path>,
    host_ports: &BTreeMap<String, u16>,
    values: &crate::template::Values<'_>,
) -> Result<Prepared, ContainerError> {
    let record = record_pod(spec, private_dir)?;
    let name = record.name.clone();
    let engine = spec.engine();
    require_image(&engine, &spec.image).await?;
    let labels = labels(spec, &record.pod_id);

    let network = name.clone();
    engine.create_network(&network, &labels).await?;

    let mut mounts = Vec::new();
    for mount in &spec.mounts {
        mounts.push(mount_of(&engine, mount, &name, &labels, base_dir).await?);
    }
    let base = RunOptions {
        labels,
        network: network.clone(),
        env_files: vec![write_env_file(spec, None, private_dir, values)?],
        mounts,
        image: spec.image.clone(),
        ..RunOptions::default()
    };
    let mut setup_args = Vec::new();
    for (i, command) in spec.setup.iter().enumerate() {
        let mut setup = with_role(&base, "setup");
        setup.remove = true;
        setup.name = format!("{name}-setup-{i}");
        setup.command = command
            .iter()
            .map(|arg| fill_container(arg, values, "pod.container.setup"))
            .collect::<Result<_, _>>()?;
        setup_args.push(setup.args());
    }
    // Each node's data disk, a volume of its own.
    for (node, section) in &spec.nodes {
        if let Some(disk) = &section.disk {
            engine
                .create_tmpfs_volume(&disk_volume(&name, node), &base.labels, disk.size_mib)
                .await?;
        }
    }
    let node_run = NodeRun {
        spec,
        base: &base,
        private_dir,
        pod_name: &name,
        host_ports,
        values,
    };
    let mut node_args = Vec::new();
    for (node, section) in spec.other_nodes() {
        node_args.push((node.clone(), node_run.args(Some((node, section)), true)?));
    }
    let run_args = match &spec.entry {
        // A pod of several: every node detached, the entry last, and the
        // pod's process the engine's events of its containers. It lives as
        // long as the pod, whatever a fault does to a node (a `docker run`
        // attached to the entry would end with a restart of it), and its
        // output is the nodes' lifecycle, in order.
        Some(entry) => {
            let args = node_run.args(Some((entry, &spec.nodes[entry])), true)?;
            node_args.push((entry.clone(), args));
            engine.events_log_args(
                record.started_at.saturating_sub(1),
                &[
                    Filter::label(POD_LABEL, &record.pod_id),
                    Filter::Type("container"),
                ],
                NODE_LABEL,
            )
        }
        None => node_run.args(None, false)?,
    };
    Ok(Prepared {
        engine,
        run_args,
        setup_args,
        client_env: client_env(),
        node_args,
        network,
        pod_id: record.pod_id,
    })
}

/// The volume of `node`'s data disk, in the pod `pod_name`.
fn disk_volume(pod_name: &str, node: &str) -> String {
    format!("{pod_name}-{node}-disk")
}

/// `base`, labelled as the `role` of its container: `pod` or `setup`.
fn with_role(base: &RunOptions, role: &str) -> RunOptions {
    let mut run = base.clone();
    run.labels.insert(ROLE_LABEL.to_owned(), role.to_owned());
    run
}

/// What the `run` of each of a pod's nodes is made of.
struct NodeRun<'a> {
    spec: &'a ContainerSpec,
    base: &'a RunOptions,
    private_dir: &'a Path,
    pod_name: &'a str,
    host_ports: &'a BTreeMap<String, u16>,
    values: &'a crate::template::Values<'a>,
}

impl NodeRun<'_> {
    /// The `run` of `node` (the only container when `None`), detached or
    /// not: its name, alias on the network, published port, environment
    /// and command.
    fn args(
        &self,
        node: Option<(&String, &NodeSection)>,
        detach: bool,
    ) -> Result<Vec<String>, ContainerError> {
        let spec = self.spec;
        let node_name = node.map_or("", |(n, _)| n.as_str());
        let values = self.values.clone().with("node", node_name);
        let mut run = with_role(self.base, "pod");
        let host_port = match node {
            Some((n, section)) => {
                // The pod's env file comes first; a node's entries, read
                // after it, win.
                run.env_files.push(write_env_file(
                    spec,
                    Some((n, section)),
                    self.private_dir,
                    &values,
                )?);
                run.labels.insert(NODE_LABEL.to_owned(), n.clone());
                run.alias = Some(n.clone());
                if let Some(disk) = &section.disk {
                    run.mounts.push(Mount {
                        kind: MountKind::Volume,
                        source: disk_volume(self.pod_name, n),
                        target: disk.target.clone(),
                        read_only: false,
                    });
                }
                run.name = format!("{}-{n}", self.pod_name);
                self.host_ports[n.as_str()]
            }
            None => {
                run.name = self.pod_name.to_owned();
                self.host_ports[""]
            }
        };
        run.detach = detach;
        run.publish = Some((host_port, spec.port));
        let command = match node {
            Some((_, section)) if !section.command.is_empty() => &section.command,
            _ => &spec.command,
        };
        let key = match node {
            Some((n, _)) => format!("pod.container.nodes.{n}.command"),
            None => "pod.container.command".to_owned(),
        };
        run.command = command
            .iter()
            .map(|arg| fill_container(arg, &values, &key))
            .collect::<Result<_, _>>()?;
        Ok(run.args())
    }
}

/// Names the pod's engine objects and writes their record to the private
/// directory.
fn record_pod(spec: &ContainerSpec, private_dir: &Path) -> Result<ContainerRecord, ContainerError> {
    let pod_id = private_dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("testkit-pod-"))
        .map(str::to_owned)
        .unwrap_or_else(|| crate::ids::random_id(10));
    let name = format!("testkit-{pod_id}");
    let record = ContainerRecord {
        pod_id: pod_id.clone(),
        run_id: spec.run_id.clone(),
        name: name.clone(),
        image: spec.image.clone(),
        docker: spec.docker.clone(),
        started_at: unix_now(),
        entry: spec.entry.clone(),
        nodes: spec.nodes.keys().cloned().collect(),
    };
    // Recorded before anything exists in the engine: a stop after a failed
    // boot finds it all by these labels.
    let bytes = serde_json::to_vec_pretty(&record).expect("plain data");
    let path = private_dir.join(RECORD_FILE);
    std::fs::write(&path, bytes).map_err(|source| ContainerError::Write { path, source })?;
    Ok(record)
}

/// Fails unless the engine already holds `image`.
async fn require_image(engine: &Engine, image: &str) -> Result<(), ContainerError> {
    // Any failure to inspect it means it is not to be had: testkit pulls
    // nothing, and an engine that does not answer failed before this.
    if engine.inspect_image(image).await.is_err() {
        return Err(ContainerError::NoImage {
            image: image.to_owned(),
            engine: engine.kind().engine_name(),
        });
    }
    Ok(())
}

/// `text` of the `[pod.container]` key `key`, its placeholders filled.
fn fill_container(
    text: &str,
    values: &crate::template::Values<'_>,
    key: &str,
) -> Result<String, ContainerError> {
    crate::template::fill(text, values, crate::template::verbatim).map_err(|problem| {
        ContainerError::Placeholder {
            key: key.to_owned(),
            problem: problem.to_string(),
        }
    })
}

/// Writes the container's environment (a node's: `[pod.container] env`
/// and the node's own over it), filled, to its env file; the file's path.
fn write_env_file(
    spec: &ContainerSpec,
    node: Option<(&String, &NodeSection)>,
    private_dir: &Path,
    values: &crate::template::Values<'_>,
) -> Result<PathBuf, ContainerError> {
    let mut env_file = String::new();
    let (file, entries): (String, Vec<(String, &String)>) = match node {
        None => (
            ENV_FILE.to_owned(),
            spec.env
                .iter()
                .map(|(k, v)| (format!("pod.container.env.{k}"), v))
                .collect(),
        ),
        Some((n, section)) => (
            format!("container-{n}.env"),
            section
                .env
                .iter()
                .map(|(k, v)| (format!("pod.container.nodes.{n}.env.{k}"), v))
                .collect(),
        ),
    };
    for (key, value) in entries {
        let value = fill_container(value, values, &key)?;
        if value.contains('\n') || value.contains('\r') {
            return Err(ContainerError::LineBreak { key });
        }
        let name = key.rsplit('.').next().unwrap_or_default();
        env_file.push_str(&format!("{name}={value}\n"));
    }
    let env_path = private_dir.join(file);
    crate::files::write_private(&env_path, env_file.as_bytes()).map_err(|source| {
        ContainerError::Write {
            path: env_path.clone(),
            source,
        }
    })?;
    Ok(env_path)
}

/// The labels of every engine object of the pod.
fn labels(spec: &ContainerSpec, pod_id: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (OWNER_LABEL.to_owned(), "testkit".to_owned()),
        (POD_LABEL.to_owned(), pod_id.to_owned()),
    ]);
    if let Some(run) = &spec.run_id {
        labels.insert(RUN_LABEL.to_owned(), run.clone());
        if let Some(maker) = maker_value() {
            labels.insert(MAKER_LABEL.to_owned(), maker);
        }
    }
    labels
}

/// One mount, creating its volume (labelled) if it is one.
async fn mount_of(
    engine: &Engine,
    mount: &MountSection,
    name: &str,
    labels: &BTreeMap<String, String>,
    base_dir: Option<&Path>,
) -> Result<Mount, ContainerError> {
    let (kind, source) = match (&mount.volume, &mount.source) {
        (Some(volume), _) => {
            let volume = format!("{name}-{volume}");
            engine.create_volume(&volume, labels).await?;
            (MountKind::Volume, volume)
        }
        (None, Some(source)) => {
            let path = base_dir.map_or_else(|| source.clone(), |b| b.join(source));
            let path = path
                .canonicalize()
                .map_err(|source| ContainerError::MountSource { path, source })?;
            (MountKind::Bind, path.to_string_lossy().into_owned())
        }
        (None, None) => {
            return Err(ContainerError::MountWithoutSource {
                target: mount.target.clone(),
            })
        }
    };
    let mount = Mount {
        kind,
        source,
        target: mount.target.clone(),
        read_only: mount.read_only,
    };
    if !mount.carriable() {
        return Err(ContainerError::MountComma {
            source_path: mount.source,
            target: mount.target,
        });
    }
    Ok(mount)
}

/// What the `docker` client of a pod needs from the launcher's environment:
/// which daemon, and its config (its contexts).
fn client_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = [
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "DOCKER_CERT_PATH",
        "DOCKER_TLS_VERIFY",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
    .collect();
    if !env.contains_key("DOCKER_CONFIG") {
        if let Some(home) = std::env::var_os("HOME") {
            let config = PathBuf::from(home).join(".docker");
            if config.is_dir() {
                env.insert(
                    "DOCKER_CONFIG".to_owned(),
                    config.to_string_lossy().into_owned(),
                );
            }
        }
    }
    env
}

/// Points a handle the service printed (with its own idea of its address,
/// inside the container) at the port published on the host.
pub(super) fn rewrite_printed_handle(line: &str, host_port: u16) -> String {
    let Ok(serde_json::Value::Object(mut obj)) = serde_json::from_str(line.trim()) else {
        return line.to_owned();
    };
    let scheme = obj
        .get("base_url")
        .and_then(|u| u.as_str())
        .and_then(|u| u.split_once("://"))
        .map_or("http", |(s, _)| s)
        .to_owned();
    obj.insert(
        "base_url".into(),
        format!("{scheme}://127.0.0.1:{host_port}").into(),
    );
    obj.insert("port".into(), host_port.into());
    serde_json::Value::Object(obj).to_string()
}

pub use crate::containers::EngineObjects;

/// The engine commands of a container pod that is being launched, its
/// handle's `fields` filled: its placeholders are the container's (`{port}`
/// and `{listen}` inside it) and those fields.
pub(super) async fn prepare_launch(
    spec: &ContainerSpec,
    base_dir: Option<&Path>,
    private_dir: &Path,
    host_ports: &BTreeMap<String, u16>,
    fields: &BTreeMap<String, String>,
) -> Result<Prepared, ContainerError> {
    let port = spec.port.to_string();
    let listen = format!("0.0.0.0:{port}");
    let values = crate::template::Values::new()
        .with("port", &port)
        .with("listen", &listen)
        .extend(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    prepare(spec, private_dir, base_dir, host_ports, &values).await
}

/// Stops a container pod's containers, after keeping what each node of a
/// pod of several printed (`node-<name>.log`, redacted), every start of it.
pub(super) async fn stop_keeping_node_logs(
    record: &ContainerRecord,
    logs_dir: Option<&Path>,
    grace: Duration,
) -> Result<ContainerStop, ContainerError> {
    if let (Some(logs), Some(_)) = (logs_dir, &record.entry) {
        save_node_logs(record, logs).await;
    }
    stop_pod(record, grace).await
}

/// Removes what a container pod that failed to boot left in the engine.
pub(super) async fn remove_after_failed_boot(private_dir: &Path) {
    if let Some(record) = ContainerRecord::read(private_dir) {
        let _ = stop_pod(&record, Duration::from_secs(5)).await;
    }
}

/// The [`MAKER_LABEL`] values of every container, network and volume whose
/// label `key` is exactly `value`, each once.
pub async fn makers(engine: &Engine, key: &str, value: &str) -> Result<Vec<String>, EngineError> {
    engine.label_values(key, value, MAKER_LABEL).await
}

/// Thaws every paused container of the pod `pod_id`.
async fn unpause_all(engine: &Engine, pod_id: &str) -> Result<(), EngineError> {
    let paused = engine
        .ps(
            &[Filter::label(POD_LABEL, pod_id), Filter::Status("paused")],
            false,
        )
        .await?;
    for c in paused {
        engine.unpause(&c.id).await?;
    }
    Ok(())
}

/// The running containers of the pod `pod_id`: `(id, name)`.
async fn running(engine: &Engine, pod_id: &str) -> Result<Vec<(String, String)>, EngineError> {
    let listed = engine
        .ps(
            &[Filter::label(POD_LABEL, pod_id), Filter::Status("running")],
            false,
        )
        .await?;
    Ok(listed.into_iter().map(|c| (c.id, c.name)).collect())
}

/// What stopping a container pod's engine objects did, verified by label.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ContainerStop {
    /// The pod's id (its [`POD_LABEL`]).
    pub pod_id: String,
    /// The containers that were running when the stop began.
    pub running: Vec<String>,
    /// Containers that ignored SIGTERM for the whole grace and were killed.
    pub killed_after_grace: Vec<String>,
    /// Everything removed, then listed by label and found gone.
    pub removed: Vec<String>,
    /// How long it took.
    pub duration: Duration,
}

/// Ends the containers of the pod `record` names (SIGTERM, `grace`, then
/// SIGKILL), removes them with its networks and volumes, and lists its
/// label again to prove them gone.
pub async fn stop_pod(
    record: &ContainerRecord,
    grace: Duration,
) -> Result<ContainerStop, ContainerError> {
    let began = Instant::now();
    let engine = record.engine();
    // A frozen node takes no signal until it thaws.
    unpause_all(&engine, &record.pod_id).await?;
    let running = running(&engine, &record.pod_id).await?;
    if !running.is_empty() {
        let ids: Vec<String> = running.iter().map(|(id, _)| id.clone()).collect();
        // A container that exits meanwhile makes this fail: the listing
        // below is what counts.
        let _ = engine.kill(&ids, "SIGTERM").await;
    }
    let deadline = Instant::now() + grace;
    let mut still = running.clone();
    while !still.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        still = self::running(&engine, &record.pod_id).await?;
    }
    let killed_after_grace: Vec<String> = still.iter().map(|(_, name)| name.clone()).collect();
    if !still.is_empty() {
        let ids: Vec<String> = still.iter().map(|(id, _)| id.clone()).collect();
        let _ = engine.kill(&ids, "SIGKILL").await;
    }
    let found = engine.list_by_label(POD_LABEL, &record.pod_id).await?;
    let left = engine
        .remove_by_label(&found, POD_LABEL, &record.pod_id)
        .await?;
    if !left.is_empty() {
        return Err(ContainerError::Left {
            pod_id: record.pod_id.clone(),
            left: left.describe(),
        });
    }
    // A cut whose undo never ran (its process killed, its reaper too)
    // would outlive the containers whose addresses it names.
    let mut removed = found.describe();
    for rule in remove_pod_rules(&record.pod_id).await? {
        removed.push(format!("packet-filter rule {rule}"));
    }
    Ok(ContainerStop {
        pod_id: record.pod_id.clone(),
        running: running.into_iter().map(|(_, name)| name).collect(),
        killed_after_grace,
        removed,
        duration: began.elapsed(),
    })
}

/// The comment every packet-filter rule of the pod `pod_id` carries.
pub fn rule_comment(pod_id: &str) -> String {
    format!("testkit.pod={pod_id}")
}

/// Removes every rule the pod `pod_id` left in the packet filter (a fault
/// whose undo never ran); the rules removed. Without `iptables` there are
/// none.
pub async fn remove_pod_rules(pod_id: &str) -> Result<Vec<String>, PacketFilterError> {
    let Ok(filter) = crate::containers::PacketFilter::on_host() else {
        return Ok(Vec::new());
    };
    let comment = rule_comment(pod_id);
    let mut removed = Vec::new();
    for chain in ["DOCKER-USER", "OUTPUT"] {
        for rule in filter.commented(chain, &comment).await {
            filter.remove(&rule).await?;
            removed.push(rule.describe());
        }
    }
    Ok(removed)
}

/// Writes what each node of the pod `record` names printed, every run of
/// its container (a restarted node's output included), to
/// `<logs>/node-<name>.log`, redacted. Best effort: the stop goes on.
pub async fn save_node_logs(record: &ContainerRecord, logs: &Path) {
    let engine = record.engine();
    let Ok(listed) = engine
        .containers(&[Filter::label(POD_LABEL, &record.pod_id)])
        .await
    else {
        return;
    };
    for container in listed {
        let Some(node) = container.label(NODE_LABEL).filter(|n| !n.is_empty()) else {
            continue;
        };
        let log = logs.join(format!("node-{node}.log"));
        let kept = match engine.save_logs(&container.id, &log).await {
            Ok(()) => crate::redact::keep_capped(&log, &log, crate::redact::LOG_KEEP).is_ok(),
            Err(_) => false,
        };
        // A log not kept redacted (a full disk) does not stay unredacted.
        if !kept {
            let _ = std::fs::remove_file(&log);
        }
    }
}

/// Stops and removes what the container pod whose private directory is
/// `private_dir` made in the engine, if it is one (a boot cut short before
/// its `docker run` started leaves a network, volumes, setup containers).
pub async fn stop_of_private_dir(
    private_dir: &Path,
    grace: Duration,
) -> Result<Option<ContainerStop>, ContainerError> {
    match ContainerRecord::read(private_dir) {
        Some(record) => stop_pod(&record, grace).await.map(Some),
        None => Ok(None),
    }
}

/// How a container pod's container ended, when its `docker run` exited
/// without being asked to: `Ok(description)` when someone outside the run
/// stopped or removed it, `Err(description)` when it exited on its own (a
/// crash). `None` for a process pod.
pub async fn fate(private_dir: &Path) -> Option<Result<String, String>> {
    let record = ContainerRecord::read(private_dir)?;
    let engine = record.engine();
    let id = match pod_container_id(&engine, &record).await {
        Ok(Some(id)) => id,
        Ok(None) => return Some(Ok(removed_from_outside(&record))),
        Err(e) => {
            return Some(Err(format!(
                "its container could not be inspected: {}",
                error_chain(&e)
            )))
        }
    };
    let (code, oom) = exit_state(&engine, &id).await;
    let signals = kill_signals(&engine, &record, &id).await;
    // `docker rm -f` kills first and removes after: its `docker run` may
    // exit between the two, so a killed container gets a moment to vanish.
    if !signals.is_empty() && vanishes(&engine, &id, Duration::from_secs(3)).await {
        return Some(Ok(removed_from_outside(&record)));
    }
    if !signals.is_empty() {
        return Some(Ok(format!(
            "its container {} was stopped from outside the run (`docker stop` or `docker kill`: \
             signal {}), exit code {code}",
            record.name,
            signals.join(", then ")
        )));
    }
    Some(Err(format!(
        "its container {} exited with code {code}{}",
        record.name,
        if oom {
            " (killed for running out of memory)"
        } else {
            ""
        }
    )))
}

fn removed_from_outside(record: &ContainerRecord) -> String {
    format!(
        "its container {} was removed from outside the run (`docker rm -f`)",
        record.name
    )
}

/// The id of the pod's own container (not a setup one's), or `None` when
/// it is gone.
async fn pod_container_id(
    engine: &Engine,
    record: &ContainerRecord,
) -> Result<Option<String>, EngineError> {
    let mut filters = vec![
        Filter::label(POD_LABEL, &record.pod_id),
        Filter::label(ROLE_LABEL, "pod"),
    ];
    if let Some(entry) = &record.entry {
        filters.push(Filter::label(NODE_LABEL, entry));
    }
    let listed = engine.ps(&filters, true).await?;
    Ok(listed.into_iter().next().map(|c| c.id))
}

/// A container's exit code (`?` if unknown) and whether it ran out of
/// memory.
async fn exit_state(engine: &Engine, id: &str) -> (String, bool) {
    match engine.inspect_containers(&[id.to_owned()]).await {
        Ok(found) => match found.first() {
            Some(c) => (c.state.exit_code.to_string(), c.state.oom_killed),
            None => ("?".to_owned(), false),
        },
        Err(_) => ("?".to_owned(), false),
    }
}

/// The signals sent to a container through the engine since the pod
/// started, in order.
async fn kill_signals(engine: &Engine, record: &ContainerRecord, id: &str) -> Vec<String> {
    // The daemon records every signal sent through its API: a container
    // that died of its own accord has none.
    let until = unix_now() + 1;
    let events = engine
        .events(
            record.started_at.saturating_sub(1),
            until,
            &[Filter::Container(id.to_owned()), Filter::Event("kill")],
        )
        .await
        .unwrap_or_default();
    events
        .into_iter()
        .filter_map(|e| e.actor.attributes.get("signal").cloned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether the container `id` is gone within `limit`.
async fn vanishes(engine: &Engine, id: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let still = engine.ps(&[Filter::Id(id.to_owned())], true).await;
        if still.as_ref().is_ok_and(Vec::is_empty) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A container's state as the engine has it (`running`, `paused`,
/// `exited (code 137)`) and its last `tail` lines of output, both streams
/// in order: `node NAME: STATE; its last N lines:` and the lines indented,
/// what could not be read said. One paragraph of a hang report.
pub(super) async fn describe_container(
    engine: &Engine,
    name: &str,
    id: &str,
    tail: usize,
) -> String {
    let state = match engine.inspect_containers(&[id.to_owned()]).await {
        Ok(found) => match found.first() {
            Some(c) if c.state.paused => "paused".to_owned(),
            Some(c) if !c.state.running => {
                format!("{} (code {})", c.state.status, c.state.exit_code)
            }
            Some(c) => c.state.status.clone(),
            None => "gone".to_owned(),
        },
        Err(e) => format!("unknown ({})", crate::errors::error_chain(&e)),
    };
    let logs = match engine.logs(id, Some(tail)).await {
        Ok(logs) => {
            let mut lines: Vec<&str> = logs.stdout.lines().chain(logs.stderr.lines()).collect();
            // Each line starts with its timestamp: in order, both streams.
            lines.sort_unstable();
            let from = lines.len().saturating_sub(tail);
            lines[from..]
                .iter()
                .map(|l| format!("    {}", super::process::capped(l)))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Err(e) => format!(
            "    (its output could not be read: {})",
            crate::errors::error_chain(&e)
        ),
    };
    format!("node {name}: {state}; its last {tail} lines:\n{logs}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_handle_is_pointed_at_the_published_port() {
        let line =
            r#"{"name":"sandboxd-1","base_url":"http://0.0.0.0:8080","port":8080,"token":"t"}"#;
        let v: serde_json::Value =
            serde_json::from_str(&rewrite_printed_handle(line, 41234)).unwrap();
        assert_eq!(v["base_url"], "http://127.0.0.1:41234");
        assert_eq!(v["port"], 41234);
        assert_eq!(v["token"], "t");
        assert_eq!(rewrite_printed_handle("not json", 1), "not json");
    }
}
