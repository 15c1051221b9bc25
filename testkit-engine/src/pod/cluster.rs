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
    /// A node's start failed because its port is taken.
    #[error("node `{name}` did not start ({status}): {taken}")]
    PortTaken {
        /// The node.
        name: String,
        /// How its start ended.
        status: std::process::ExitStatus,
        /// The port, and what the engine said of it, redacted.
        taken: crate::containers::PortTaken,
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

    /// Each node's state as the engine has it (`running`, `paused`,
    /// `exited (code 137)`) and its last `tail` lines of output, for a
    /// hang report: one paragraph a node, what could not be read said.
    pub async fn describe_nodes(&self, tail: usize) -> Vec<String> {
        let engine = self.engine();
        let mut said = Vec::new();
        for name in self.nodes.keys() {
            match self.container_of(name).await {
                Ok(id) => {
                    said.push(super::container::describe_container(&engine, name, &id, tail).await)
                }
                Err(e) => said.push(format!("node {name}: {}", crate::errors::error_chain(&e))),
            }
        }
        said
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
            let said = crate::redact(said.trim()).into_owned();
            if let Some(taken) = crate::containers::port_taken(&said) {
                return Err(ClusterError::PortTaken {
                    name: name.clone(),
                    status,
                    taken,
                });
            }
            return Err(ClusterError::StartFailed {
                name: name.clone(),
                status,
                said,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const IMAGE: &str = "testkit-tests-busybox:1";

    fn docker(args: &[&str]) -> std::process::Output {
        let out = Command::new("docker").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A tiny image of the tests' own (static busybox), as the runner's
    /// tests build it.
    fn busybox() {
        let have = Command::new("docker")
            .args(["image", "inspect", IMAGE])
            .output()
            .is_ok_and(|o| o.status.success());
        if have {
            return;
        }
        let ctx = tempfile::tempdir().unwrap();
        std::fs::copy("/usr/bin/busybox", ctx.path().join("busybox"))
            .expect("a static busybox at /usr/bin/busybox (apt-get install busybox-static)");
        std::fs::write(
            ctx.path().join("Dockerfile"),
            "FROM scratch\nCOPY busybox /bin/busybox\n",
        )
        .unwrap();
        let context = ctx.path().to_str().unwrap();
        docker(&[
            "build",
            "-q",
            "--label",
            "testkit.owner=testkit-tests",
            "-t",
            IMAGE,
            context,
        ]);
    }

    /// Removes the pod's containers by label, whatever the test did.
    struct Remove(String);

    impl Drop for Remove {
        fn drop(&mut self) {
            let label = format!("{POD_LABEL}={}", self.0);
            let listed = Command::new("docker")
                .args(["ps", "-aq", "--filter", &format!("label={label}")])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            for id in listed.split_whitespace() {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
    }

    /// A hang report's nodes: a paused node says `paused`, an exited one
    /// its code, each with its last lines, in order.
    #[test]
    fn nodes_are_described_with_their_state_and_last_lines() {
        busybox();
        let pod_id = format!("hang-{}", crate::ids::random_id(8));
        let _remove = Remove(pod_id.clone());
        for (node, script) in [
            (
                "n1",
                "for i in 1 2 3 4 5; do echo line $i; done; sleep 0.5; echo to-stderr >&2; sleep 600",
            ),
            ("n2", "echo bye; exit 3"),
        ] {
            docker(&[
                "run",
                "-d",
                "--label",
                "testkit.owner=testkit-tests",
                "--label",
                &format!("{POD_LABEL}={pod_id}"),
                "--label",
                &format!("{NODE_LABEL}={node}"),
                IMAGE,
                "/bin/busybox",
                "sh",
                "-c",
                script,
            ]);
        }
        let info = ClusterInfo {
            pod_id: pod_id.clone(),
            network: String::new(),
            docker: PathBuf::from("docker"),
            port: 8080,
            entry: "n1".to_owned(),
            reach: Vec::new(),
            nodes: ["n1", "n2"]
                .map(|n| {
                    (
                        n.to_owned(),
                        NodeInfo {
                            base_url: "http://127.0.0.1:9".to_owned(),
                            health_path: "/health".to_owned(),
                            disk: None,
                        },
                    )
                })
                .into(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Both have printed (n2 has exited) before n1 is frozen. The engine
        // stamps each stream as it reads it: printed apart in time, the
        // two streams sort as they were printed.
        let printed = || {
            let said = rt.block_on(info.describe_nodes(3));
            said[0].contains("to-stderr") && said[1].contains("exited")
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !printed() {
            assert!(
                std::time::Instant::now() < deadline,
                "the nodes never printed: {:?}",
                rt.block_on(info.describe_nodes(3))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let n1 = Command::new("docker")
            .args([
                "ps",
                "-q",
                "--filter",
                &format!("label={NODE_LABEL}=n1"),
                "--filter",
                &format!("label={POD_LABEL}={pod_id}"),
            ])
            .output()
            .unwrap();
        let n1 = String::from_utf8_lossy(&n1.stdout).trim().to_owned();
        docker(&["pause", &n1]);
        let said = rt.block_on(info.describe_nodes(3));
        docker(&["unpause", &n1]);
        assert!(
            said[0].starts_with("node n1: paused; its last 3 lines:\n"),
            "{said:?}"
        );
        let lines: Vec<&str> = said[0]
            .lines()
            .skip(1)
            .map(|l| l.trim().split_once(' ').unwrap().1)
            .collect();
        assert_eq!(lines, ["line 4", "line 5", "to-stderr"], "{said:?}");
        assert!(
            said[1].starts_with("node n2: exited (code 3); its last 3 lines:\n"),
            "{said:?}"
        );
        assert!(said[1].ends_with(" bye"), "{said:?}");
    }
}
