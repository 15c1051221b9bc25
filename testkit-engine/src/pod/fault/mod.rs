//! Faults of a pod of several nodes: a node stopped, killed, frozen,
//! restarted, or cut off from its peers and from the tests; the nodes
//! split by a partition's shape ([`Partition`]); a node's links made to
//! lose packets or limited in rate ([`Link`]); a node's data disk filled;
//! each one undone, and the undo proven.
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
//! and the janitor find and remove what a lost process left. A partition
//! is the cuts between the pairs its shape keeps apart. A link fault's
//! rules and queue are in the node's own namespace: they end with its
//! container (a restart makes a new one), and its undo removes them from
//! the namespace the node has then. A fault held in a node's namespace or
//! on its data disk (a tmpfs, emptied when its container stops) records
//! the namespace's identity when planned: a node started again while the
//! fault is held has lost it, and the undo fails saying so rather than
//! prove a fault undone that was silently gone. The identity is the
//! namespace's inode and the container's start: the kernel reuses a freed
//! namespace's inode at once, and a restarted container's new namespace
//! often has its old one's (seen three restarts in a row here).

mod disk;
mod link;
mod machine;
mod partition;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cluster::{wait_node_healthy, ClusterError, ClusterInfo};
use crate::containers::{EngineError, Netns, NetnsError, PacketFilterError};
pub use link::{Link, Runs, Shaping};
pub use machine::{CLOCK_SLACK, MACHINE_NODE, MACHINE_UNDO_LIMIT};
pub use partition::{Partition, ShapeError};

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
    /// A measurement on a node's disk ended without an answer.
    #[error("a measurement of a node's disk did not finish")]
    DiskTask(#[source] tokio::task::JoinError),
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
    /// A partition's shape cannot be drawn over the pod's nodes.
    #[error("cannot partition the pod by {shape}: {why}")]
    Shape {
        /// The shape, in words.
        shape: String,
        /// Why.
        why: String,
    },
    /// A link fault cannot run here, or its amount is out of range.
    #[error("refusing {link} on `{node}`: {why}")]
    LinkRefused {
        /// The fault, in words.
        link: String,
        /// The node.
        node: String,
        /// Why, and where it can run.
        why: String,
    },
    /// Something in a node's network namespace failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The node's container runs no process: it has no namespace to enter.
    #[error("`{node}` runs no process (its container is {status}): a fault on its links needs it running")]
    NotRunning {
        /// The node.
        node: String,
        /// What its container is.
        status: String,
    },
    /// A link fault was in, but its measurement does not show it.
    #[error("{fault} did not take: {measured}")]
    NotMeasured {
        /// The fault, in words.
        fault: String,
        /// What was measured.
        measured: String,
    },
    /// A link fault's rule or queue is still there after its undo.
    #[error("{what} is still there after the undo")]
    StillThere {
        /// What.
        what: String,
    },
    /// The fault cannot run on this kind of pod.
    #[error("refusing to {fault}: {why}")]
    Refused {
        /// The fault, in words.
        fault: String,
        /// Why, and what runs instead.
        why: String,
    },
    /// Something asked of a machine pod's QEMU or guest failed.
    #[error(transparent)]
    Machine(#[from] crate::machine::MachineError),
    /// The node's container was started again while a fault held in its
    /// namespace or on its data disk was in: the fault went with it.
    #[error(
        "`{node}` was restarted (or stopped and started) while {fault} was held: {now}, and \
         the fault went with the run it was injected in (started {}, namespace inode {}); a \
         link or disk fault does not outlive its node's container run, so undo it before \
         restarting the node", was.started_at, was.netns
    )]
    Restarted {
        /// The node.
        node: String,
        /// The fault, in words.
        fault: String,
        /// The run of the node's container the fault was planned in.
        was: ContainerRun,
        /// What the node has now.
        now: String,
    },
    /// The node has no data disk to fill.
    #[error(
        "`{node}` has no data disk to fill: declare one for it in testkit.toml, \
         `[pod.container.nodes.{node}] disk = {{ target = \"/data\", size_mib = 16 }}`"
    )]
    NoDisk {
        /// The node.
        node: String,
    },
    /// The node's data disk could not be filled, freed or measured.
    #[error("{what} {}", dir.display())]
    Disk {
        /// What was done.
        what: &'static str,
        /// The directory, as this host reaches it.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
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
    /// The nodes split by a shape: the pairs `apart` see nothing of each
    /// other (a cut between each); the tests reach every node.
    Partition {
        /// The shape, as planned (a random one with its seed).
        partition: Partition,
        /// The pairs of nodes kept apart.
        apart: Vec<[String; 2]>,
    },
    /// The node's packets degraded: all of them but the loopback's, or
    /// those to and from `peer`.
    Link {
        /// What is done to them.
        link: Link,
        /// The one peer, when only its link is degraded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// The node's clock set `offset_ms` ahead (behind, when negative) of
    /// the host's; undone by setting it to the host's. A machine pod's
    /// guest only: a container shares its host's clock.
    Clock {
        /// How far from the host's clock, in milliseconds.
        offset_ms: i64,
    },
    /// The node's clock strobed: for `duration_ms`, every `period_ms` it
    /// jumps `offset_ms` ahead of the host's and back, as a clock that
    /// keeps being corrected does; undone by ending the strobe and setting
    /// the clock to the host's. A machine pod's guest only.
    ClockStrobe {
        /// How far each jump goes ahead, in milliseconds.
        offset_ms: i64,
        /// How long the clock stays ahead, then behind, in milliseconds.
        period_ms: u64,
        /// How long the strobe lasts, in milliseconds.
        duration_ms: u64,
    },
    /// The node's data disk filled: `file` written into its data directory
    /// `target` until no room is left; undone by removing it.
    FillDisk {
        /// The data directory in the container.
        target: String,
        /// The file that fills it, in `target`.
        file: String,
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
    /// The packet-filter rules a cut or a partition adds to the host's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// The packet-filter rules a loss adds in the node's own namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_rules: Vec<Rule>,
    /// The token bucket a rate puts on the node's interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaping: Option<Shaping>,
    /// For a fault held in the node's namespace or on its data disk: the
    /// run of its container when planned. Another one at the undo means
    /// the container was started again, and the fault lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_in: Option<ContainerRun>,
}

/// One run of a node's container, from a start to its end: what a fault
/// held in its namespace or on its tmpfs disk lasts as long as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContainerRun {
    /// The inode of its network namespace (`/proc/<pid>/ns/net`).
    pub netns: u64,
    /// When it started, as the engine says (`State.StartedAt`).
    pub started_at: String,
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
            FaultAction::Cut { .. } if self.on_machine() => {
                format!("unplug {}'s network cable", self.node)
            }
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
            FaultAction::Partition { partition, apart } => {
                let pairs: Vec<String> = apart.iter().map(|[a, b]| format!("{a}|{b}")).collect();
                format!(
                    "partition by {} (apart: {})",
                    partition.describe(),
                    pairs.join(", ")
                )
            }
            FaultAction::Link { link, peer } => match peer {
                Some(peer) => format!(
                    "{} on the link between {} and {peer}",
                    link.describe(),
                    self.node
                ),
                None => format!("{} on {}", link.describe(), self.node),
            },
            FaultAction::Clock { offset_ms } => format!(
                "jump {}'s clock {} by {}",
                self.node,
                if *offset_ms < 0 { "back" } else { "forward" },
                humantime::format_duration(Duration::from_millis(offset_ms.unsigned_abs()))
            ),
            FaultAction::ClockStrobe {
                offset_ms,
                period_ms,
                duration_ms,
            } => format!(
                "strobe {}'s clock {} ahead every {} for {}",
                self.node,
                humantime::format_duration(Duration::from_millis(offset_ms.unsigned_abs())),
                humantime::format_duration(Duration::from_millis(*period_ms)),
                humantime::format_duration(Duration::from_millis(*duration_ms))
            ),
            FaultAction::FillDisk { target, .. } if target.is_empty() => {
                format!("fill {}'s data disk", self.node)
            }
            FaultAction::FillDisk { target, .. } => {
                format!("fill {}'s data disk ({target})", self.node)
            }
        }
    }

    /// The action's one word: `stop`, `kill`, `pause`, `restart`, `cut`,
    /// `partition`, or the link fault's (`loss`, `rate`).
    pub fn verb(&self) -> &'static str {
        match &self.action {
            FaultAction::Stop => "stop",
            FaultAction::Kill => "kill",
            FaultAction::Pause => "pause",
            FaultAction::Restart => "restart",
            FaultAction::Cut { .. } => "cut",
            FaultAction::Partition { .. } => "partition",
            FaultAction::Link { link, .. } => link.word(),
            FaultAction::Clock { .. } => "clock",
            FaultAction::ClockStrobe { .. } => "clock_strobe",
            FaultAction::FillDisk { .. } => "fill_disk",
        }
    }

    /// Whether it acts on the node's container itself (a stop, a kill, a
    /// freeze, a restart, a cut), whose undo starts or thaws it.
    fn on_container(&self) -> bool {
        !matches!(
            self.action,
            FaultAction::Partition { .. } | FaultAction::Link { .. } | FaultAction::FillDisk { .. }
        )
    }

    /// Whether it is a machine pod's: its node is [`MACHINE_NODE`] and its
    /// container the machine's run directory (a path, never an id).
    fn on_machine(&self) -> bool {
        self.node == MACHINE_NODE && self.container.starts_with('/')
    }

    /// A fault of a machine pod's guest: what it is done to is the machine
    /// whose run directory is `run_dir`.
    fn of_machine(node: &str, action: FaultAction, run_dir: &str) -> Fault {
        Fault {
            node: node.to_owned(),
            action,
            container: run_dir.to_owned(),
            rules: Vec::new(),
            node_rules: Vec::new(),
            shaping: None,
            held_in: None,
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

/// Where a test's faults go: the nodes of a pod of several, or a machine
/// pod's guest.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Target<'a> {
    /// A pod of several containers (`[pod.container.nodes]`).
    Cluster(&'a ClusterInfo),
    /// A machine pod (`[pod.vm]`), one node: [`MACHINE_NODE`].
    Machine(&'a crate::machine::MachineAccess),
}

impl Target<'_> {
    /// The target of a pod's handle: its machine, or its nodes; `None` for
    /// a pod of one process or container, which takes no faults.
    pub fn of(handle: &super::handle::PodHandle) -> Option<Target<'_>> {
        match (handle.machine(), handle.cluster()) {
            (Some(m), _) => Some(Target::Machine(m)),
            (None, Some(c)) => Some(Target::Cluster(c)),
            (None, None) => None,
        }
    }

    /// Plans `action` on `node` ([`plan`] on a cluster).
    pub async fn plan(self, node: &str, action: FaultAction) -> Result<Fault, FaultError> {
        match self {
            Target::Cluster(c) => plan(c, node, action).await,
            Target::Machine(m) => machine::plan(m, node, action),
        }
    }

    /// Injects a planned fault and shows it took ([`inject`] on a cluster).
    pub async fn inject(self, fault: &Fault) -> Result<(), FaultError> {
        match self {
            Target::Cluster(c) => inject(c, fault).await,
            Target::Machine(m) => machine::inject(m, fault).await,
        }
    }

    /// Undoes the faults of one test, oldest first in `faults`, and proves
    /// them ([`undo_all`] on a cluster, within [`UNDO_LIMIT`]; on a machine
    /// within [`MACHINE_UNDO_LIMIT`], which a reset's boot needs).
    pub async fn undo_all(self, faults: &[Fault]) -> Vec<Result<Reverted, FaultError>> {
        match self {
            Target::Cluster(c) => undo_all(c, faults, UNDO_LIMIT).await,
            Target::Machine(m) => machine::undo_all(m, faults, MACHINE_UNDO_LIMIT).await,
        }
    }
}

/// Plans `action` on `node`: finds its container and, for a cut, the
/// addresses its rules name.
pub async fn plan(
    cluster: &ClusterInfo,
    node: &str,
    action: FaultAction,
) -> Result<Fault, FaultError> {
    match action {
        FaultAction::Partition { partition, .. } => {
            return plan_partition(cluster, partition).await
        }
        FaultAction::Link { link, peer } => return plan_link(cluster, node, link, peer).await,
        FaultAction::Clock { .. } | FaultAction::ClockStrobe { .. } => {
            return Err(FaultError::Refused {
                fault: Fault::of_machine(node, action, "").describe(),
                why: "a container shares its host's clock: this fault runs on machine pods \
                      ([pod.vm])"
                    .to_owned(),
            })
        }
        FaultAction::FillDisk { .. } => return plan_fill(cluster, node).await,
        _ => {}
    }
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
        node_rules: Vec::new(),
        shaping: None,
        held_in: None,
    })
}

