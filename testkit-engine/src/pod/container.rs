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
//! The `docker` CLI rather than an API client: the engine is compiled into
//! every test binary of every suite, and the CLI costs them nothing to
//! build; it also honours the user's `DOCKER_HOST` and contexts as they do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::{ContainerSection, MountSection, NodeSection};

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
/// The longest any one `docker` command may take before it counts as hung.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(60);

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
}

/// The `docker run` that is a container pod's process, and the setup
/// commands before it.
pub(super) struct Prepared {
    pub(super) docker: PathBuf,
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
) -> Result<Prepared, String> {
    let record = record_pod(spec, private_dir)?;
    let name = record.name.clone();
    let docker = Docker(spec.docker.clone());
    require_image(&docker, &spec.image).await?;
    let fill = |text: &str, key: &str| fill_container(text, values, key);
    let label_args = label_args(spec, &record.pod_id);

    let network = name.clone();
    let mut create = vec!["network", "create"];
    create.extend(label_args.iter().map(String::as_str));
    create.push(&network);
    docker
        .run(&create)
        .await
        .map_err(|e| format!("cannot create the pod's network {network}: {e}"))?;

    let mut mount_args = Vec::new();
    for mount in &spec.mounts {
        mount_args.extend(mount_arg(&docker, mount, &name, &label_args, base_dir).await?);
    }
    let run = DockerRun {
        label_args,
        network: network.clone(),
        env_path: write_env_file(spec, None, private_dir, values)?,
        mount_args,
    };
    let mut setup_args = Vec::new();
    for (i, command) in spec.setup.iter().enumerate() {
        let mut args = run.common("setup");
        args.extend([
            "--rm".to_owned(),
            "--name".to_owned(),
            format!("{name}-setup-{i}"),
        ]);
        args.push(spec.image.clone());
        for arg in command {
            args.push(fill(arg, "pod.container.setup")?);
        }
        setup_args.push(args);
    }
    let node_run = NodeRun {
        spec,
        run: &run,
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
            events_args(&record.pod_id, record.started_at)
        }
        None => node_run.args(None, false)?,
    };
    Ok(Prepared {
        docker: spec.docker.clone(),
        run_args,
        setup_args,
        client_env: client_env(),
        node_args,
        network,
        pod_id: record.pod_id,
    })
}

/// `docker events` of the containers of the pod `pod_id` since `since`
/// (seconds since the epoch: the nodes start before it does): one line
/// each, time, node and what happened.
fn events_args(pod_id: &str, since: u64) -> Vec<String> {
    [
        "events",
        "--since",
        &since.saturating_sub(1).to_string(),
        "--filter",
        &format!("label={POD_LABEL}={pod_id}"),
        "--filter",
        "type=container",
        "--format",
        &format!("{{{{.Time}}}} {{{{index .Actor.Attributes \"{NODE_LABEL}\"}}}} {{{{.Action}}}}"),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// What the `docker run` of each of a pod's nodes is made of.
struct NodeRun<'a> {
    spec: &'a ContainerSpec,
    run: &'a DockerRun,
    private_dir: &'a Path,
    pod_name: &'a str,
    host_ports: &'a BTreeMap<String, u16>,
    values: &'a crate::template::Values<'a>,
}

impl NodeRun<'_> {
    /// The `docker run` of `node` (the only container when `None`),
    /// detached or not: its name, alias on the network, published port,
    /// environment and command.
    fn args(
        &self,
        node: Option<(&String, &NodeSection)>,
        detach: bool,
    ) -> Result<Vec<String>, String> {
        let spec = self.spec;
        let node_name = node.map_or("", |(n, _)| n.as_str());
        let values = self.values.clone().with("node", node_name);
        let mut args = self.run.common("pod");
        let (name, host_port) = match node {
            Some((n, section)) => {
                let env_path = write_env_file(spec, Some((n, section)), self.private_dir, &values)?;
                args.extend([
                    "--env-file".to_owned(),
                    env_path.to_string_lossy().into_owned(),
                    "--label".to_owned(),
                    format!("{NODE_LABEL}={n}"),
                    "--network-alias".to_owned(),
                    n.clone(),
                    "--hostname".to_owned(),
                    n.clone(),
                ]);
                (
                    format!("{}-{n}", self.pod_name),
                    self.host_ports[n.as_str()],
                )
            }
            None => (self.pod_name.to_owned(), self.host_ports[""]),
        };
        if detach {
            args.push("--detach".to_owned());
        }
        args.extend([
            "--name".to_owned(),
            name,
            "--publish".to_owned(),
            format!("127.0.0.1:{host_port}:{}", spec.port),
            spec.image.clone(),
        ]);
        let command = match node {
            Some((_, section)) if !section.command.is_empty() => &section.command,
            _ => &spec.command,
        };
        let key = match node {
            Some((n, _)) => format!("pod.container.nodes.{n}.command"),
            None => "pod.container.command".to_owned(),
        };
        for arg in command {
            args.push(fill_container(arg, &values, &key)?);
        }
        Ok(args)
    }
}

