//! QEMU's monitor protocol (QMP) over the machine's unix socket: one JSON
//! object a line; the server greets, `qmp_capabilities` leaves negotiation
//! mode, then each command gets a `return` or an `error`, with
//! asynchronous `event`s interleaved (skipped here).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use super::MachineError;

/// The second monitor socket, in a machine's run directory: kept for a
/// test process's faults, while the booting process holds the first.
pub(super) const FAULTS_QMP_SOCKET: &str = "faults.qmp.sock";

/// A third monitor socket, which testkit never connects to: the one a
/// person or a tool may use (QEMU serves one client per monitor).
pub(crate) const USER_MONITOR: &str = "monitor.sock";

/// How long QEMU may take to answer a command.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// A negotiated QMP connection.
#[derive(Debug)]
pub(crate) struct Qmp {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

fn broken(command: &str, problem: impl ToString) -> MachineError {
    MachineError::Qmp {
        command: command.to_owned(),
        problem: problem.to_string(),
    }
}

impl Qmp {
    /// Connects to `socket`, reads the greeting and negotiates.
    pub(crate) async fn connect(socket: &Path) -> Result<Qmp, MachineError> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| broken("connect", format!("{}: {e}", socket.display())))?;
        Qmp::negotiate(stream).await
    }

    /// Reads the greeting on a connected `stream` and negotiates.
    pub(crate) async fn negotiate(stream: UnixStream) -> Result<Qmp, MachineError> {
        let (read, writer) = stream.into_split();
        let mut qmp = Qmp {
            reader: BufReader::new(read),
            writer,
        };
        let greeting = qmp.read_message("greeting").await?;
        if greeting.get("QMP").is_none() {
            return Err(broken(
                "greeting",
                format!("not a QMP greeting: {greeting}"),
            ));
        }
        qmp.execute("qmp_capabilities", None).await?;
        Ok(qmp)
    }

    /// Runs `command` with `arguments`; answers its `return`.
    pub(crate) async fn execute(
        &mut self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, MachineError> {
        let mut message = json!({ "execute": command });
        if let Some(args) = arguments {
            message["arguments"] = args;
        }
        let mut line = message.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .map_err(|e| broken(command, e))?;
        loop {
            let answer = self.read_message(command).await?;
            if answer.get("event").is_some() {
                continue;
            }
            if let Some(ret) = answer.get("return") {
                return Ok(ret.clone());
            }
            if let Some(err) = answer.get("error") {
                return Err(broken(
                    command,
                    format!(
                        "{}: {}",
                        err["class"].as_str().unwrap_or("error"),
                        err["desc"].as_str().unwrap_or("")
                    ),
                ));
            }
            return Err(broken(command, format!("unexpected answer {answer}")));
        }
    }

    async fn read_message(&mut self, command: &str) -> Result<Value, MachineError> {
        let mut line = String::new();
        let read = tokio::time::timeout(ANSWER_LIMIT, self.reader.read_line(&mut line))
            .await
            .map_err(|_| broken(command, format!("no answer within {ANSWER_LIMIT:?}")))?
            .map_err(|e| broken(command, e))?;
        if read == 0 {
            return Err(broken(command, "QEMU closed the monitor"));
        }
        serde_json::from_str(&line).map_err(|e| broken(command, format!("{e}: {line:?}")))
    }
}