/// Plans a partition: draws its shape over the pod's nodes, and the two
/// drop rules of a cut between each pair it keeps apart.
async fn plan_partition(cluster: &ClusterInfo, shape: Partition) -> Result<Fault, FaultError> {
    let nodes: Vec<String> = cluster.nodes.keys().cloned().collect();
    let (partition, apart) = shape.draw(&nodes).map_err(|e| FaultError::Shape {
        shape: shape.describe(),
        why: e.0,
    })?;
    let comment = rule_comment(&cluster.pod_id);
    let mut rules = Vec::new();
    for [a, b] in &apart {
        let a = address(cluster, &cluster.container_of(a).await?).await?;
        let b = address(cluster, &cluster.container_of(b).await?).await?;
        rules.push(Rule::drop("DOCKER-USER", Some(&a), &b, &comment));
        rules.push(Rule::drop("DOCKER-USER", Some(&b), &a, &comment));
    }
    Ok(Fault {
        node: nodes.join(", "),
        action: FaultAction::Partition { partition, apart },
        container: String::new(),
        rules,
        node_rules: Vec::new(),
        shaping: None,
        held_in: None,
    })
}

/// Plans a link fault on `node` (to and from `peer` only, when given):
/// refuses what a pod of containers cannot carry, and names the rules or
/// the queue it adds in the node's namespace.
async fn plan_link(
    cluster: &ClusterInfo,
    node: &str,
    link: Link,
    peer: Option<String>,
) -> Result<Fault, FaultError> {
    cluster.node(node)?;
    if let Some(why) = link.refused_on_containers(peer.as_deref()) {
        return Err(FaultError::LinkRefused {
            link: link.describe(),
            node: node.to_owned(),
            why,
        });
    }
    if let Some(p) = &peer {
        cluster.node(p)?;
        if p == node {
            return Err(FaultError::LinkRefused {
                link: link.describe(),
                node: node.to_owned(),
                why: "its peer is the node itself: name another node".to_owned(),
            });
        }
    }
    let container = cluster.container_of(node).await?;
    let own = address(cluster, &container).await?;
    let held_in = container_run(cluster, node, &container).await?;
    let comment = rule_comment(&cluster.pod_id);
    let (mut node_rules, mut shaping) = (Vec::new(), None);
    match &link {
        Link::Loss { ppm } => {
            let theirs = match &peer {
                Some(p) => Some(address(cluster, &cluster.container_of(p).await?).await?),
                None => None,
            };
            let p = f64::from(*ppm) / 1e6;
            for chain in ["OUTPUT", "INPUT"] {
                node_rules.push(Rule::lose(chain, theirs.as_deref(), p, &comment));
            }
        }
        Link::Rate { kbit } => {
            let netns = Netns::of_pid(running_pid(cluster, node, &container).await?);
            shaping = Some(Shaping::new(netns.interface_with(&own).await?, *kbit));
        }
        _ => unreachable!("refused above"),
    }
    Ok(Fault {
        node: node.to_owned(),
        action: FaultAction::Link { link, peer },
        container,
        rules: Vec::new(),
        node_rules,
        shaping,
        held_in: Some(held_in),
    })
}

