//! Faults of a pod of several nodes: a node stopped, killed, frozen,
//! restarted, or cut off from its peers and from the tests; each one
//! undone, and the undo proven.
//!
//! A fault is planned before it is injected ([`plan`]): the plan names the
//! container, and for a cut every packet-filter rule it will add. The
//! caller journals the plan, then [`inject`]s it, so that whoever finds the
//! journal (the test's cleanup, the reaper of a killed test process, the
//! pod's teardown) can [`undo`] exactly what was done, even half of it.
//! The faults of one test are undone together ([`undo_all`]): all of them
//! reverted before any is proven, since a proof asks every peer, and a
//! peer another fault still freezes answers nothing.
//!
//! Stopping, killing, freezing and restarting are the Docker Engine's
//! (`docker stop`, `kill`, `pause`, `restart`; undone by `start` and
//! `unpause`). A cut is `iptables` rules that drop the node's packets: in
//! `DOCKER-USER` between it and each peer (bridged traffic between
//! containers passes there), and in `OUTPUT` from this host to it (the
//! tests reach a node through the engine's proxy on the host). Each rule
//! carries the comment `testkit.pod=<pod id>`, by which a pod's teardown
//! and the janitor find and remove what a lost process left.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cluster::{wait_node_healthy, ClusterError, ClusterInfo};
use crate::containers::{EngineError, PacketFilterError};

/// The kind a fault is journaled as, beside a test's resources: one stack
/// undoes both, newest first.
pub const JOURNAL_KIND: &str = "fault";

/// The longest an undo and its proof may take: a stopped node starts
/// again, and answers its health check, within it.
pub const UNDO_LIMIT: Duration = Duration::from_secs(30);

