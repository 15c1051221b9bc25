//! Why a call to the container engine failed: one variant per operation,
//! with the arguments that matter, and the cause in `source` (printed once,
//! by whoever prints the chain).

use std::time::Duration;

/// Why one command of the engine's CLI did not give what was asked of it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The program could not be started.
    #[error("`{shown}` could not start")]
    Spawn {
        /// The command line, for people.
        shown: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It did not finish in time.
    #[error("`{shown}` did not answer within {}: is the {engine} up?", humantime::format_duration(*limit))]
    Timeout {
        /// The command line, for people.
        shown: String,
        /// How long it was given.
        limit: Duration,
        /// `Docker Engine` or `Podman`.
        engine: &'static str,
    },
    /// It exited unsuccessfully.
    #[error("`{shown}` failed ({status}): {stderr}")]
    Failed {
        /// The command line, for people.
        shown: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it printed on stderr, redacted.
        stderr: String,
    },
    /// It printed something that is not the JSON the operation reads.
    #[error("`{shown}` printed what is not the JSON expected")]
    Json {
        /// The command line, for people.
        shown: String,
        /// What does not parse.
        #[source]
        source: serde_json::Error,
    },
}

/// Why an operation of the container engine failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The engine's CLI is not on PATH.
    #[error(
        "no `{program}` on PATH: install the {cli} (and run a {engine}) to run container pods"
    )]
    NotFound {
        /// `docker` or `podman`.
        program: &'static str,
        /// `Docker CLI` or `Podman CLI`.
        cli: &'static str,
        /// `Docker Engine` or `Podman`.
        engine: &'static str,
    },
    /// The engine's version could not be read: it does not answer.
    #[error("the {engine} does not answer")]
    Version {
        /// `Docker Engine` or `Podman`.
        engine: &'static str,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// An image could not be inspected (the engine does not hold it).
    #[error("cannot inspect image `{image}`")]
    InspectImage {
        /// The image.
        image: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// An image could not be built.
    #[error("cannot build image `{tag}`; its output is in {}", log.display())]
    Build {
        /// The tag it was to get.
        tag: String,
        /// The file its output went to.
        log: std::path::PathBuf,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A network could not be created.
    #[error("cannot create network {name}")]
    CreateNetwork {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A volume could not be created.
    #[error("cannot create volume {name}")]
    CreateVolume {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Containers could not be listed.
    #[error("cannot list the containers {filters}")]
    ListContainers {
        /// The filters, as given to the CLI.
        filters: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Containers could not be inspected.
    #[error("cannot inspect containers {}", ids.join(" "))]
    InspectContainers {
        /// Their ids.
        ids: Vec<String>,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Networks could not be listed or inspected.
    #[error("cannot list the networks {filters}")]
    ListNetworks {
        /// The filters, as given to the CLI.
        filters: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Volumes could not be listed or inspected.
    #[error("cannot list the volumes {filters}")]
    ListVolumes {
        /// The filters, as given to the CLI.
        filters: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Containers could not be removed.
    #[error("cannot remove containers {}", ids.join(" "))]
    RemoveContainers {
        /// Their ids.
        ids: Vec<String>,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Networks could not be removed.
    #[error("cannot remove networks {}", names.join(" "))]
    RemoveNetworks {
        /// Their names.
        names: Vec<String>,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Volumes could not be removed.
    #[error("cannot remove volumes {}", names.join(" "))]
    RemoveVolumes {
        /// Their names.
        names: Vec<String>,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container could not be started.
    #[error("cannot start container {id}")]
    Start {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container could not be stopped.
    #[error("cannot stop container {id}")]
    Stop {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container could not be restarted.
    #[error("cannot restart container {id}")]
    Restart {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// Containers could not be sent a signal.
    #[error("cannot send {signal} to containers {}", ids.join(" "))]
    Kill {
        /// Their ids.
        ids: Vec<String>,
        /// The signal.
        signal: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container could not be frozen.
    #[error("cannot pause container {id}")]
    Pause {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container could not be thawed.
    #[error("cannot unpause container {id}")]
    Unpause {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A command run in a container failed.
    #[error("`{}` in container {id} failed", command.join(" "))]
    Exec {
        /// The container's id.
        id: String,
        /// The command.
        command: Vec<String>,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// A container's output could not be read.
    #[error("cannot read the logs of container {id}")]
    Logs {
        /// Its id.
        id: String,
        /// Why.
        #[source]
        source: CommandError,
    },
    /// The engine's events could not be read.
    #[error("cannot read the engine's events {filters}")]
    Events {
        /// The filters, as given to the CLI.
        filters: String,
        /// Why.
        #[source]
        source: CommandError,
    },
}