/// Plans filling `node`'s data disk: its directory, a file name of the
/// fault's own, and the namespace it runs in now.
async fn plan_fill(cluster: &ClusterInfo, node: &str) -> Result<Fault, FaultError> {
    let target = cluster
        .node(node)?
        .disk
        .clone()
        .ok_or_else(|| FaultError::NoDisk {
            node: node.to_owned(),
        })?;
    let container = cluster.container_of(node).await?;
    let held_in = container_run(cluster, node, &container).await?;
    let file = format!(".testkit-fill-{}", crate::ids::random_id(8));
    Ok(Fault {
        node: node.to_owned(),
        action: FaultAction::FillDisk { target, file },
        container,
        rules: Vec::new(),
        node_rules: Vec::new(),
        shaping: None,
        held_in: Some(held_in),
    })
}

/// The pid of the node's container, when it runs in the namespace the
/// fault was planned in; the restart that lost the fault, when not.
async fn same_run(cluster: &ClusterInfo, fault: &Fault) -> Result<Option<u32>, FaultError> {
    let state = State::of(cluster, &fault.container).await?;
    let Some(was) = &fault.held_in else {
        return Ok(state.pid);
    };
    let restarted = |now: String| FaultError::Restarted {
        node: fault.node.clone(),
        fault: fault.describe(),
        was: was.clone(),
        now,
    };
    let Some(pid) = state.pid else {
        return Err(restarted(format!(
            "its container is {} and has no namespace now",
            state.status
        )));
    };
    let netns = Netns::of_pid(pid).inode()?;
    if netns == was.netns && state.started_at == was.started_at {
        Ok(Some(pid))
    } else {
        Err(restarted(format!(
            "its container started again at {} (namespace inode {netns})",
            state.started_at
        )))
    }
}