/// Names the pod's engine objects and writes their record to the private
/// directory.
fn record_pod(spec: &ContainerSpec, private_dir: &Path) -> Result<ContainerRecord, String> {
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
    let bytes = serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(private_dir.join(RECORD_FILE), bytes).map_err(|e| {
        format!(
            "cannot write {}: {e}",
            private_dir.join(RECORD_FILE).display()
        )
    })?;
    Ok(record)
}

/// Fails unless the engine already holds `image`.
async fn require_image(docker: &Docker, image: &str) -> Result<(), String> {
    if docker
        .run(&["image", "inspect", "--format", "{{.Id}}", image])
        .await
        .is_err()
    {
        return Err(format!(
            "the Docker Engine holds no image `{}`, and testkit pulls nothing: build it \
             (`docker build -t {} …`), or give `[pod.container] build` a context dir",
            image, image
        ));
    }
    Ok(())
}

/// `text` of the `[pod.container]` key `key`, its placeholders filled.
fn fill_container(
    text: &str,
    values: &crate::template::Values<'_>,
    key: &str,
) -> Result<String, String> {
    crate::template::fill(text, values, crate::template::verbatim)
        .map_err(|p| format!("invalid [pod.container] in testkit.toml: {key}: {p}"))
}

/// Writes the container's environment (a node's: `[pod.container] env`
/// and the node's own over it), filled, to its env file; the file's path.
fn write_env_file(
    spec: &ContainerSpec,
    node: Option<(&String, &NodeSection)>,
    private_dir: &Path,
    values: &crate::template::Values<'_>,
) -> Result<PathBuf, String> {
    let mut env_file = String::new();
    let (file, entries): (String, Vec<(String, &String)>) = match node {
        None => (
            ENV_FILE.to_owned(),
            spec.env
                .iter()
                .map(|(k, v)| (format!("pod.container.env.{k}"), v))
                .collect(),
        ),
        // The pod's env file comes first on the command line; a node's
        // entries, read after it, win.
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
            return Err(format!(
                "{key}: its value holds a line break, which an env file cannot carry"
            ));
        }
        let name = key.rsplit('.').next().unwrap_or_default();
        env_file.push_str(&format!("{name}={value}\n"));
    }
    let env_path = private_dir.join(file);
    crate::files::write_private(&env_path, env_file.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", env_path.display()))?;
    Ok(env_path)
}

/// `--label` arguments for every engine object of the pod.
fn label_args(spec: &ContainerSpec, pod_id: &str) -> Vec<String> {
    let mut labels = vec![
        format!("{OWNER_LABEL}=testkit"),
        format!("{POD_LABEL}={pod_id}"),
    ];
    if let Some(run) = &spec.run_id {
        labels.push(format!("{RUN_LABEL}={run}"));
        if let Some(maker) = maker_value() {
            labels.push(format!("{MAKER_LABEL}={maker}"));
        }
    }
    labels
        .iter()
        .flat_map(|l| ["--label".to_owned(), l.clone()])
        .collect()
}

