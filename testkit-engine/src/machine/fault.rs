//! Reaching a machine from a process that did not boot it: a test process
//! injecting a fault, or its reaper undoing one. Everything it needs is in
//! [`MachineAccess`], which travels in the pod's handle: the run
//! directory (with the sockets), the guest's interface, the health URL on
//! the forwarded port, the data disk's mount.
//!
//! QEMU's monitor is reached on a second QMP socket made for this (the
//! booting process holds the first); the guest agent on its one channel,
//! which the booting process lets go of after each use. Each call connects,
//! does one thing and lets go.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::agent::{Agent, GuestOutput, QGA_SOCKET};
use super::qmp::{Qmp, FAULTS_QMP_SOCKET};
use super::MachineError;

/// What a process needs to drive a machine's faults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MachineAccess {
    /// The machine's run directory (its sockets).
    pub run_dir: PathBuf,
    /// The guest's network interface (`eth0`).
    pub interface: String,
    /// The service's health URL, on the port forwarded to the guest.
    pub health_url: String,
    /// Where the data disk is mounted in the guest, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
}

impl MachineAccess {
    /// The access to a machine whose run directory is `run_dir` and whose
    /// service answers its health at `health_url`.
    pub fn new(run_dir: PathBuf, health_url: String, data_dir: Option<String>) -> MachineAccess {
        MachineAccess {
            run_dir,
            // The kernel's classic name (`net.ifnames=0` on its command line).
            interface: "eth0".to_owned(),
            health_url,
            data_dir,
        }
    }

    /// Runs a monitor command; its `return`.
    pub async fn qmp(
        &self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, MachineError> {
        let mut qmp = Qmp::connect(&self.run_dir.join(FAULTS_QMP_SOCKET)).await?;
        qmp.execute(command, arguments).await
    }

    /// The guest's run state, as QMP's `query-status` says it: `running`,
    /// `paused`, `shutdown`, …
    pub async fn status(&self) -> Result<String, MachineError> {
        let status = self.qmp("query-status", None).await?;
        Ok(status["status"].as_str().unwrap_or("unknown").to_owned())
    }

    /// `node machine: STATE; its last N lines` and those lines, indented,
    /// as a cluster's nodes are described: the state as QEMU has it
    /// (`running`, `paused`, `shutdown`…), then the end of the guest's
    /// journal when its agent answers, else of its console. Each question
    /// is bounded: a report of a hang must not hang on a frozen guest.
    pub async fn describe(&self, tail: usize) -> String {
        const ASK_WITHIN: Duration = Duration::from_secs(3);
        let state = match tokio::time::timeout(ASK_WITHIN, self.status()).await {
            Ok(Ok(state)) => state,
            Ok(Err(e)) => format!("unknown ({e})"),
            Err(_) => format!("unknown (QEMU's monitor did not answer within {ASK_WITHIN:?})"),
        };
        let journal = if state == "running" {
            let script = format!("journalctl --no-pager -q -o short-monotonic -n {tail}");
            tokio::time::timeout(ASK_WITHIN, self.sh(&script, ASK_WITHIN))
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            None
        };
        let (from, text) = match journal {
            Some(text) => ("the guest's journal", text),
            None => {
                let console = std::fs::read(self.run_dir.join("console.log")).unwrap_or_default();
                (
                    "its console",
                    String::from_utf8_lossy(&console).into_owned(),
                )
            }
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let shown = lines[lines.len().saturating_sub(tail)..]
            .iter()
            .map(|l| format!("    {}", crate::redact(l)))
            .collect::<Vec<_>>();
        let shown = if shown.is_empty() {
            "    (nothing)".to_owned()
        } else {
            shown.join("\n")
        };
        format!("node machine: {state}; its last {tail} lines ({from}):\n{shown}")
    }

    /// Plugs or unplugs the guest's network cable (QMP `set_link` on the
    /// user-mode network's backend).
    pub async fn set_link(&self, up: bool) -> Result<(), MachineError> {
        self.qmp("set_link", Some(json!({ "name": "net0", "up": up })))
            .await
            .map(drop)
    }

    /// What QEMU does when the guest resets: `reset` (it reboots) or
    /// `shutdown` (QEMU ends, as a machine pod boots it: a guest that
    /// reboots on its own is a pod that went away).
    pub async fn on_reboot(&self, action: &str) -> Result<(), MachineError> {
        self.qmp("set-action", Some(json!({ "reboot": action })))
            .await
            .map(drop)
    }

    /// The guest agent, if it answers within `limit`.
    async fn agent(&self, limit: Duration) -> Result<Agent, MachineError> {
        let deadline = tokio::time::Instant::now() + limit;
        Agent::connect(&self.run_dir.join(QGA_SOCKET), deadline)
            .await?
            .ok_or_else(|| MachineError::Agent {
                command: "guest-sync-delimited".to_owned(),
                problem: format!("no answer within {limit:?}"),
            })
    }

    /// Whether the guest agent answers within `limit`.
    pub async fn agent_answers(&self, limit: Duration) -> bool {
        self.agent(limit).await.is_ok()
    }

    /// Runs `argv` in the guest as root, for at most `limit`.
    pub async fn exec(&self, argv: &[&str], limit: Duration) -> Result<GuestOutput, MachineError> {
        self.agent(limit).await?.exec(argv, &[], limit).await
    }

    /// Runs a shell script in the guest; its stdout, or the error naming
    /// its exit and output.
    pub async fn sh(&self, script: &str, limit: Duration) -> Result<String, MachineError> {
        let out = self.exec(&["sh", "-c", script], limit).await?;
        if out.success() {
            return Ok(out.stdout_text());
        }
        Err(MachineError::Command {
            command: format!("(guest) sh -c {script:?}"),
            status: match (out.code, out.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "unknown".to_owned(),
            },
            output: super::tail(&format!("{}{}", out.stdout_text(), out.stderr_text()), 2000),
        })
    }

    /// The guest's clock, in nanoseconds since the epoch (`guest-get-time`).
    pub async fn guest_time_ns(&self) -> Result<i64, MachineError> {
        let mut agent = self.agent(Duration::from_secs(30)).await?;
        let ns = agent.execute("guest-get-time", json!({})).await?;
        ns.as_i64().ok_or_else(|| MachineError::Agent {
            command: "guest-get-time".to_owned(),
            problem: format!("not a time: {ns}"),
        })
    }

    /// Sets the guest's clock to `ns` since the epoch: `guest-set-time`,
    /// or, where the guest agent refuses it (it also sets the hardware
    /// clock, with `hwclock`, which a minimal image lacks), `date -s` run
    /// by it. The guest's clock only: the host's is never touched.
    pub async fn set_guest_time_ns(&self, ns: i64) -> Result<(), MachineError> {
        let mut agent = self.agent(Duration::from_secs(30)).await?;
        if agent
            .execute("guest-set-time", json!({ "time": ns }))
            .await
            .is_ok()
        {
            return Ok(());
        }
        drop(agent);
        let at = format!(
            "@{}.{:09}",
            ns.div_euclid(1_000_000_000),
            ns.rem_euclid(1_000_000_000)
        );
        self.sh(
            &format!("date -u -s {at} >/dev/null"),
            Duration::from_secs(30),
        )
        .await
        .map(drop)
    }
}

/// The host's clock, in nanoseconds since the epoch.
pub fn host_time_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default()
}