/// The run of `node`'s container now: it must run.
async fn container_run(
    cluster: &ClusterInfo,
    node: &str,
    container: &str,
) -> Result<ContainerRun, FaultError> {
    let state = State::of(cluster, container).await?;
    match state.pid {
        Some(pid) if state.running => Ok(ContainerRun {
            netns: Netns::of_pid(pid).inode()?,
            started_at: state.started_at,
        }),
        _ => Err(FaultError::NotRunning {
            node: node.to_owned(),
            status: state.status,
        }),
    }
}

/// The pid of the fault's node, running in the namespace the fault was
/// planned in.
async fn held_pid(cluster: &ClusterInfo, fault: &Fault) -> Result<u32, FaultError> {
    match same_run(cluster, fault).await? {
        Some(pid) => Ok(pid),
        None => running_pid(cluster, &fault.node, &fault.container).await,
    }
}

/// The pid of the running container of `node`: the way into its
/// namespace.
async fn running_pid(
    cluster: &ClusterInfo,
    node: &str,
    container: &str,
) -> Result<u32, FaultError> {
    let state = State::of(cluster, container).await?;
    match state.pid {
        Some(pid) if state.running => Ok(pid),
        _ => Err(FaultError::NotRunning {
            node: node.to_owned(),
            status: state.status,
        }),
    }
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
            FaultAction::Cut { .. } | FaultAction::Partition { .. } => {
                let filter = PacketFilter::on_host()?;
                for rule in &fault.rules {
                    filter.insert(rule).await?;
                }
            }
            FaultAction::Link { link, peer } => {
                if let Link::Loss { .. } = link {
                    // Measured before its rules go in: a peer the node
                    // cannot reach at all would show any loss as taken.
                    baseline(cluster, fault, peer.as_deref()).await?;
                }
                let pid = held_pid(cluster, fault).await?;
                let filter = PacketFilter::in_namespace_of(pid)?;
                for rule in &fault.node_rules {
                    filter.insert(rule).await?;
                }
                if let Some(s) = &fault.shaping {
                    Netns::of_pid(pid)
                        .limit_rate(&s.interface, &s.handle, s.kbit, s.burst)
                        .await?;
                }
            }
            FaultAction::Clock { .. } | FaultAction::ClockStrobe { .. } => {
                return Err(FaultError::Refused {
                    fault: fault.describe(),
                    why: "it runs on machine pods only".to_owned(),
                })
            }
            FaultAction::FillDisk { target, file } => {
                let pid = held_pid(cluster, fault).await?;
                let (dir, filler) = disk::paths(pid, target, file);
                let largest = crate::config::MAX_DISK_MIB << 20;
                tokio::task::spawn_blocking(move || disk::fill(&dir, &filler, largest))
                    .await
                    .map_err(FaultError::DiskTask)?
                    .map_err(|source| FaultError::Disk {
                        what: "cannot fill",
                        dir: disk::paths(pid, target, file).0,
                        source,
                    })?;
            }
        }
        Ok(())
    }
    .await;
    done.map_err(|source| FaultError::Inject {
        fault: fault.describe(),
        source: Box::new(source),
    })?;
    if let FaultAction::Partition { apart, .. } = &fault.action {
        rules_in_place(&fault.rules).await?;
        return cut_measured(cluster, fault, apart).await;
    }
    if let FaultAction::Link { link, peer } = &fault.action {
        return measure(cluster, fault, link, peer.as_deref()).await;
    }
    if let FaultAction::FillDisk { target, file } = &fault.action {
        return disk_full(cluster, fault, target, file).await;
    }
    let state = State::of(cluster, id).await?;
    let took = match fault.action {
        FaultAction::Stop | FaultAction::Kill => !state.running,
        FaultAction::Pause => state.paused,
        _ => state.running,
    };
    if !took {
        return Err(FaultError::DidNotTake {
            fault: fault.describe(),
            status: state.status,
        });
    }
    Ok(())
}