/// The `--mount` arguments of one mount, creating its volume (labelled)
/// if it is one.
async fn mount_arg(
    docker: &Docker,
    mount: &MountSection,
    name: &str,
    label_args: &[String],
    base_dir: Option<&Path>,
) -> Result<[String; 2], String> {
    let (kind, source) = match (&mount.volume, &mount.source) {
        (Some(volume), _) => {
            let volume = format!("{name}-{volume}");
            let mut create = vec!["volume", "create"];
            create.extend(label_args.iter().map(String::as_str));
            create.push(&volume);
            docker
                .run(&create)
                .await
                .map_err(|e| format!("cannot create the pod's volume {volume}: {e}"))?;
            ("volume", volume)
        }
        (None, Some(source)) => {
            let path = base_dir.map_or_else(|| source.clone(), |b| b.join(source));
            let path = path
                .canonicalize()
                .map_err(|e| format!("pod.container.mounts: {}: {e}", path.display()))?;
            ("bind", path.to_string_lossy().into_owned())
        }
        (None, None) => {
            return Err(format!(
                "pod.container.mounts: the entry for {} has neither `volume` nor `source`",
                mount.target
            ))
        }
    };
    if source.contains(',') || mount.target.contains(',') {
        return Err(format!(
            "pod.container.mounts: {source} or {} holds a `,`, which `docker --mount` cannot carry",
            mount.target
        ));
    }
    let ro = if mount.read_only { ",readonly" } else { "" };
    Ok([
        "--mount".to_owned(),
        format!("type={kind},source={source},target={}{ro}", mount.target),
    ])
}

/// The `docker run` arguments shared by the pod and its setup containers.
struct DockerRun {
    label_args: Vec<String>,
    network: String,
    env_path: PathBuf,
    mount_args: Vec<String>,
}

impl DockerRun {
    fn common(&self, role: &str) -> Vec<String> {
        let mut args = vec!["run".to_owned(), "--pull".to_owned(), "never".to_owned()];
        args.extend(self.label_args.iter().cloned());
        args.extend([
            "--label".to_owned(),
            format!("{ROLE_LABEL}={role}"),
            "--network".to_owned(),
            self.network.clone(),
            "--env-file".to_owned(),
            self.env_path.to_string_lossy().into_owned(),
        ]);
        args.extend(self.mount_args.iter().cloned());
        args
    }
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

/// Engine objects found by label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct EngineObjects {
    /// Containers: `name (short id, state)`.
    pub containers: Vec<String>,
    /// Networks, by name.
    pub networks: Vec<String>,
    /// Volumes, by name.
    pub volumes: Vec<String>,
    container_ids: Vec<String>,
}

impl EngineObjects {
    /// Nothing at all.
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.networks.is_empty() && self.volumes.is_empty()
    }

    /// These objects but those of `spare`.
    pub fn without(self, spare: &EngineObjects) -> EngineObjects {
        let (container_ids, containers) = self
            .container_ids
            .into_iter()
            .zip(self.containers)
            .filter(|(id, _)| !spare.container_ids.contains(id))
            .unzip();
        EngineObjects {
            containers,
            container_ids,
            networks: self
                .networks
                .into_iter()
                .filter(|n| !spare.networks.contains(n))
                .collect(),
            volumes: self
                .volumes
                .into_iter()
                .filter(|v| !spare.volumes.contains(v))
                .collect(),
        }
    }

    /// Each object, kind first: `container testkit-x (1a2b3c, running)`.
    pub fn describe(&self) -> Vec<String> {
        let kinds = [
            ("container", &self.containers),
            ("network", &self.networks),
            ("volume", &self.volumes),
        ];
        kinds
            .iter()
            .flat_map(|(kind, names)| names.iter().map(move |n| format!("{kind} {n}")))
            .collect()
    }
}