/// How long a stopped or restarted node is given to end after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why a fault could not be planned, injected, undone or proven undone.
/// The journal, the trace and the report keep it as text:
/// [`error_chain`](crate::errors::error_chain) tells it as one line, each
/// cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FaultError {
    /// A call to the container engine failed.
    #[error(transparent)]
    Engine(Box<EngineError>),
    /// A packet-filter rule could not be inserted, listed or removed.
    #[error(transparent)]
    PacketFilter(#[from] PacketFilterError),
    /// The node or its container is not the cluster's.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A cut names the node itself among those it is cut off from.
    #[error("cannot cut `{node}` off from itself")]
    CutFromItself {
        /// The node.
        node: String,
    },
    /// The node's container has no address on the pod's network.
    #[error("container {container} has no address on {network}: is it running?")]
    NoAddress {
        /// The container.
        container: String,
        /// The pod's network.
        network: String,
    },
    /// Injecting the fault failed.
    #[error("could not {fault}")]
    Inject {
        /// The fault, in words.
        fault: String,
        /// Why.
        #[source]
        source: Box<FaultError>,
    },
    /// The fault was injected, but its container is not as it should be.
    #[error("{fault} did not take: its container is {status}")]
    DidNotTake {
        /// The fault, in words.
        fault: String,
        /// What the container is.
        status: String,
    },
    /// After the undo, the container does not run unfrozen.
    #[error("its container is {status} after the undo")]
    NotBack {
        /// What the container is.
        status: String,
    },
    /// `[pod.container] reach` could not be filled in.
    #[error("[pod.container] reach")]
    Reach(#[source] crate::template::TemplateError),
    /// A reach check's task ended without an answer.
    #[error("a reach check did not finish")]
    ReachTask(#[source] tokio::task::JoinError),
    /// A peer does not reach the node after the undo.
    #[error("`{peer}` does not reach `{node}`")]
    Unreachable {
        /// The peer that ran `reach`.
        peer: String,
        /// The node it should reach.
        node: String,
        /// What `reach` said.
        #[source]
        source: Box<EngineError>,
    },
    /// A journal line is not a fault of [`Fault::to_json`].
    #[error("not a journaled fault")]
    NotJournaled(#[source] serde_json::Error),
}

// Boxed: an engine error carries the command it ran, and every fault
// outcome would otherwise be as large.
impl From<EngineError> for FaultError {
    fn from(e: EngineError) -> Self {
        FaultError::Engine(Box::new(e))
    }
}

/// What a fault does to its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultAction {
    /// `docker stop`: SIGTERM, then SIGKILL after the grace; undone by a start.
    Stop,
    /// `docker kill`: SIGKILL at once; undone by a start.
    Kill,
    /// `docker pause`: frozen, connections open and unanswered; undone by
    /// an unpause.
    Pause,
    /// `docker restart`: stopped and started again; undone by proving it
    /// back.
    Restart,
    /// Its packets dropped: to and from the peers `from` (every other node
    /// when empty), and from the tests when `tests`.
    Cut {
        /// The peers it is cut off from; every other node when empty.
        from: Vec<String>,
        /// Whether the tests lose it too.
        tests: bool,
    },
}

/// A planned or injected fault: what was (or is to be) done, precisely
/// enough to undo it from a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Fault {
    /// The node.
    pub node: String,
    /// What is done to it.
    pub action: FaultAction,
    /// Its container's id.
    pub container: String,
    /// The packet-filter rules a cut adds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

pub use super::container::{remove_pod_rules, rule_comment};
use crate::containers::PacketFilter;
pub use crate::containers::Rule;

impl Fault {
    /// What it is, for logs and records: `pause worker-2`, `cut worker-2
    /// off from gateway and the tests`.
    pub fn describe(&self) -> String {
        match &self.action {
            FaultAction::Stop => format!("stop {}", self.node),
            FaultAction::Kill => format!("kill {}", self.node),
            FaultAction::Pause => format!("pause {}", self.node),
            FaultAction::Restart => format!("restart {}", self.node),
            FaultAction::Cut { from, tests } => {
                let mut whom: Vec<String> = if from.is_empty() {
                    vec!["every peer".to_owned()]
                } else {
                    from.clone()
                };
                if *tests {
                    whom.push("the tests".to_owned());
                }
                format!("cut {} off from {}", self.node, whom.join(", "))
            }
        }
    }

    /// The action's one word: `stop`, `kill`, `pause`, `restart`, `cut`.
    pub fn verb(&self) -> &'static str {
        match self.action {
            FaultAction::Stop => "stop",
            FaultAction::Kill => "kill",
            FaultAction::Pause => "pause",
            FaultAction::Restart => "restart",
            FaultAction::Cut { .. } => "cut",
        }
    }

    /// The fault as one line of JSON, for the journal.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data")
    }

    /// A fault from [`Fault::to_json`].
    pub fn from_json(text: &str) -> Result<Fault, FaultError> {
        serde_json::from_str(text).map_err(FaultError::NotJournaled)
    }
}

/// Plans `action` on `node`: finds its container and, for a cut, the
/// addresses its rules name.
pub async fn plan(
    cluster: &ClusterInfo,
    node: &str,
    action: FaultAction,
) -> Result<Fault, FaultError> {
    cluster.node(node)?;
    let container = cluster.container_of(node).await?;
    let mut rules = Vec::new();
    if let FaultAction::Cut { from, tests } = &action {
        for peer in from {
            cluster.node(peer)?;
            if peer == node {
                return Err(FaultError::CutFromItself {
                    node: node.to_owned(),
                });
            }
        }
        let peers: Vec<&String> = if from.is_empty() {
            cluster.nodes.keys().filter(|n| *n != node).collect()
        } else {
            from.iter().collect()
        };
        let comment = rule_comment(&cluster.pod_id);
        let own = address(cluster, &container).await?;
        for peer in peers {
            let theirs = address(cluster, &cluster.container_of(peer).await?).await?;
            rules.push(Rule::drop("DOCKER-USER", Some(&own), &theirs, &comment));
            rules.push(Rule::drop("DOCKER-USER", Some(&theirs), &own, &comment));
        }
        if *tests {
            rules.push(Rule::drop("OUTPUT", None, &own, &comment));
        }
    }
    Ok(Fault {
        node: node.to_owned(),
        action,
        container,
        rules,
    })
}

