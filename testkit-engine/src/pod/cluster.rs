//! Pods of several nodes: containers of one image on the pod's network,
//! each reached by its peers at its name and by the tests at a loopback
//! port of its own.
//!
//! The entry node is the pod's process (its `docker run`, attached, prints
//! the handle); the others start first, detached, labelled
//! [`NODE_LABEL`]` = <name>` beside the pod's
//! labels, so that everything that stops or sweeps a container pod by label
//! stops and sweeps them too. The pod is up when every node answers its
//! health check. What a test needs to reach a node, and to inject faults
//! into it, travels in the handle as [`ClusterInfo`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::check::check_health;
use super::container::{NODE_LABEL, POD_LABEL};
use crate::containers::{Engine, EngineError, Filter};

/// Why a node of a pod of several cannot be found, started or proven up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The engine refused an operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The pod has no node of that name.
    #[error("the pod has no node `{name}`: its nodes are {nodes}")]
    NoSuchNode {
        /// The name asked for.
        name: String,
        /// The nodes there are, quoted.
        nodes: String,
    },
    /// The engine holds no container for the node.
    #[error("node `{name}` has no container (labelled {NODE_LABEL}={name} in pod {pod_id})")]
    NoContainer {
        /// The node.
        name: String,
        /// The pod.
        pod_id: String,
    },
    /// The engine holds several containers for the node.
    #[error("node `{name}` has {count} containers: expected one")]
    Containers {
        /// The node.
        name: String,
        /// How many it has.
        count: usize,
    },
    /// A node did not answer its health check in time.
    #[error("node `{name}` did not answer its health check {url}: {summary}")]
    Unhealthy {
        /// The node.
        name: String,
        /// Its health URL.
        url: String,
        /// What the last check saw.
        summary: String,
    },
    /// A node's start log could not be made.
    #[error("{}", path.display())]
    StartLog {
        /// The log.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A node's start took too long.
    #[error("starting node `{name}` took over 60 s")]
    StartTimeout {
        /// The node.
        name: String,
    },
    /// A node's start could not run.
    #[error("cannot start node `{name}`")]
    StartSpawn {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A node's start failed.
    #[error("node `{name}` did not start ({status}): {said}")]
    StartFailed {
        /// The node.
        name: String,
        /// How its start ended.
        status: std::process::ExitStatus,
        /// What it said, redacted.
        said: String,
    },
}

/// What a handle says of a pod of several nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClusterInfo {
    /// The pod's id: the value of its containers' `testkit.pod` label.
    pub pod_id: String,
    /// The network the nodes share.
    pub network: String,
    /// The `docker` program.
    pub docker: PathBuf,
    /// The port every node listens on inside its container.
    pub port: u16,
    /// The node whose API is the pod's base URL.
    pub entry: String,
    /// `[pod.container] reach`: run in a node, proves it reaches `{node}`.
    #[serde(default)]
    pub reach: Vec<String>,
    /// Every node, by name.
    pub nodes: BTreeMap<String, NodeInfo>,
}

/// One node, as the tests reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NodeInfo {
    /// `http://127.0.0.1:<its published port>`.
    pub base_url: String,
    /// Its unauthenticated health path.
    pub health_path: String,
    /// Its data directory, on a bounded disk of its own
    /// (`[pod.container.nodes.NAME] disk`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
}

impl ClusterInfo {
    /// The node `name`, or an error naming the nodes there are.
    pub fn node(&self, name: &str) -> Result<&NodeInfo, ClusterError> {
        self.nodes
            .get(name)
            .ok_or_else(|| ClusterError::NoSuchNode {
                name: name.to_owned(),
                nodes: self.node_names(),
            })
    }

    /// The nodes' names, quoted, for messages.
    pub fn node_names(&self) -> String {
        self.nodes
            .keys()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The engine of the pod.
    pub fn engine(&self) -> Engine {
        Engine::new(self.docker.clone())
    }

    /// The id of the container that is node `name`, found by label.
    pub async fn container_of(&self, name: &str) -> Result<String, ClusterError> {
        let listed = self
            .engine()
            .ps(
                &[
                    Filter::label(POD_LABEL, &self.pod_id),
                    Filter::label(NODE_LABEL, name),
                ],
                true,
            )
            .await?;
        match listed.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err(ClusterError::NoContainer {
                name: name.to_owned(),
                pod_id: self.pod_id.clone(),
            }),
            many => Err(ClusterError::Containers {
                name: name.to_owned(),
                count: many.len(),
            }),
        }
    }

    /// Waits until every node answers its health check, until `deadline`;
    /// the first that does not is the error.
    pub async fn wait_healthy(&self, deadline: Instant) -> Result<(), ClusterError> {
        for (name, node) in &self.nodes {
            wait_node_healthy(name, node, deadline).await?;
        }
        Ok(())
    }
}

/// Waits until `node` answers 2xx at its health path, asking every 100 ms.
pub async fn wait_node_healthy(
    name: &str,
    node: &NodeInfo,
    deadline: Instant,
) -> Result<(), ClusterError> {
    loop {
        let report = check_health(&node.base_url, &node.health_path, Duration::from_secs(1)).await;
        if report.ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(ClusterError::Unhealthy {
                name: name.to_owned(),
                url: format!("{}{}", node.base_url, node.health_path),
                summary: report.summary(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts the nodes other than the entry, detached, in order; `command`
/// makes the engine's command in the pod's environment.
pub(super) async fn start_nodes(
    nodes: &[(String, Vec<String>)],
    logs_dir: &Path,
    command: impl Fn() -> tokio::process::Command,
) -> Result<(), ClusterError> {
    for (name, args) in nodes {
        let log = logs_dir.join(format!("node-{name}.start.log"));
        let file = std::fs::File::create(&log).map_err(|source| ClusterError::StartLog {
            path: log.clone(),
            source,
        })?;
        let mut cmd = command();
        cmd.args(args)
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .kill_on_drop(true);
        let status = tokio::time::timeout(Duration::from_secs(60), cmd.status())
            .await
            .map_err(|_| ClusterError::StartTimeout { name: name.clone() })?
            .map_err(|source| ClusterError::StartSpawn {
                name: name.clone(),
                source,
            })?;
        if !status.success() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(ClusterError::StartFailed {
                name: name.clone(),
                status,
                said: crate::redact(said.trim()).into_owned(),
            });
        }
    }
    Ok(())
}

/// The cluster of a pod whose containers were just prepared, as its
/// handle will say.
pub(super) fn describe(
    spec: &super::container::ContainerSpec,
    prepared: &super::container::Prepared,
    host_ports: &BTreeMap<String, u16>,
    health_path: &str,
) -> Option<ClusterInfo> {
    let entry = spec.entry.clone()?;
    let nodes = spec
        .nodes
        .iter()
        .map(|(name, section)| {
            let info = NodeInfo {
                base_url: format!("http://127.0.0.1:{}", host_ports[name.as_str()]),
                health_path: section
                    .health_path
                    .clone()
                    .unwrap_or_else(|| health_path.to_owned()),
                disk: section.disk.as_ref().map(|d| d.target.clone()),
            };
            (name.clone(), info)
        })
        .collect();
    Some(ClusterInfo {
        pod_id: prepared.pod_id.clone(),
        network: prepared.network.clone(),
        docker: spec.docker.clone(),
        port: spec.port,
        entry,
        reach: spec.reach.clone(),
        nodes,
    })
}
