//! Watching the nodes of a pod of several while it runs.
//!
//! The pod's process is the engine's events of its nodes (see
//! [`cluster`](super::cluster)): it lives whatever becomes of a node, so a
//! node that exits ends nothing the runner waits on. This watch reads the
//! same events, as JSON, from the pod's start until it is stopped, and
//! keeps every exit of a node's container ([`NodeExit`]): when, its exit
//! code, whether it ran out of memory, the signals sent to it through the
//! engine before (`docker stop`, `docker kill`), and its last lines, read
//! as it is seen. Whether an exit was a fault a test injected is for the
//! caller to judge, from the fault journal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::io::AsyncBufReadExt;

use super::container::{ContainerRecord, NODE_LABEL, POD_LABEL, ROLE_LABEL};
use crate::containers::{Engine, Event, Filter};

/// How many of its last lines an exit keeps.
const LAST_LINES: usize = 5;

/// Why the nodes of a pod cannot be watched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeWatchError {
    /// `docker events` could not start.
    #[error("cannot start `{docker} events` to watch the pod's nodes")]
    Spawn {
        /// The `docker` program.
        docker: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One exit of a node's container.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeExit {
    /// The node.
    pub node: String,
    /// Its container's id.
    pub container: String,
    /// When the engine saw it exit.
    pub at: SystemTime,
    /// The container's exit code, when the engine gave one.
    pub exit_code: Option<i32>,
    /// Whether the kernel killed it for running out of memory.
    pub oom: bool,
    /// The signals sent to it through the engine since it last started
    /// (`docker stop`, `docker kill`), in order: `15`, `9`.
    pub signals: Vec<String>,
    /// Its last lines, stdout and stderr in the order written, redacted.
    pub last_lines: Vec<String>,
    /// Whether its container started again after (a restart).
    pub started_again: bool,
}

impl NodeExit {
    /// `exit code 0`, `exit code 134 (SIGABRT: 128 + 6)`, with `, killed
    /// for running out of memory` or the signals the engine sent it.
    pub fn status(&self) -> String {
        let mut status = match self.exit_code {
            Some(code) => match signal_of(code) {
                Some(signal) => format!("exit code {code} ({signal}: 128 + {})", code - 128),
                None => format!("exit code {code}"),
            },
            None => "an unknown exit code".to_owned(),
        };
        if self.oom {
            status.push_str(", killed for running out of memory");
        }
        if !self.signals.is_empty() {
            status.push_str(&format!(
                ", after the engine sent it signal {} (`docker stop`, `kill` or `restart`)",
                self.signals.join(", then ")
            ));
        }
        if self.started_again {
            status.push_str(", then started again");
        }
        status
    }
}

/// The signal whose death a container's exit code `code` reports, as the
/// engine reports it (128 + the signal's number).
fn signal_of(code: i32) -> Option<&'static str> {
    let number = code.checked_sub(128).filter(|n| (1..=31).contains(n))?;
    nix::sys::signal::Signal::try_from(number)
        .ok()
        .map(|s| s.as_str())
}

/// What the watch saw.
#[derive(Debug, Default)]
struct Seen {
    exits: Vec<NodeExit>,
    /// Why the events stopped coming before the watch was stopped.
    ended: Option<String>,
}

/// The watch over the nodes of one pod, until [`NodeWatch::stop`] (or
/// drop): a `docker events` process in a process group of its own.
#[derive(Debug)]
pub struct NodeWatch {
    seen: Arc<Mutex<Seen>>,
    pgid: i32,
    task: tokio::task::JoinHandle<()>,
}