/// The node's address on the pod's network.
async fn address(cluster: &ClusterInfo, container: &str) -> Result<String, FaultError> {
    let found = cluster
        .engine()
        .inspect_containers(&[container.to_owned()])
        .await?;
    found
        .first()
        .and_then(|c| c.address_on(&cluster.network))
        .map(str::to_owned)
        .ok_or_else(|| FaultError::NoAddress {
            container: container.to_owned(),
            network: cluster.network.clone(),
        })
}

/// Injects a planned fault, and checks that it took.
pub async fn inject(cluster: &ClusterInfo, fault: &Fault) -> Result<(), FaultError> {
    let engine = cluster.engine();
    let id = fault.container.as_str();
    let done: Result<(), FaultError> = async {
        match &fault.action {
            FaultAction::Stop => engine.stop(id, STOP_GRACE).await?,
            FaultAction::Kill => engine.kill(&[id.to_owned()], "SIGKILL").await?,
            FaultAction::Pause => engine.pause(id).await?,
            FaultAction::Restart => engine.restart(id, STOP_GRACE).await?,
            FaultAction::Cut { .. } => {
                let filter = PacketFilter::on_host()?;
                for rule in &fault.rules {
                    filter.insert(rule).await?;
                }
            }
        }
        Ok(())
    }
    .await;
    done.map_err(|source| FaultError::Inject {
        fault: fault.describe(),
        source: Box::new(source),
    })?;
    let state = State::of(cluster, id).await?;
    let took = match fault.action {
        FaultAction::Stop | FaultAction::Kill => !state.running,
        FaultAction::Pause => state.paused,
        FaultAction::Restart | FaultAction::Cut { .. } => state.running,
    };
    if !took {
        return Err(FaultError::DidNotTake {
            fault: fault.describe(),
            status: state.status,
        });
    }
    Ok(())
}

/// A container's state, as the engine says.
struct State {
    running: bool,
    paused: bool,
    status: String,
}

impl State {
    async fn of(cluster: &ClusterInfo, id: &str) -> Result<State, FaultError> {
        let found = cluster
            .engine()
            .inspect_containers(&[id.to_owned()])
            .await?;
        Ok(match found.first() {
            Some(c) => State {
                running: c.state.running,
                paused: c.state.paused,
                status: c.state.status.clone(),
            },
            None => State {
                running: false,
                paused: false,
                status: "unknown".to_owned(),
            },
        })
    }
}

/// What the undo of a fault found of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reverted {
    /// Something of it was in effect, and is undone now.
    Undone,
    /// Nothing of it was in effect: the node ran unfrozen and no rule of
    /// it was left, before the undo touched anything (the test undid it
    /// itself, or a later fault on the same node did). A restart is never
    /// this: there is nothing of it to undo, only its proof.
    AlreadyUndone,
}

/// Undoes a fault (any part of it that was done), then proves it undone:
/// the container runs unfrozen, no rule of it is left, the node answers
/// its health check and every peer reaches it, all within `limit`.
pub async fn undo(
    cluster: &ClusterInfo,
    fault: &Fault,
    limit: Duration,
) -> Result<Reverted, FaultError> {
    let mut outcomes = undo_all(cluster, std::slice::from_ref(fault), limit).await;
    outcomes.pop().expect("one outcome for each fault")
}

/// Undoes the faults of one test, given oldest first: every one is
/// reverted first, newest first, and only then is each proven, newest
/// first, within `limit` from now. A proof runs `reach` in every running
/// peer and asks the node's health: one fault's proof run while another
/// of the same test still freezes a peer, or cuts it off, would wait on
/// that peer until `limit` and fail. The outcomes are in the order given.
pub async fn undo_all(
    cluster: &ClusterInfo,
    faults: &[Fault],
    limit: Duration,
) -> Vec<Result<Reverted, FaultError>> {
    let deadline = Instant::now() + limit;
    let mut outcomes: Vec<Result<Reverted, FaultError>> = Vec::with_capacity(faults.len());
    for fault in faults.iter().rev() {
        outcomes.push(revert(cluster, fault).await);
    }
    outcomes.reverse();
    for (fault, outcome) in faults.iter().zip(outcomes.iter_mut()).rev() {
        if outcome.is_ok() {
            if let Err(why) = prove(cluster, fault, deadline).await {
                *outcome = Err(why);
            }
        }
    }
    outcomes
}

