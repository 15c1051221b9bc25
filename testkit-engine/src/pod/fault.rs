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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cluster::{wait_node_healthy, ClusterInfo};

/// The kind a fault is journaled as, beside a test's resources: one stack
/// undoes both, newest first.
pub const JOURNAL_KIND: &str = "fault";

/// The longest an undo and its proof may take: a stopped node starts
/// again, and answers its health check, within it.
pub const UNDO_LIMIT: Duration = Duration::from_secs(30);

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

/// One `iptables` rule: its chain and its match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Rule {
    /// `DOCKER-USER` or `OUTPUT`.
    pub chain: String,
    /// What follows the chain: `-s A -d B -j DROP -m comment --comment C`.
    pub spec: Vec<String>,
}

impl Rule {
    /// `iptables` arguments that do `op` (`-I`, `-C`, `-D`) with the rule.
    fn args(&self, op: &'static str) -> Vec<&str> {
        let mut args = vec![op, self.chain.as_str()];
        args.extend(self.spec.iter().map(String::as_str));
        args
    }
}

/// The comment every rule of the pod `pod_id` carries.
pub fn rule_comment(pod_id: &str) -> String {
    format!("testkit.pod={pod_id}")
}

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
    pub fn from_json(text: &str) -> Result<Fault, String> {
        serde_json::from_str(text).map_err(|e| format!("not a journaled fault: {e}"))
    }
}