/// Every rule of a partition is in the host's packet filter.
async fn rules_in_place(rules: &[Rule]) -> Result<(), FaultError> {
    let filter = PacketFilter::on_host()?;
    for rule in rules {
        if !filter.holds(rule).await? {
            return Err(FaultError::NotMeasured {
                fault: "the partition".to_owned(),
                measured: format!("its rule `{}` is not in the packet filter", rule.describe()),
            });
        }
    }
    Ok(())
}

/// How many datagrams are sent each way across a cut to show it took.
const CUT_PROBE: u32 = 20;

/// Shows a partition took by a measurement, not by its rules alone:
/// between each pair it keeps apart, datagrams sent each way from inside
/// one node's namespace to the other's, none arriving. A pair with a node
/// that runs no process (another fault stopped it) cannot be measured,
/// and a node that does not run receives nothing anyway.
async fn cut_measured(
    cluster: &ClusterInfo,
    fault: &Fault,
    apart: &[[String; 2]],
) -> Result<(), FaultError> {
    for [a, b] in apart {
        let (ida, idb) = (
            cluster.container_of(a).await?,
            cluster.container_of(b).await?,
        );
        let (Some(pa), Some(pb)) = (
            State::of(cluster, &ida).await?.pid,
            State::of(cluster, &idb).await?.pid,
        ) else {
            continue;
        };
        let (na, nb) = (Netns::of_pid(pa), Netns::of_pid(pb));
        let (addr_a, addr_b) = (address(cluster, &ida).await?, address(cluster, &idb).await?);
        for (from, to, ns_from, ns_to, at) in [(a, b, na, nb, &addr_b), (b, a, nb, na, &addr_a)] {
            let crossed = ns_from.datagrams_crossing(ns_to, at, CUT_PROBE).await?;
            if crossed > 0 {
                return Err(FaultError::NotMeasured {
                    fault: fault.describe(),
                    measured: format!(
                        "{crossed} of {CUT_PROBE} datagrams from {from} to {to} crossed the cut"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Shows a filled disk took: no byte free in the node's data directory,
/// and a write there fails with ENOSPC.
async fn disk_full(
    cluster: &ClusterInfo,
    fault: &Fault,
    target: &str,
    file: &str,
) -> Result<(), FaultError> {
    let pid = held_pid(cluster, fault).await?;
    let (dir, _) = disk::paths(pid, target, file);
    let measured = dir.clone();
    let (free, fits) = tokio::task::spawn_blocking(move || {
        Ok::<_, std::io::Error>((
            disk::free_bytes(&measured)?.0,
            disk::write_fits(&measured, 4096)?,
        ))
    })
    .await
    .map_err(FaultError::DiskTask)?
    .map_err(|source| FaultError::Disk {
        what: "cannot measure",
        dir,
        source,
    })?;
    if free > 0 || fits {
        return Err(FaultError::NotMeasured {
            fault: fault.describe(),
            measured: format!(
                "{free} bytes are free in {target} and a write of 4 KiB {}",
                if fits { "fits" } else { "does not fit" }
            ),
        });
    }
    Ok(())
}

/// A node and the peer its link faults are measured against.
struct Pair {
    node_ns: Netns,
    own: String,
    name: String,
    peer_ns: Netns,
    theirs: String,
}

/// The fault's node and its peer: `peer`, or the first other node that
/// runs unfrozen.
async fn pair(
    cluster: &ClusterInfo,
    fault: &Fault,
    peer: Option<&str>,
) -> Result<Pair, FaultError> {
    let node_pid = running_pid(cluster, &fault.node, &fault.container).await?;
    let own = address(cluster, &fault.container).await?;
    let mut other = None;
    let candidates: Vec<&String> = match peer {
        Some(p) => cluster.nodes.keys().filter(|n| *n == p).collect(),
        None => cluster.nodes.keys().filter(|n| **n != fault.node).collect(),
    };
    for name in candidates {
        let id = cluster.container_of(name).await?;
        let state = State::of(cluster, &id).await?;
        if let (true, false, Some(pid)) = (state.running, state.paused, state.pid) {
            other = Some((name.clone(), pid, address(cluster, &id).await?));
            break;
        }
    }
    let Some((name, peer_pid, theirs)) = other else {
        return Err(FaultError::NotMeasured {
            fault: fault.describe(),
            measured: "no peer runs unfrozen to measure it against".to_owned(),
        });
    };
    Ok(Pair {
        node_ns: Netns::of_pid(node_pid),
        own,
        name,
        peer_ns: Netns::of_pid(peer_pid),
        theirs,
    })
}

impl Pair {
    /// `sent` datagrams from `node` to the peer, then back: for each way,
    /// how many arrived, from whom, to whom.
    async fn bursts<'a>(
        &'a self,
        node: &'a str,
        sent: u32,
    ) -> Result<[(u32, &'a str, &'a str); 2], FaultError> {
        let (node_ns, peer_ns) = (self.node_ns, self.peer_ns);
        let out = node_ns
            .datagrams_arriving(peer_ns, &self.theirs, sent)
            .await?;
        let back = peer_ns.datagrams_arriving(node_ns, &self.own, sent).await?;
        Ok([(out, node, &self.name), (back, &self.name, node)])
    }
}

/// Before a loss goes in: a short burst each way between the node and its
/// peer must show the path up, or no loss measured afterwards could be
/// told from a path that was already down (another fault's cut, a
/// partition that left the node no peer it reaches).
async fn baseline(
    cluster: &ClusterInfo,
    fault: &Fault,
    peer: Option<&str>,
) -> Result<(), FaultError> {
    let sent = link::BASELINE_COUNT;
    let pair = pair(cluster, fault, peer).await?;
    for (arrived, from, to) in pair.bursts(&fault.node, sent).await? {
        if !link::baseline_up(sent, arrived) {
            return Err(FaultError::NotMeasured {
                fault: fault.describe(),
                measured: format!(
                    "before it went in, only {arrived} of {sent} datagrams from {from} to {to} \
                     arrived: the path is down already (another fault of the test cutting \
                     {from} off from {to}?), so no loss could be shown to take; inject the \
                     link fault before the cut or partition, or name a reachable peer"
                ),
            });
        }
    }
    Ok(())
}

/// Measures a link fault that is in: datagrams counted each way between
/// the node and a peer (`peer`, or the first other node that runs
/// unfrozen) for a loss, a timed transfer to it for a rate.
async fn measure(
    cluster: &ClusterInfo,
    fault: &Fault,
    link: &Link,
    peer: Option<&str>,
) -> Result<(), FaultError> {
    let pair = pair(cluster, fault, peer).await?;
    match link {
        Link::Loss { ppm } => {
            let sent = link::probe_count(*ppm);
            let bursts = pair.bursts(&fault.node, sent).await?;
            let shown = |arrived: u32, from: &str, to: &str| {
                format!(
                    "{} of {sent} datagrams from {from} to {to} lost ({}), {} expected",
                    sent - arrived.min(sent),
                    link::percent(
                        ((sent - arrived.min(sent)) as u64 * 1_000_000 / sent as u64) as u32
                    ),
                    link::percent(*ppm)
                )
            };
            for (arrived, from, to) in bursts {
                if !link::loss_took(*ppm, sent, arrived) {
                    return Err(FaultError::NotMeasured {
                        fault: fault.describe(),
                        measured: shown(arrived, from, to),
                    });
                }
            }
        }
        Link::Rate { .. } => {
            let s = fault
                .shaping
                .as_ref()
                .expect("a rate is planned with its bucket");
            let bps = pair
                .node_ns
                .transfer_rate(pair.peer_ns, &pair.theirs, s.probe_bytes(), s.burst)
                .await?;
            if !s.took(bps) {
                return Err(FaultError::NotMeasured {
                    fault: fault.describe(),
                    measured: format!(
                        "a transfer from {} to {} ran at {:.0} kbit/s",
                        fault.node,
                        pair.name,
                        bps / 1000.0
                    ),
                });
            }
        }
        _ => {}
    }
    Ok(())
}

/// A container's state, as the engine says.
struct State {
    running: bool,
    paused: bool,
    status: String,
    started_at: String,
    /// Its main process, when it runs one.
    pid: Option<u32>,
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
                started_at: c.state.started_at.clone(),
                pid: (c.state.pid > 0).then_some(c.state.pid),
            },
            None => State {
                running: false,
                paused: false,
                status: "unknown".to_owned(),
                started_at: String::new(),
                pid: None,
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
    if !fault.on_container() {
        match &fault.action {
            FaultAction::Link { .. } => found |= revert_link(cluster, fault).await?,
            FaultAction::FillDisk { target, file } => {
                if let Some(pid) = same_run(cluster, fault).await? {
                    let (dir, filler) = disk::paths(pid, target, file);
                    found |= disk::free(&filler).map_err(|source| FaultError::Disk {
                        what: "cannot free",
                        dir,
                        source,
                    })?;
                }
            }
            _ => {}
        }
        return Ok(if found {
            Reverted::Undone
        } else {
            Reverted::AlreadyUndone
        });
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

/// Removes a link fault's rules and queue from the node's namespace, as
/// it is now; whether any was there. A container that runs no process has
/// no namespace, and nothing of the fault left.
async fn revert_link(cluster: &ClusterInfo, fault: &Fault) -> Result<bool, FaultError> {
    let Some(pid) = same_run(cluster, fault).await? else {
        return Ok(false);
    };
    let mut found = false;
    if !fault.node_rules.is_empty() {
        let filter = PacketFilter::in_namespace_of(pid)?;
        for rule in &fault.node_rules {
            found |= filter.remove(rule).await?;
        }
    }
    if let Some(s) = &fault.shaping {
        found |= Netns::of_pid(pid)
            .remove_root(&s.interface, &s.handle)
            .await?;
    }
    Ok(found)
}

/// Nothing of a link fault is left in the node's namespace: none of its
/// rules, no queue of its handle.
async fn link_gone(cluster: &ClusterInfo, fault: &Fault) -> Result<(), FaultError> {
    let Some(pid) = same_run(cluster, fault).await? else {
        return Ok(());
    };
    if !fault.node_rules.is_empty() {
        let filter = PacketFilter::in_namespace_of(pid)?;
        for rule in &fault.node_rules {
            if filter.holds(rule).await? {
                return Err(FaultError::StillThere {
                    what: format!(
                        "the rule `{}` in {}'s namespace",
                        rule.describe(),
                        fault.node
                    ),
                });
            }
        }
    }
    if let Some(s) = &fault.shaping {
        let root = Netns::of_pid(pid).root_qdisc(&s.interface).await?;
        if root.as_ref().is_some_and(|q| q.handle == s.handle) {
            return Err(FaultError::StillThere {
                what: format!(
                    "the token bucket {} on {}'s {}",
                    s.handle, fault.node, s.interface
                ),
            });
        }
    }
    Ok(())
}

/// Nothing of a filled disk is left: its file gone, and a write of 64 KiB
/// fits in the data directory again.
async fn disk_freed(
    cluster: &ClusterInfo,
    fault: &Fault,
    target: &str,
    file: &str,
) -> Result<(), FaultError> {
    let Some(pid) = same_run(cluster, fault).await? else {
        return Ok(());
    };
    let (dir, filler) = disk::paths(pid, target, file);
    if filler.exists() {
        return Err(FaultError::StillThere {
            what: format!("the file {file} filling {}'s {target}", fault.node),
        });
    }
    let measured = dir.clone();
    let room = tokio::task::spawn_blocking(move || disk::room_back(&measured))
        .await
        .map_err(FaultError::DiskTask)?
        .map_err(|source| FaultError::Disk {
            what: "cannot write into",
            dir,
            source,
        })?;
    if !room {
        return Err(FaultError::NotBack {
            status: format!("out of room in {target} (a write of 64 KiB fails)"),
        });
    }
    Ok(())
}

/// Proves a reverted fault undone before `deadline`: its container runs
/// unfrozen, the node answers its health check, every peer reaches it. A
/// partition's proof is every node's; a link fault's, first, that nothing
/// of it is left in the node's namespace.
async fn prove(cluster: &ClusterInfo, fault: &Fault, deadline: Instant) -> Result<(), FaultError> {
    if let FaultAction::Partition { .. } = fault.action {
        let filter = PacketFilter::on_host()?;
        for rule in &fault.rules {
            if filter.holds(rule).await? {
                return Err(FaultError::StillThere {
                    what: format!("the partition's rule `{}`", rule.describe()),
                });
            }
        }
        for node in cluster.nodes.keys() {
            wait_node_healthy(node, cluster.node(node)?, deadline).await?;
            peers_reach(cluster, node, deadline).await?;
        }
        return Ok(());
    }
    if let FaultAction::Link { .. } = fault.action {
        link_gone(cluster, fault).await?;
    }
    if let FaultAction::FillDisk { target, file } = &fault.action {
        disk_freed(cluster, fault, target, file).await?;
    }
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
            node_rules: Vec::new(),
            shaping: None,
            held_in: None,
        };
        assert_eq!(Fault::from_json(&fault.to_json()).unwrap(), fault);
        assert_eq!(fault.describe(), "cut worker-1 off from gateway, the tests");
    }
}