/// Removes the fault's rules and starts or thaws its container; what it
/// found.
async fn revert(cluster: &ClusterInfo, fault: &Fault) -> Result<Reverted, FaultError> {
    let id = fault.container.as_str();
    let engine = cluster.engine();
    let mut found = matches!(fault.action, FaultAction::Restart);
    // Without `iptables` no rule of the fault can be in effect (nor was
    // any inserted): there is nothing to remove.
    if let (false, Ok(filter)) = (fault.rules.is_empty(), PacketFilter::on_host()) {
        for rule in &fault.rules {
            found |= filter.remove(rule).await?;
        }
    }
    let state = State::of(cluster, id).await?;
    if state.paused {
        engine.unpause(id).await?;
        found = true;
    } else if !state.running {
        engine.start(id).await?;
        found = true;
    }
    Ok(if found {
        Reverted::Undone
    } else {
        Reverted::AlreadyUndone
    })
}

/// Proves a reverted fault undone before `deadline`: its container runs
/// unfrozen, the node answers its health check, every peer reaches it.
async fn prove(cluster: &ClusterInfo, fault: &Fault, deadline: Instant) -> Result<(), FaultError> {
    let state = State::of(cluster, &fault.container).await?;
    if !state.running || state.paused {
        return Err(FaultError::NotBack {
            status: state.status,
        });
    }
    let node = cluster.node(&fault.node)?;
    wait_node_healthy(&fault.node, node, deadline).await?;
    peers_reach(cluster, &fault.node, deadline).await
}

/// Every other running node reaches `node` by name, by `[pod.container]
/// reach`; without one, the engine's word that both are on the network
/// stands for it.
async fn peers_reach(
    cluster: &ClusterInfo,
    node: &str,
    deadline: Instant,
) -> Result<(), FaultError> {
    if cluster.reach.is_empty() {
        return Ok(());
    }
    let port = cluster.port.to_string();
    let values = crate::template::Values::new()
        .with("node", node)
        .with("port", &port);
    let command: Vec<String> = cluster
        .reach
        .iter()
        .map(|a| crate::template::fill(a, &values, crate::template::verbatim))
        .collect::<Result<_, _>>()
        .map_err(FaultError::Reach)?;
    // Every peer at once: each `docker exec` costs a few hundred ms.
    let mut checks = tokio::task::JoinSet::new();
    for peer in cluster.nodes.keys().filter(|p| *p != node) {
        let (cluster, peer, node, command) = (
            cluster.clone(),
            peer.clone(),
            node.to_owned(),
            command.clone(),
        );
        checks.spawn(async move { peer_reaches(&cluster, &peer, &node, &command, deadline).await });
    }
    while let Some(done) = checks.join_next().await {
        done.map_err(FaultError::ReachTask)??;
    }
    Ok(())
}

/// `peer`, when it runs, reaches `node` by `command` before `deadline`.
async fn peer_reaches(
    cluster: &ClusterInfo,
    peer: &str,
    node: &str,
    command: &[String],
    deadline: Instant,
) -> Result<(), FaultError> {
    let id = cluster.container_of(peer).await?;
    if !State::of(cluster, &id).await?.running {
        return Ok(());
    }
    let engine = cluster.engine();
    loop {
        match engine.exec(&id, command).await {
            Ok(_) => return Ok(()),
            Err(source) if Instant::now() >= deadline => {
                return Err(FaultError::Unreachable {
                    peer: peer.to_owned(),
                    node: node.to_owned(),
                    source: Box::new(source),
                })
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_survives_its_journal_line() {
        let fault = Fault {
            node: "worker-1".into(),
            action: FaultAction::Cut {
                from: vec!["gateway".into()],
                tests: true,
            },
            container: "abc".into(),
            rules: vec![Rule::drop("OUTPUT", None, "10.0.0.2", "testkit.pod=p")],
        };
        assert_eq!(Fault::from_json(&fault.to_json()).unwrap(), fault);
        assert_eq!(fault.describe(), "cut worker-1 off from gateway, the tests");
    }
}
