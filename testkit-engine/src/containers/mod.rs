//! The container engine: every call testkit makes to it, and to the packet
//! filter of its host, goes through here. Nothing above this module spells
//! an argument of the engine's CLI or reads its output.
//!
//! Above it, pods speak in typed operations ([`Engine::create_network`],
//! [`Engine::stop`], [`Engine::containers`], …) that fail with an
//! [`EngineError`] naming the operation and its arguments, the cause in its
//! `source`. What the engine says of its objects is its JSON
//! (`--format '{{json .}}'`, `inspect`) parsed into the types of
//! [`objects`], dates included.
//!
//! The CLI rather than an API client: the engine is compiled into every
//! test binary of every suite, and the CLI costs them nothing to build; it
//! honours the user's `DOCKER_HOST` and contexts as they do; and Podman's
//! CLI is Docker's, so a second engine is a second [`EngineKind`] (its
//! program, its names) rather than a second client.
//!
//! Labels are the caller's: this module takes them as keys and values and
//! knows none of testkit's. It imports nothing of the pods above it.
//!
//! Two commands live as long as a pod and belong to its process group: its
//! attached `run` (the pod's process) and the `events` its nodes are
//! watched by. For those, this module builds the command
//! ([`Engine::command`], [`Engine::events_command`]) and the pod spawns it.

mod error;
mod netns;
pub mod objects;
mod packet_filter;
mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;

pub use error::{port_taken, CommandError, EngineError, PortTaken};
pub use netns::{Netns, NetnsError, RootQdisc};
pub use objects::{ContainerDetails, ContainerSummary, Event, Logs, NetworkDetails, VolumeDetails};
pub use packet_filter::{IptablesError, PacketFilter, PacketFilterError, Rule};
use run::label_args;
pub use run::{Mount, MountKind, RunOptions};

/// The longest any one engine command may take before it counts as hung.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Which engine a CLI drives: the same commands, another program and
/// other names in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineKind {
    /// The Docker Engine, through `docker`.
    Docker,
    /// Podman, through `podman` (whose CLI is Docker's).
    Podman,
}

impl EngineKind {
    /// The program's name on PATH.
    pub fn program(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// The engine, for messages: `Docker Engine`, `Podman`.
    pub fn engine_name(self) -> &'static str {
        match self {
            EngineKind::Docker => "Docker Engine",
            EngineKind::Podman => "Podman",
        }
    }

    fn cli_name(self) -> &'static str {
        match self {
            EngineKind::Docker => "Docker CLI",
            EngineKind::Podman => "Podman CLI",
        }
    }

    /// The kind whose CLI `program` is: Podman's when its file is named
    /// so, Docker's otherwise.
    pub fn of_program(program: &Path) -> EngineKind {
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if name.starts_with("podman") {
            EngineKind::Podman
        } else {
            EngineKind::Docker
        }
    }
}