/// Plans `action` on `node`: finds its container and, for a cut, the
/// addresses its rules name.
pub async fn plan(cluster: &ClusterInfo, node: &str, action: FaultAction) -> Result<Fault, String> {
    cluster.node(node)?;
    let container = cluster.container_of(node).await?;
    let mut rules = Vec::new();
    if let FaultAction::Cut { from, tests } = &action {
        for peer in from {
            cluster.node(peer)?;
            if peer == node {
                return Err(format!("cannot cut `{node}` off from itself"));
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
            rules.push(drop_rule("DOCKER-USER", Some(&own), &theirs, &comment));
            rules.push(drop_rule("DOCKER-USER", Some(&theirs), &own, &comment));
        }
        if *tests {
            rules.push(drop_rule("OUTPUT", None, &own, &comment));
        }
    }
    Ok(Fault {
        node: node.to_owned(),
        action,
        container,
        rules,
    })
}

fn drop_rule(chain: &str, source: Option<&str>, dest: &str, comment: &str) -> Rule {
    let mut spec = Vec::new();
    if let Some(s) = source {
        spec.extend(["-s".to_owned(), format!("{s}/32")]);
    }
    spec.extend(["-d".to_owned(), format!("{dest}/32")]);
    spec.extend(
        ["-m", "comment", "--comment", comment, "-j", "DROP"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    Rule {
        chain: chain.to_owned(),
        spec,
    }
}

/// The node's address on the pod's network.
async fn address(cluster: &ClusterInfo, container: &str) -> Result<String, String> {
    let format = format!(
        "{{{{with index .NetworkSettings.Networks \"{}\"}}}}{{{{.IPAddress}}}}{{{{end}}}}",
        cluster.network
    );
    let ip = cluster
        .docker()
        .run(&["inspect", "--format", &format, container])
        .await?;
    let ip = ip.trim();
    if ip.is_empty() {
        return Err(format!(
            "container {container} has no address on {}: is it running?",
            cluster.network
        ));
    }
    Ok(ip.to_owned())
}

/// Injects a planned fault, and checks that it took.
pub async fn inject(cluster: &ClusterInfo, fault: &Fault) -> Result<(), String> {
    let docker = cluster.docker();
    let id = fault.container.as_str();
    match &fault.action {
        FaultAction::Stop => docker.run(&["stop", "--time", "5", id]).await.map(drop),
        FaultAction::Kill => docker.run(&["kill", id]).await.map(drop),
        FaultAction::Pause => docker.run(&["pause", id]).await.map(drop),
        FaultAction::Restart => docker.run(&["restart", "--time", "5", id]).await.map(drop),
        FaultAction::Cut { .. } => {
            for rule in &fault.rules {
                iptables(&rule.args("-I")).await?;
            }
            Ok(())
        }
    }
    .map_err(|e| format!("could not {}: {e}", fault.describe()))?;
    let state = State::of(cluster, id).await?;
    let took = match fault.action {
        FaultAction::Stop | FaultAction::Kill => !state.running,
        FaultAction::Pause => state.paused,
        FaultAction::Restart | FaultAction::Cut { .. } => state.running,
    };
    if !took {
        return Err(format!(
            "{} did not take: its container is {}",
            fault.describe(),
            state.status
        ));
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
    async fn of(cluster: &ClusterInfo, id: &str) -> Result<State, String> {
        let out = cluster
            .docker()
            .run(&[
                "inspect",
                "--format",
                "{{.State.Running}} {{.State.Paused}} {{.State.Status}}",
                id,
            ])
            .await?;
        let mut words = out.split_whitespace();
        Ok(State {
            running: words.next() == Some("true"),
            paused: words.next() == Some("true"),
            status: words.next().unwrap_or("unknown").to_owned(),
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
) -> Result<Reverted, String> {
    undo_all(cluster, std::slice::from_ref(fault), limit)
        .await
        .pop()
        .unwrap_or_else(|| Err("nothing to undo".to_owned()))
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
) -> Vec<Result<Reverted, String>> {
    let deadline = Instant::now() + limit;
    let mut outcomes: Vec<Result<Reverted, String>> = Vec::with_capacity(faults.len());
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
async fn revert(cluster: &ClusterInfo, fault: &Fault) -> Result<Reverted, String> {
    let id = fault.container.as_str();
    let docker = cluster.docker();
    let mut found = matches!(fault.action, FaultAction::Restart);
    for rule in &fault.rules {
        found |= remove_rule(rule).await?;
    }
    let state = State::of(cluster, id).await?;
    if state.paused {
        docker.run(&["unpause", id]).await?;
        found = true;
    } else if !state.running {
        docker.run(&["start", id]).await?;
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
async fn prove(cluster: &ClusterInfo, fault: &Fault, deadline: Instant) -> Result<(), String> {
    let state = State::of(cluster, &fault.container).await?;
    if !state.running || state.paused {
        return Err(format!("its container is {} after the undo", state.status));
    }
    let node = cluster.node(&fault.node)?;
    wait_node_healthy(&fault.node, node, deadline).await?;
    peers_reach(cluster, &fault.node, deadline).await
}

/// Deletes `rule` until none like it is left (a rule inserted twice is
/// there twice), and proves it gone; whether there was one.
async fn remove_rule(rule: &Rule) -> Result<bool, String> {
    for round in 0..16 {
        if iptables(&rule.args("-C")).await.is_err() {
            return Ok(round > 0);
        }
        iptables(&rule.args("-D")).await?;
    }
    Err(format!(
        "the rule `{} {}` is still there after 16 deletions",
        rule.chain,
        rule.spec.join(" ")
    ))
}

/// Every other running node reaches `node` by name, by `[pod.container]
/// reach`; without one, the engine's word that both are on the network
/// stands for it.
async fn peers_reach(cluster: &ClusterInfo, node: &str, deadline: Instant) -> Result<(), String> {
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
        .map_err(|p| format!("[pod.container] reach: {p}"))?;
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
        done.map_err(|e| format!("a reach check did not finish: {e}"))??;
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
) -> Result<(), String> {
    let id = cluster.container_of(peer).await?;
    if !State::of(cluster, &id).await?.running {
        return Ok(());
    }
    loop {
        let mut args = vec!["exec", id.as_str()];
        args.extend(command.iter().map(String::as_str));
        match cluster.docker().run(&args).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("`{peer}` does not reach `{node}`: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Removes every rule the pod `pod_id` left in the packet filter (a fault
/// whose undo never ran); the rules removed.
pub async fn remove_pod_rules(pod_id: &str) -> Result<Vec<String>, String> {
    let comment = rule_comment(pod_id);
    let mut removed = Vec::new();
    for chain in ["DOCKER-USER", "OUTPUT"] {
        let Ok(listing) = iptables(&["-S", chain]).await else {
            continue;
        };
        for rule in listing
            .lines()
            .filter_map(|line| owned_rule(line, chain, &comment))
        {
            remove_rule(&rule).await?;
            removed.push(format!("{chain} {}", rule.spec.join(" ")));
        }
    }
    Ok(removed)
}

/// The rule `line` of `iptables -S chain` lists, when its comment is
/// `comment` whole: a rule whose comment merely holds it
/// (`testkit.pod=<id>-admin`) is someone else's.
fn owned_rule(line: &str, chain: &str, comment: &str) -> Option<Rule> {
    let spec = split_rule(line.strip_prefix(&format!("-A {chain} "))?);
    let given = spec
        .windows(2)
        .find(|w| w[0] == "--comment")
        .map(|w| w[1].as_str())?;
    (given == comment).then(|| Rule {
        chain: chain.to_owned(),
        spec,
    })
}

/// Splits a rule as `iptables -S` prints it: words, with a quoted comment
/// as one.
fn split_rule(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            words.push(quoted[..end].to_owned());
            rest = quoted.get(end + 1..).unwrap_or("").trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            words.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    words
}

/// Runs `iptables` with `args` (waiting for the table lock); its stdout.
async fn iptables(args: &[&str]) -> Result<String, String> {
    let program = iptables_program()?;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.arg("-w").args(args).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .map_err(|_| "iptables took over 30 s".to_owned())?
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "iptables {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `iptables`, on PATH or where Debian puts it.
fn iptables_program() -> Result<PathBuf, String> {
    crate::process::find_program("iptables", None, None)
        .or_else(|| {
            ["/usr/sbin/iptables", "/sbin/iptables"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            "cutting a node off needs `iptables` (as root, on the Docker Engine's host): \
             install it (`apt-get install iptables`)"
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_rule_splits_as_it_was_given() {
        let listed =
            r#"-s 172.18.0.2/32 -d 172.18.0.3/32 -m comment --comment "testkit.pod=abc" -j DROP"#;
        let rule = drop_rule(
            "DOCKER-USER",
            Some("172.18.0.2"),
            "172.18.0.3",
            "testkit.pod=abc",
        );
        assert_eq!(split_rule(listed), rule.spec);
    }

    #[test]
    fn only_a_rule_whose_whole_comment_is_the_pods_is_its_own() {
        let comment = rule_comment("abc");
        let line =
            |c: &str| format!("-A OUTPUT -d 10.0.0.2/32 -m comment --comment \"{c}\" -j DROP");
        let own = owned_rule(&line(&comment), "OUTPUT", &comment).expect("the pod's own rule");
        assert_eq!(
            own.spec,
            drop_rule("OUTPUT", None, "10.0.0.2", &comment).spec
        );
        for foreign in [
            "testkit.pod=abc-admin",
            "x testkit.pod=abc",
            "testkit.pod=ab",
        ] {
            assert!(
                owned_rule(&line(foreign), "OUTPUT", &comment).is_none(),
                "{foreign} is not the pod's"
            );
        }
        assert!(owned_rule(&line(&comment), "DOCKER-USER", &comment).is_none());
    }

    #[test]
    fn a_fault_survives_its_journal_line() {
        let fault = Fault {
            node: "worker-1".into(),
            action: FaultAction::Cut {
                from: vec!["gateway".into()],
                tests: true,
            },
            container: "abc".into(),
            rules: vec![drop_rule("OUTPUT", None, "10.0.0.2", "testkit.pod=p")],
        };
        assert_eq!(Fault::from_json(&fault.to_json()).unwrap(), fault);
        assert_eq!(fault.describe(), "cut worker-1 off from gateway, the tests");
    }
}