impl NodeWatch {
    /// Watches the nodes of the pod `record` names, from its start.
    pub fn start(record: &ContainerRecord) -> Result<NodeWatch, NodeWatchError> {
        let engine = record.engine();
        let mut cmd = engine.events_command(
            record.started_at.saturating_sub(1),
            &[
                Filter::label(POD_LABEL, &record.pod_id),
                Filter::label(ROLE_LABEL, "pod"),
                Filter::Type("container"),
            ],
        );
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let (mut child, pgid) =
            crate::process::spawn_in_group(&mut cmd).map_err(|source| NodeWatchError::Spawn {
                docker: record.docker.display().to_string(),
                source,
            })?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
            else {
                return;
            };
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let mut follow = Follow::default();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(event) = serde_json::from_str::<Event>(&line) else {
                    continue;
                };
                if event.action == "start" {
                    // A restart: the exit it follows is not the node's end.
                    let id = &event.actor.id;
                    let mut seen = lock(&shared);
                    if let Some(exit) = seen.exits.iter_mut().rev().find(|e| &e.container == id) {
                        exit.started_again = true;
                    }
                }
                if let Some(exit) = follow.event(event) {
                    let exit = NodeExit {
                        last_lines: last_lines(&engine, &exit.container).await,
                        ..exit
                    };
                    lock(&shared).exits.push(exit);
                }
            }
            let mut said = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut said).await;
            let status = child.wait().await;
            lock(&shared).ended = Some(format!(
                "`docker events` ended ({}){}",
                status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                match crate::redact(said.trim()) {
                    s if s.is_empty() => String::new(),
                    s => format!(": {s}"),
                }
            ));
        });
        Ok(NodeWatch { seen, pgid, task })
    }

    /// The process group of its `docker events`, to end should the caller
    /// die.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Every exit of a node seen so far, in order.
    pub fn exits(&self) -> Vec<NodeExit> {
        lock(&self.seen).exits.clone()
    }

    /// Why the watch went blind before it was stopped, if it did.
    pub fn ended(&self) -> Option<String> {
        lock(&self.seen).ended.clone()
    }

    /// Stops watching: its `docker events` is killed.
    pub fn stop(self) {
        // Dropping the task drops the child, which kills it.
        self.task.abort();
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the events said of each container since it last started.
#[derive(Debug, Default)]
struct Follow {
    signals: BTreeMap<String, Vec<String>>,
    oom: BTreeSet<String>,
}

impl Follow {
    /// Takes in one event; an exit of a node when it is one (its last
    /// lines not read yet).
    fn event(&mut self, event: Event) -> Option<NodeExit> {
        let id = event.actor.id;
        let attributes = event.actor.attributes;
        let node = attributes.get(NODE_LABEL).filter(|n| !n.is_empty())?;
        match event.action.as_str() {
            "start" => {
                self.signals.remove(&id);
                self.oom.remove(&id);
                None
            }
            "kill" => {
                let signal = attributes.get("signal").cloned().unwrap_or_default();
                self.signals.entry(id).or_default().push(signal);
                None
            }
            "oom" => {
                self.oom.insert(id);
                None
            }
            "die" => Some(NodeExit {
                node: node.clone(),
                at: SystemTime::UNIX_EPOCH + Duration::from_nanos(event.time_nano),
                exit_code: attributes.get("exitCode").and_then(|c| c.parse().ok()),
                oom: self.oom.remove(&id),
                signals: self.signals.remove(&id).unwrap_or_default(),
                last_lines: Vec::new(),
                started_again: false,
                container: id,
            }),
            _ => None,
        }
    }
}

/// The last lines the container `id` wrote, stdout and stderr in the order
/// written, redacted; none when it cannot be read (a removed container).
async fn last_lines(engine: &Engine, id: &str) -> Vec<String> {
    // Read while the watch goes on: a slow engine costs it 10 s at most.
    let logs = engine.logs(id, Some(LAST_LINES));
    let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(10), logs).await else {
        return Vec::new();
    };
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let mut lines: Vec<(SystemTime, &str)> = text
        .lines()
        .filter_map(|l| {
            let (at, rest) = l.split_once(' ')?;
            let at = humantime::parse_rfc3339_weak(at.trim_end_matches('Z')).ok()?;
            Some((at, rest)).filter(|(_, r)| !r.trim().is_empty())
        })
        .collect();
    lines.sort_by_key(|(at, _)| *at);
    let skip = lines.len().saturating_sub(LAST_LINES);
    lines
        .into_iter()
        .skip(skip)
        .map(|(_, l)| crate::redact(l).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn a_die_after_a_kill_is_an_exit_with_its_code_and_the_signal() {
        let mut follow = Follow::default();
        let attrs = r#""testkit.node":"worker-1","testkit.pod":"p""#;
        for line in [
            format!(
                r#"{{"Action":"start","Actor":{{"ID":"c1","Attributes":{{{attrs}}}}},"timeNano":1}}"#
            ),
            format!(
                r#"{{"Action":"kill","Actor":{{"ID":"c1","Attributes":{{{attrs},"signal":"15"}}}},"timeNano":2}}"#
            ),
        ] {
            assert_eq!(follow.event(event(&line)), None);
        }
        let die = format!(
            r#"{{"status":"die","Type":"container","Action":"die","Actor":{{"ID":"c1","Attributes":{{{attrs},"exitCode":"143"}}}},"time":3,"timeNano":3000000000}}"#
        );
        let exit = follow.event(event(&die)).unwrap();
        assert_eq!(exit.node, "worker-1");
        assert_eq!(exit.exit_code, Some(143));
        assert_eq!(exit.at, SystemTime::UNIX_EPOCH + Duration::from_secs(3));
        assert_eq!(
            exit.status(),
            "exit code 143 (SIGTERM: 128 + 15), after the engine sent it signal 15 \
             (`docker stop`, `kill` or `restart`)"
        );
    }

    #[test]
    fn a_restarted_node_forgets_the_signals_of_its_last_run() {
        let mut follow = Follow::default();
        let attrs = r#""testkit.node":"w""#;
        let line = |action: &str, extra: &str| {
            event(&format!(
                r#"{{"Action":"{action}","Actor":{{"ID":"c","Attributes":{{{attrs}{extra}}}}},"timeNano":1}}"#
            ))
        };
        follow.event(line("kill", r#","signal":"9""#));
        follow.event(line("oom", ""));
        follow.event(line("start", ""));
        let exit = follow.event(line("die", r#","exitCode":"0""#)).unwrap();
        assert_eq!(exit.status(), "exit code 0");
        let oom = {
            follow.event(line("oom", ""));
            follow.event(line("die", r#","exitCode":"137""#)).unwrap()
        };
        assert_eq!(
            oom.status(),
            "exit code 137 (SIGKILL: 128 + 9), killed for running out of memory"
        );
    }

    #[test]
    fn an_event_of_no_node_is_none_of_its_business() {
        let mut follow = Follow::default();
        let die =
            r#"{"Action":"die","Actor":{"ID":"c","Attributes":{"exitCode":"1"}},"timeNano":1}"#;
        assert_eq!(follow.event(event(die)), None);
    }
}