/// Which objects a listing is of: the CLI's `--filter`s, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Filter {
    /// Those whose label `key` is exactly `value`.
    Label(String, String),
    /// Those that have the label `key`, whatever its value.
    HasLabel(String),
    /// Containers in this state: `running`, `paused`, …
    Status(&'static str),
    /// The container with this id.
    Id(String),
    /// Events of this kind of object: `container`.
    Type(&'static str),
    /// Events of this action: `kill`, `die`, …
    Event(&'static str),
    /// Events of this container.
    Container(String),
}

impl Filter {
    /// Those whose label `key` is exactly `value`.
    pub fn label(key: &str, value: &str) -> Filter {
        Filter::Label(key.to_owned(), value.to_owned())
    }

    fn arg(&self) -> String {
        match self {
            Filter::Label(k, v) => format!("label={k}={v}"),
            Filter::HasLabel(k) => format!("label={k}"),
            Filter::Status(s) => format!("status={s}"),
            Filter::Id(id) => format!("id={id}"),
            Filter::Type(t) => format!("type={t}"),
            Filter::Event(e) => format!("event={e}"),
            Filter::Container(c) => format!("container={c}"),
        }
    }
}

fn filter_args(filters: &[Filter]) -> Vec<String> {
    filters
        .iter()
        .flat_map(|f| ["--filter".to_owned(), f.arg()])
        .collect()
}

fn shown_filters(filters: &[Filter]) -> String {
    filters
        .iter()
        .map(|f| format!("--filter {}", f.arg()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `<kind> ls` with `filters`, a line of JSON per object.
fn ls_args(kind: &str, filters: &[Filter]) -> Vec<String> {
    let mut args = vec![kind.to_owned(), "ls".to_owned()];
    args.extend(filter_args(filters));
    args.extend(["--format".to_owned(), "{{json .}}".to_owned()]);
    args
}

/// A network or a volume as `ls --format '{{json .}}'` lists it: its name.
#[derive(serde::Deserialize)]
struct Named {
    #[serde(rename = "Name")]
    name: String,
}

/// A container engine's CLI, each command bounded in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    kind: EngineKind,
    program: PathBuf,
}

impl Engine {
    /// The CLI `program`, of the engine its name says.
    pub fn new(program: PathBuf) -> Engine {
        Engine {
            kind: EngineKind::of_program(&program),
            program,
        }
    }

    /// The CLI of `kind` on PATH.
    pub fn on_path(kind: EngineKind) -> Result<Engine, EngineError> {
        crate::process::find_program(kind.program(), None, None)
            .map(|program| Engine { kind, program })
            .ok_or(EngineError::NotFound {
                program: kind.program(),
                cli: kind.cli_name(),
                engine: kind.engine_name(),
            })
    }

    /// Which engine it is.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The CLI's program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The CLI, its arguments to come, not started: for the commands that
    /// belong to a pod's process group (its attached `run`, its setup, its
    /// nodes' starts), which the pod spawns in its own environment.
    pub fn command(&self) -> tokio::process::Command {
        tokio::process::Command::new(&self.program)
    }

    /// The server's version: proves the engine answers.
    pub async fn server_version(&self) -> Result<String, EngineError> {
        self.run(&["version", "--format", "{{.Server.Version}}"])
            .await
            .map_err(|source| EngineError::Version {
                engine: self.kind.engine_name(),
                source,
            })
    }

    /// Fails unless the engine holds `image`.
    pub async fn inspect_image(&self, image: &str) -> Result<(), EngineError> {
        self.run(&["image", "inspect", "--format", "{{.Id}}", image])
            .await
            .map(drop)
            .map_err(|source| EngineError::InspectImage {
                image: image.to_owned(),
                source,
            })
    }

    /// Builds the image of `context` (its `dockerfile`) as `tag`, with
    /// `labels`, its output appended to `log`.
    pub async fn build(
        &self,
        context: &Path,
        dockerfile: &Path,
        tag: &str,
        labels: &BTreeMap<String, String>,
        log: &Path,
    ) -> Result<(), EngineError> {
        let mut args = vec!["build".to_owned(), "--quiet".to_owned()];
        args.extend(label_args(labels));
        args.extend([
            "--tag".to_owned(),
            tag.to_owned(),
            "--file".to_owned(),
            dockerfile.display().to_string(),
            context.display().to_string(),
        ]);
        let shown = self.shown(&args);
        let built = async {
            let open = || {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
            };
            let spawn = |source| CommandError::Spawn {
                shown: shown.clone(),
                source,
            };
            let (out, err) = (open().map_err(spawn)?, open().map_err(spawn)?);
            let mut cmd = self.command();
            cmd.args(&args)
                .current_dir(context)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .kill_on_drop(true);
            let status = cmd.status().await.map_err(spawn)?;
            if status.success() {
                Ok(())
            } else {
                Err(CommandError::Failed {
                    shown: shown.clone(),
                    status,
                    stderr: "see the build's log".to_owned(),
                })
            }
        };
        built.await.map_err(|source| EngineError::Build {
            tag: tag.to_owned(),
            log: log.to_owned(),
            source,
        })
    }

    /// Creates the network `name`, with `labels`.
    pub async fn create_network(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        self.create("network", name, labels)
            .await
            .map_err(|source| EngineError::CreateNetwork {
                name: name.to_owned(),
                source,
            })
    }

    /// Creates the volume `name`, with `labels`.
    pub async fn create_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        self.create("volume", name, labels)
            .await
            .map_err(|source| EngineError::CreateVolume {
                name: name.to_owned(),
                source,
            })
    }

    /// Creates the volume `name`, with `labels`: a tmpfs of `size_mib` MiB
    /// (the `local` driver's), mounted when a container first uses it and
    /// emptied when the last one stops.
    pub async fn create_tmpfs_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        size_mib: u64,
    ) -> Result<(), EngineError> {
        let mut args = vec!["volume".to_owned(), "create".to_owned()];
        args.extend(label_args(labels));
        let size = format!("o=size={size_mib}m");
        for opt in [
            "--driver",
            "local",
            "--opt",
            "type=tmpfs",
            "--opt",
            "device=tmpfs",
            "--opt",
            &size,
        ] {
            args.push(opt.to_owned());
        }
        args.push(name.to_owned());
        self.run(&args)
            .await
            .map(drop)
            .map_err(|source| EngineError::CreateVolume {
                name: name.to_owned(),
                source,
            })
    }

    /// `<kind> create --label … name`: a network or a volume.
    async fn create(
        &self,
        kind: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), CommandError> {
        let mut args = vec![kind.to_owned(), "create".to_owned()];
        args.extend(label_args(labels));
        args.push(name.to_owned());
        self.run(&args).await.map(drop)
    }

    /// The containers that pass `filters` (stopped ones too when `all`),
    /// as `ps` lists them.
    pub async fn ps(
        &self,
        filters: &[Filter],
        all: bool,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        let mut args = vec!["ps".to_owned(), "--no-trunc".to_owned()];
        if all {
            args.push("--all".to_owned());
        }
        args.extend(filter_args(filters));
        args.extend(["--format".to_owned(), "{{json .}}".to_owned()]);
        self.json_lines(&args)
            .await
            .map_err(|source| EngineError::ListContainers {
                filters: shown_filters(filters),
                source,
            })
    }

    /// The containers that pass `filters`, stopped ones too, as `inspect`
    /// says; one removed meanwhile is left out.
    pub async fn containers(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<ContainerDetails>, EngineError> {
        let ids: Vec<String> = self
            .ps(filters, true)
            .await?
            .into_iter()
            .map(|c| c.id)
            .collect();
        self.inspect_containers(&ids).await
    }

    /// The containers `ids`, as `inspect` says; one that is gone is left
    /// out.
    pub async fn inspect_containers(
        &self,
        ids: &[String],
    ) -> Result<Vec<ContainerDetails>, EngineError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec!["container".to_owned(), "inspect".to_owned()];
        args.extend(ids.iter().cloned());
        self.inspect(&args)
            .await
            .map_err(|source| EngineError::InspectContainers {
                ids: ids.to_vec(),
                source,
            })
    }

    /// The networks that pass `filters`, as `network inspect` says.
    pub async fn networks(&self, filters: &[Filter]) -> Result<Vec<NetworkDetails>, EngineError> {
        self.inspect_listed("network", filters)
            .await
            .map_err(|source| EngineError::ListNetworks {
                filters: shown_filters(filters),
                source,
            })
    }

    /// The volumes that pass `filters`, as `volume inspect` says.
    pub async fn volumes(&self, filters: &[Filter]) -> Result<Vec<VolumeDetails>, EngineError> {
        self.inspect_listed("volume", filters)
            .await
            .map_err(|source| EngineError::ListVolumes {
                filters: shown_filters(filters),
                source,
            })
    }

    /// `<kind> ls --quiet` with `filters`, then `<kind> inspect` of what it
    /// listed: a network or a volume.
    async fn inspect_listed<T: DeserializeOwned>(
        &self,
        kind: &str,
        filters: &[Filter],
    ) -> Result<Vec<T>, CommandError> {
        let mut args = vec![kind.to_owned(), "ls".to_owned(), "--quiet".to_owned()];
        args.extend(filter_args(filters));
        let listed = self.run(&args).await?;
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec![kind.to_owned(), "inspect".to_owned()];
        args.extend(listed.split_whitespace().map(str::to_owned));
        self.inspect(&args).await
    }

    /// Every container, network and volume whose label `key` is exactly
    /// `value`.
    pub async fn list_by_label(
        &self,
        key: &str,
        value: &str,
    ) -> Result<EngineObjects, EngineError> {
        let filter = [Filter::label(key, value)];
        let containers = self.ps(&filter, true).await?;
        // Names only: one `ls` each, as few calls as a stop under load can
        // afford.
        let networks: Vec<Named> = self
            .json_lines(&ls_args("network", &filter))
            .await
            .map_err(|source| EngineError::ListNetworks {
                filters: shown_filters(&filter),
                source,
            })?;
        let volumes: Vec<Named> =
            self.json_lines(&ls_args("volume", &filter))
                .await
                .map_err(|source| EngineError::ListVolumes {
                    filters: shown_filters(&filter),
                    source,
                })?;
        Ok(EngineObjects {
            containers: containers
                .iter()
                .map(|c| format!("{} ({}, {})", c.name, &c.id[..c.id.len().min(12)], c.state))
                .collect(),
            container_ids: containers.into_iter().map(|c| c.id).collect(),
            networks: networks.into_iter().map(|n| n.name).collect(),
            volumes: volumes.into_iter().map(|v| v.name).collect(),
        })
    }

    /// The values of the label `of` on every container, network and volume
    /// whose label `key` is exactly `value`, each once.
    pub async fn label_values(
        &self,
        key: &str,
        value: &str,
        of: &str,
    ) -> Result<Vec<String>, EngineError> {
        let filter = [Filter::label(key, value)];
        let mut values: Vec<String> = Vec::new();
        for c in self.containers(&filter).await? {
            values.extend(c.label(of).map(str::to_owned));
        }
        for n in self.networks(&filter).await? {
            values.extend(n.labels.get(of).cloned());
        }
        for v in self.volumes(&filter).await? {
            values.extend(v.labels.get(of).cloned());
        }
        values.retain(|v| !v.trim().is_empty());
        values.sort();
        values.dedup();
        Ok(values)
    }

    /// Removes what `objects` names (containers forcibly, with their
    /// anonymous volumes), then lists `key = value` again: what is still
    /// there. A removal that failed is the error only when something is
    /// left (a container that exited and vanished meanwhile is no failure).
    pub async fn remove_by_label(
        &self,
        objects: &EngineObjects,
        key: &str,
        value: &str,
    ) -> Result<EngineObjects, RemoveError> {
        let mut problems = Vec::new();
        if !objects.container_ids.is_empty() {
            if let Err(e) = self.remove_containers(&objects.container_ids).await {
                problems.push(e);
            }
        }
        if !objects.networks.is_empty() {
            let mut args = vec!["network".to_owned(), "rm".to_owned()];
            args.extend(objects.networks.iter().cloned());
            if let Err(source) = self.run(&args).await {
                problems.push(EngineError::RemoveNetworks {
                    names: objects.networks.clone(),
                    source,
                });
            }
        }
        if !objects.volumes.is_empty() {
            let mut args = vec!["volume".to_owned(), "rm".to_owned(), "--force".to_owned()];
            args.extend(objects.volumes.iter().cloned());
            if let Err(source) = self.run(&args).await {
                problems.push(EngineError::RemoveVolumes {
                    names: objects.volumes.clone(),
                    source,
                });
            }
        }
        let left = self
            .list_by_label(key, value)
            .await
            .map_err(RemoveError::List)?;
        if !left.is_empty() && !problems.is_empty() {
            return Err(RemoveError::Left {
                left: Box::new(left),
                problems,
            });
        }
        Ok(left)
    }

    /// Removes the containers `ids`, running or not, with their anonymous
    /// volumes.
    pub async fn remove_containers(&self, ids: &[String]) -> Result<(), EngineError> {
        let mut args = vec![
            "rm".to_owned(),
            "--force".to_owned(),
            "--volumes".to_owned(),
        ];
        args.extend(ids.iter().cloned());
        self.run(&args)
            .await
            .map(drop)
            .map_err(|source| EngineError::RemoveContainers {
                ids: ids.to_vec(),
                source,
            })
    }

    /// Starts the container `id`.
    pub async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.run(&["start", id])
            .await
            .map(drop)
            .map_err(|source| EngineError::Start {
                id: id.to_owned(),
                source,
            })
    }

    /// Stops the container `id`: SIGTERM, then SIGKILL after `grace`.
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<(), EngineError> {
        self.run(&["stop", "--time", &grace.as_secs().to_string(), id])
            .await
            .map(drop)
            .map_err(|source| EngineError::Stop {
                id: id.to_owned(),
                source,
            })
    }

    /// Restarts the container `id`, stopping it as [`Engine::stop`] does.
    pub async fn restart(&self, id: &str, grace: Duration) -> Result<(), EngineError> {
        self.run(&["restart", "--time", &grace.as_secs().to_string(), id])
            .await
            .map(drop)
            .map_err(|source| EngineError::Restart {
                id: id.to_owned(),
                source,
            })
    }

    /// Sends `signal` (`SIGTERM`, `SIGKILL`) to the containers `ids`.
    pub async fn kill(&self, ids: &[String], signal: &str) -> Result<(), EngineError> {
        let mut args = vec!["kill".to_owned(), "--signal".to_owned(), signal.to_owned()];
        args.extend(ids.iter().cloned());
        self.run(&args)
            .await
            .map(drop)
            .map_err(|source| EngineError::Kill {
                ids: ids.to_vec(),
                signal: signal.to_owned(),
                source,
            })
    }

    /// Freezes the container `id`.
    pub async fn pause(&self, id: &str) -> Result<(), EngineError> {
        self.run(&["pause", id])
            .await
            .map(drop)
            .map_err(|source| EngineError::Pause {
                id: id.to_owned(),
                source,
            })
    }

    /// Thaws the container `id`.
    pub async fn unpause(&self, id: &str) -> Result<(), EngineError> {
        self.run(&["unpause", id])
            .await
            .map(drop)
            .map_err(|source| EngineError::Unpause {
                id: id.to_owned(),
                source,
            })
    }

    /// Runs `command` in the container `id`; what it printed.
    pub async fn exec(&self, id: &str, command: &[String]) -> Result<String, EngineError> {
        let mut args = vec!["exec".to_owned(), id.to_owned()];
        args.extend(command.iter().cloned());
        self.run(&args).await.map_err(|source| EngineError::Exec {
            id: id.to_owned(),
            command: command.to_vec(),
            source,
        })
    }

    /// What the container `id` printed, every line timestamped: its last
    /// `tail` lines, or all.
    pub async fn logs(&self, id: &str, tail: Option<usize>) -> Result<Logs, EngineError> {
        let mut args = vec!["logs".to_owned(), "--timestamps".to_owned()];
        if let Some(n) = tail {
            args.extend(["--tail".to_owned(), n.to_string()]);
        }
        args.push(id.to_owned());
        let logs = async {
            let out = self.output(&args).await?;
            Ok(Logs {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        };
        logs.await.map_err(|source| EngineError::Logs {
            id: id.to_owned(),
            source,
        })
    }

    /// Writes what container `id` printed, stdout and stderr, to the file
    /// `path` (created or truncated), holding none of it in memory: a
    /// node may print gigabytes.
    pub async fn save_logs(&self, id: &str, path: &Path) -> Result<(), EngineError> {
        let args = ["logs".to_owned(), "--timestamps".to_owned(), id.to_owned()];
        let shown = self.shown(&args);
        let saved = async {
            let spawn = |source| CommandError::Spawn {
                shown: shown.clone(),
                source,
            };
            let out = std::fs::File::create(path).map_err(spawn)?;
            let err = out.try_clone().map_err(spawn)?;
            let status = self
                .command()
                .args(&args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .kill_on_drop(true)
                .status()
                .await
                .map_err(spawn)?;
            if status.success() {
                Ok(())
            } else {
                Err(CommandError::Failed {
                    shown: shown.clone(),
                    status,
                    stderr: format!("see {}", path.display()),
                })
            }
        };
        saved.await.map_err(|source| EngineError::Logs {
            id: id.to_owned(),
            source,
        })
    }

    /// The engine's events that pass `filters`, from `since` until `until`
    /// (seconds since the Unix epoch).
    pub async fn events(
        &self,
        since: u64,
        until: u64,
        filters: &[Filter],
    ) -> Result<Vec<Event>, EngineError> {
        let mut args = vec![
            "events".to_owned(),
            "--since".to_owned(),
            since.to_string(),
            "--until".to_owned(),
            until.to_string(),
        ];
        args.extend(filter_args(filters));
        args.extend(["--format".to_owned(), "{{json .}}".to_owned()]);
        self.json_lines(&args)
            .await
            .map_err(|source| EngineError::Events {
                filters: shown_filters(filters),
                source,
            })
    }

    /// The arguments of an endless `events` that pass `filters`, from
    /// `since` (seconds since the Unix epoch), one line of JSON
    /// ([`Event`]) each.
    pub fn events_args(&self, since: u64, filters: &[Filter]) -> Vec<String> {
        self.endless_events(since, filters, "{{json .}}".to_owned())
    }

    /// The arguments of an endless `events` that pass `filters`, from
    /// `since`, for people: `<time> <the value of label> <action>` each.
    pub fn events_log_args(&self, since: u64, filters: &[Filter], label: &str) -> Vec<String> {
        let format =
            format!("{{{{.Time}}}} {{{{index .Actor.Attributes \"{label}\"}}}} {{{{.Action}}}}");
        self.endless_events(since, filters, format)
    }

    fn endless_events(&self, since: u64, filters: &[Filter], format: String) -> Vec<String> {
        let mut args = vec!["events".to_owned(), "--since".to_owned(), since.to_string()];
        args.extend(filter_args(filters));
        args.extend(["--format".to_owned(), format]);
        args
    }

    /// An endless `events` that pass `filters`, from `since`, one line of
    /// JSON each, not started: the caller owns its lifetime.
    pub fn events_command(&self, since: u64, filters: &[Filter]) -> tokio::process::Command {
        let mut cmd = self.command();
        cmd.args(self.events_args(since, filters));
        cmd
    }

    /// `docker args…`, for messages.
    fn shown<S: AsRef<str>>(&self, args: &[S]) -> String {
        let mut shown = self.kind.program().to_owned();
        for a in args {
            shown.push(' ');
            shown.push_str(a.as_ref());
        }
        shown
    }

    /// Runs the CLI with `args` to its end, within [`COMMAND_TIMEOUT`];
    /// what it printed, whatever its status.
    async fn output<S: AsRef<str>>(
        &self,
        args: &[S],
    ) -> Result<std::process::Output, CommandError> {
        let mut cmd = self.command();
        cmd.args(args.iter().map(AsRef::as_ref))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        match tokio::time::timeout(COMMAND_TIMEOUT, cmd.output()).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(source)) => Err(CommandError::Spawn {
                shown: self.shown(args),
                source,
            }),
            Err(_) => Err(CommandError::Timeout {
                shown: self.shown(args),
                limit: COMMAND_TIMEOUT,
                engine: self.kind.engine_name(),
            }),
        }
    }

    /// Runs the CLI with `args`; its trimmed stdout when it succeeds.
    async fn run<S: AsRef<str>>(&self, args: &[S]) -> Result<String, CommandError> {
        let out = self.output(args).await?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(failed(self.shown(args), &out))
        }
    }

    /// Runs an `inspect` of several objects: the JSON array of those there
    /// are. One gone meanwhile (listed, then removed) fails the command
    /// but is left out of an array that still parses.
    async fn inspect<T: DeserializeOwned>(&self, args: &[String]) -> Result<Vec<T>, CommandError> {
        let out = self.output(args).await?;
        let shown = || self.shown(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && !stderr.contains("No such") {
            return Err(failed(shown(), &out));
        }
        serde_json::from_slice(&out.stdout).map_err(|source| CommandError::Json {
            shown: shown(),
            source,
        })
    }

    /// Runs the CLI with `args`, whose output is a line of JSON per object.
    async fn json_lines<T: DeserializeOwned>(
        &self,
        args: &[String],
    ) -> Result<Vec<T>, CommandError> {
        let out = self.run(args).await?;
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|source| CommandError::Json {
                    shown: self.shown(args),
                    source,
                })
            })
            .collect()
    }
}

fn failed(shown: String, out: &std::process::Output) -> CommandError {
    CommandError::Failed {
        shown,
        status: out.status,
        stderr: crate::redact(String::from_utf8_lossy(&out.stderr).trim()).into_owned(),
    }
}

/// Why removing objects by label left some.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// What is left could not be listed.
    #[error("cannot list what is left")]
    List(#[source] EngineError),
    /// Objects are left, and removing them failed.
    #[error(
        "still there: {}; removing said: {}",
        left.describe().join(", "),
        problems.iter().map(|p| crate::errors::error_chain(p)).collect::<Vec<_>>().join("; ")
    )]
    Left {
        /// What is still there.
        left: Box<EngineObjects>,
        /// What each failed removal said.
        problems: Vec<EngineError>,
    },
}

/// Engine objects found by label.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
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