/// The `docker` CLI, each command bounded in time.
#[derive(Debug, Clone)]
pub struct Docker(pub PathBuf);

impl Docker {
    /// `docker` on PATH.
    pub fn on_path() -> Result<Docker, String> {
        crate::process::find_program("docker", None, None)
            .map(Docker)
            .ok_or_else(|| {
                "no `docker` on PATH: install the Docker CLI (and run a Docker Engine) to run \
                 container pods"
                    .to_owned()
            })
    }

    /// Runs `docker args…`; its trimmed stdout, or what went wrong.
    pub async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = tokio::process::Command::new(&self.0);
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let shown = format!("docker {}", args.join(" "));
        let out = match tokio::time::timeout(DOCKER_TIMEOUT, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(format!("`{shown}` could not start: {e}")),
            Err(_) => {
                return Err(format!(
                    "`{shown}` did not answer within {}: is the Docker Engine up?",
                    humantime::format_duration(DOCKER_TIMEOUT)
                ))
            }
        };
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "`{shown}` failed ({}): {}",
                out.status,
                crate::redact(err.trim())
            ))
        }
    }

    /// Every container, network and volume whose label `key` is exactly `value`.
    pub async fn list(&self, key: &str, value: &str) -> Result<EngineObjects, String> {
        let filter = format!("label={key}={value}");
        let containers = self
            .run(&[
                "ps",
                "-a",
                "--no-trunc",
                "--filter",
                &filter,
                "--format",
                "{{.ID}} {{.Names}} {{.State}}",
            ])
            .await?;
        let networks = self
            .run(&[
                "network",
                "ls",
                "--filter",
                &filter,
                "--format",
                "{{.Name}}",
            ])
            .await?;
        let volumes = self
            .run(&["volume", "ls", "--filter", &filter, "--format", "{{.Name}}"])
            .await?;
        let mut found = EngineObjects::default();
        for line in containers.lines() {
            let mut words = line.split_whitespace();
            if let (Some(id), Some(name), state) = (words.next(), words.next(), words.next()) {
                found.container_ids.push(id.to_owned());
                found.containers.push(format!(
                    "{name} ({}, {})",
                    &id[..id.len().min(12)],
                    state.unwrap_or("?")
                ));
            }
        }
        found.networks = networks.lines().map(str::to_owned).collect();
        found.volumes = volumes.lines().map(str::to_owned).collect();
        Ok(found)
    }

    /// The [`MAKER_LABEL`] values of every container, network and volume
    /// whose label `key` is exactly `value`, each once.
    pub async fn makers(&self, key: &str, value: &str) -> Result<Vec<String>, String> {
        let filter = format!("label={key}={value}");
        let format = format!("{{{{.Label \"{MAKER_LABEL}\"}}}}");
        let mut makers = Vec::new();
        for list in [
            &["ps", "-a"][..],
            &["network", "ls"][..],
            &["volume", "ls"][..],
        ] {
            let mut args = list.to_vec();
            args.extend(["--filter", &filter, "--format", &format]);
            makers.extend(
                self.run(&args)
                    .await?
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
        }
        makers.sort();
        makers.dedup();
        Ok(makers)
    }

    /// Removes what `objects` names (containers forcibly, with their
    /// anonymous volumes), then lists `key = value` again: what is still
    /// there, or why it could not be listed.
    pub async fn remove(
        &self,
        objects: &EngineObjects,
        key: &str,
        value: &str,
    ) -> Result<EngineObjects, String> {
        let mut problems = Vec::new();
        if !objects.container_ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend(objects.container_ids.iter().map(String::as_str));
            if let Err(e) = self.run(&args).await {
                problems.push(e);
            }
        }
        if !objects.networks.is_empty() {
            let mut args = vec!["network", "rm"];
            args.extend(objects.networks.iter().map(String::as_str));
            if let Err(e) = self.run(&args).await {
                problems.push(e);
            }
        }
        if !objects.volumes.is_empty() {
            let mut args = vec!["volume", "rm", "-f"];
            args.extend(objects.volumes.iter().map(String::as_str));
            if let Err(e) = self.run(&args).await {
                problems.push(e);
            }
        }
        let left = self.list(key, value).await?;
        if !left.is_empty() && !problems.is_empty() {
            return Err(format!(
                "still there: {}; removing said: {}",
                left.describe().join(", "),
                problems.join("; ")
            ));
        }
        Ok(left)
    }

    /// Thaws every paused container of the pod `pod_id`.
    async fn unpause_all(&self, pod_id: &str) -> Result<(), String> {
        let filter = format!("label={POD_LABEL}={pod_id}");
        let paused = self
            .run(&[
                "ps",
                "--quiet",
                "--filter",
                &filter,
                "--filter",
                "status=paused",
            ])
            .await?;
        for id in paused.split_whitespace() {
            self.run(&["unpause", id]).await?;
        }
        Ok(())
    }

    async fn running(&self, key: &str, value: &str) -> Result<Vec<(String, String)>, String> {
        let out = self
            .run(&[
                "ps",
                "--no-trunc",
                "--filter",
                &format!("label={key}={value}"),
                "--filter",
                "status=running",
                "--format",
                "{{.ID}} {{.Names}}",
            ])
            .await?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(id, name)| (id.to_owned(), name.to_owned()))
            .collect())
    }
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
pub async fn stop_pod(record: &ContainerRecord, grace: Duration) -> Result<ContainerStop, String> {
    let began = Instant::now();
    let docker = Docker(record.docker.clone());
    // A frozen node takes no signal until it thaws.
    docker.unpause_all(&record.pod_id).await?;
    let running = docker.running(POD_LABEL, &record.pod_id).await?;
    let ids: Vec<&str> = running.iter().map(|(id, _)| id.as_str()).collect();
    if !ids.is_empty() {
        let mut args = vec!["kill", "--signal", "SIGTERM"];
        args.extend(&ids);
        // A container that exits meanwhile makes this fail: the listing
        // below is what counts.
        let _ = docker.run(&args).await;
    }
    let deadline = Instant::now() + grace;
    let mut still = running.clone();
    while !still.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        still = docker.running(POD_LABEL, &record.pod_id).await?;
    }
    let killed_after_grace: Vec<String> = still.iter().map(|(_, name)| name.clone()).collect();
    if !still.is_empty() {
        let mut args = vec!["kill", "--signal", "SIGKILL"];
        args.extend(still.iter().map(|(id, _)| id.as_str()));
        let _ = docker.run(&args).await;
    }
    let found = docker.list(POD_LABEL, &record.pod_id).await?;
    let left = docker.remove(&found, POD_LABEL, &record.pod_id).await?;
    if !left.is_empty() {
        return Err(format!(
            "still in the Docker Engine after removal, listed by label {POD_LABEL}={}: {}",
            record.pod_id,
            left.describe().join(", ")
        ));
    }
    // A cut whose undo never ran (its process killed, its reaper too)
    // would outlive the containers whose addresses it names.
    let mut removed = found.describe();
    for rule in super::fault::remove_pod_rules(&record.pod_id).await? {
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

/// Writes what each node of the pod `record` names printed, every run of
/// its container (a restarted node's output included), to
/// `<logs>/node-<name>.log`, redacted. Best effort: the stop goes on.
pub async fn save_node_logs(record: &ContainerRecord, logs: &Path) {
    let docker = Docker(record.docker.clone());
    let filter = format!("label={POD_LABEL}={}", record.pod_id);
    let format = format!("{{{{.ID}}}} {{{{.Label \"{NODE_LABEL}\"}}}}");
    let Ok(listed) = docker
        .run(&["ps", "--all", "--filter", &filter, "--format", &format])
        .await
    else {
        return;
    };
    for (id, node) in listed.lines().filter_map(|l| l.split_once(' ')) {
        if node.is_empty() {
            continue;
        }
        let out = tokio::process::Command::new(&docker.0)
            .args(["logs", "--timestamps", id])
            .kill_on_drop(true)
            .output();
        let Ok(Ok(out)) = tokio::time::timeout(DOCKER_TIMEOUT, out).await else {
            continue;
        };
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::write(
            logs.join(format!("node-{node}.log")),
            crate::redact(&text).as_bytes(),
        );
    }
}

/// Stops and removes what the container pod whose private directory is
/// `private_dir` made in the engine, if it is one (a boot cut short before
/// its `docker run` started leaves a network, volumes, setup containers).
pub async fn stop_of_private_dir(
    private_dir: &Path,
    grace: Duration,
) -> Result<Option<ContainerStop>, String> {
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
    let docker = Docker(record.docker.clone());
    let id = match pod_container_id(&docker, &record).await {
        Ok(Some(id)) => id,
        Ok(None) => return Some(Ok(removed_from_outside(&record))),
        Err(e) => return Some(Err(format!("its container could not be inspected: {e}"))),
    };
    let (code, oom) = exit_state(&docker, &id).await;
    let signals = kill_signals(&docker, &record, &id).await;
    // `docker rm -f` kills first and removes after: its `docker run` may
    // exit between the two, so a killed container gets a moment to vanish.
    if !signals.is_empty() && vanishes(&docker, &id, Duration::from_secs(3)).await {
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
    docker: &Docker,
    record: &ContainerRecord,
) -> Result<Option<String>, String> {
    let filter = format!("label={POD_LABEL}={}", record.pod_id);
    let role = format!("label={ROLE_LABEL}=pod");
    let mut args = vec![
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &filter,
        "--filter",
        &role,
    ];
    let entry = record
        .entry
        .as_ref()
        .map(|e| format!("label={NODE_LABEL}={e}"));
    if let Some(entry) = &entry {
        args.extend(["--filter", entry]);
    }
    args.extend(["--format", "{{.ID}}"]);
    let listed = docker.run(&args).await?;
    Ok(listed.lines().next().map(str::to_owned))
}

/// A container's exit code (`?` if unknown) and whether it ran out of
/// memory.
async fn exit_state(docker: &Docker, id: &str) -> (String, bool) {
    let state = docker
        .run(&[
            "inspect",
            "--format",
            "{{.State.ExitCode}} {{.State.OOMKilled}}",
            id,
        ])
        .await
        .unwrap_or_default();
    let mut words = state.split_whitespace();
    let code = words.next().unwrap_or("?").to_owned();
    let oom = words.next() == Some("true");
    (code, oom)
}

/// The signals sent to a container through the engine since the pod
/// started, in order.
async fn kill_signals(docker: &Docker, record: &ContainerRecord, id: &str) -> Vec<String> {
    // The daemon records every signal sent through its API: a container
    // that died of its own accord has none.
    let until = unix_now() + 1;
    let events = docker
        .run(&[
            "events",
            "--since",
            &record.started_at.saturating_sub(1).to_string(),
            "--until",
            &until.to_string(),
            "--filter",
            &format!("container={id}"),
            "--filter",
            "event=kill",
            "--format",
            "{{index .Actor.Attributes \"signal\"}}",
        ])
        .await
        .unwrap_or_default();
    events
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether the container `id` is gone within `limit`.
async fn vanishes(docker: &Docker, id: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let still = docker
            .run(&[
                "ps",
                "-a",
                "-q",
                "--no-trunc",
                "--filter",
                &format!("id={id}"),
            ])
            .await;
        if still.as_deref().is_ok_and(str::is_empty) {
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
