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

/// A host port the engine could not publish a container's port on: the
/// engine said that something else holds it. Read from what its CLI
/// printed on stderr, the only place it says so (`docker run` exits 125,
/// `docker start` 1, and the last line is only "Run 'docker run --help'").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortTaken {
    /// The address as the engine named it (`127.0.0.1:41234`), when it did.
    pub address: Option<String>,
    /// The engine's line that says so, trimmed.
    pub said: String,
}

impl std::fmt::Display for PortTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.address {
            Some(address) => write!(f, "the published port {address} is already taken"),
            None => f.write_str("a published port is already taken"),
        }?;
        write!(
            f,
            " (something else listens on it, or another container publishes it); the engine \
             said: {}",
            self.said
        )
    }
}

/// What the engine's stderr says of a port it could not publish, if that
/// is why it failed. Docker says `Bind for 127.0.0.1:P failed: port is
/// already allocated` (another container holds it), `listen tcp4
/// 127.0.0.1:P: bind: address already in use` (its userland proxy could
/// not bind it) or `failed to bind host port for 127.0.0.1:P:…: address
/// already in use` (without the proxy); Podman the second.
pub fn port_taken(stderr: &str) -> Option<PortTaken> {
    let line = stderr.lines().find(|l| {
        l.contains("port is already allocated") || l.contains("address already in use")
    })?;
    let address = address_in(line);
    Some(PortTaken {
        address,
        said: line.trim().to_owned(),
    })
}

/// The `host:port` a line of the engine names as taken.
fn address_in(line: &str) -> Option<String> {
    // `Bind for 127.0.0.1:8080 failed`
    if let Some(rest) = line.split("Bind for ").nth(1) {
        return rest.split_whitespace().next().map(str::to_owned);
    }
    // `failed to bind host port for 127.0.0.1:8080:172.17.0.2:80/tcp`
    if let Some(rest) = line.split("bind host port for ").nth(1) {
        let spec = rest.split([' ', ':']).take(2).collect::<Vec<_>>();
        if spec.len() == 2 && !spec[1].is_empty() {
            return Some(format!("{}:{}", spec[0], spec[1]));
        }
    }
    // `listen tcp4 127.0.0.1:8080: bind: address already in use`
    let rest = line.split("listen tcp").nth(1)?;
    let address = rest
        .trim_start_matches(['4', '6'])
        .split_whitespace()
        .next()?;
    Some(address.trim_end_matches(':').to_owned())
}

impl CommandError {
    /// What it says of a port the engine could not publish, when that is
    /// why it failed.
    pub fn port_taken(&self) -> Option<PortTaken> {
        match self {
            CommandError::Failed { stderr, .. } => port_taken(stderr),
            _ => None,
        }
    }
}

impl EngineError {
    /// The port the engine could not publish, when that is why the
    /// operation failed.
    pub fn port_taken(&self) -> Option<PortTaken> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cause {
            if let Some(c) = e.downcast_ref::<CommandError>() {
                return c.port_taken();
            }
            cause = e.source();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_read_from_what_each_engine_says() {
        let cases = [
            (
                "docker: Error response from daemon: driver failed programming external \
                 connectivity on endpoint testkit-x (abc): Bind for 127.0.0.1:41234 failed: \
                 port is already allocated.\nRun 'docker run --help' for more information",
                Some("127.0.0.1:41234"),
            ),
            (
                "Error response from daemon: driver failed programming external connectivity \
                 on endpoint testkit-x-worker-1 (abc): Error starting userland proxy: listen \
                 tcp4 127.0.0.1:40001: bind: address already in use\nError: failed to start \
                 containers: testkit-x-worker-1",
                Some("127.0.0.1:40001"),
            ),
            (
                "docker: Error response from daemon: failed to set up container networking: \
                 driver failed programming external connectivity on endpoint x (y): failed to \
                 bind host port for 127.0.0.1:8080:172.17.0.2:80/tcp: address already in use",
                Some("127.0.0.1:8080"),
            ),
            (
                "Error: rootlessport listen tcp 127.0.0.1:9000: bind: address already in use",
                Some("127.0.0.1:9000"),
            ),
        ];
        for (stderr, address) in cases {
            let taken = port_taken(stderr).unwrap_or_else(|| panic!("not seen: {stderr}"));
            assert_eq!(taken.address.as_deref(), address, "{stderr}");
            let shown = taken.to_string();
            assert!(
                shown.starts_with(&format!(
                    "the published port {} is already taken",
                    address.unwrap()
                )),
                "{shown}"
            );
            assert!(!taken.said.contains("Run 'docker run --help'"), "{taken:?}");
        }
        assert_eq!(
            port_taken("docker: Error response from daemon: No such image: x:1"),
            None
        );
    }
}
