//! The QEMU guest agent (`qemu-ga` in the guest) over the machine's
//! virtio-serial channel: JSON commands a line, as QMP, but without a
//! greeting; a connection is synchronised with `guest-sync-delimited`,
//! whose answer is preceded by a 0xFF byte that marks where stale output
//! (of an earlier client, or of a command sent before the agent started)
//! ends.
//!
//! Commands used: `guest-exec` (start a program, stdin given, output
//! captured), `guest-exec-status` (poll it; output comes when it exited),
//! `guest-file-open`/`-write`/`-read`/`-close`.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::time::Instant;

use super::MachineError;

/// The guest agent's socket, in a machine's run directory.
pub(super) const QGA_SOCKET: &str = "qga.sock";

/// How long the agent may take to answer one command.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// The bytes of a file written per `guest-file-write` (base64 makes them
/// a third more on the wire).
const WRITE_CHUNK: usize = 1 << 20;

/// What a command run in the guest did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuestOutput {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// What it wrote on stdout.
    pub stdout: Vec<u8>,
    /// What it wrote on stderr.
    pub stderr: Vec<u8>,
}

impl GuestOutput {
    /// Exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout, lossily as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr, lossily as text.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A synchronised connection to the guest agent.
#[derive(Debug)]
pub(crate) struct Agent {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

fn broken(command: &str, problem: impl ToString) -> MachineError {
    MachineError::Agent {
        command: command.to_owned(),
        problem: problem.to_string(),
    }
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl Agent {
    /// Connects to `socket` and waits until the agent answers a sync, or
    /// `deadline`. `Ok(None)` when the deadline passed first.
    pub(crate) async fn connect(
        socket: &Path,
        deadline: Instant,
    ) -> Result<Option<Agent>, MachineError> {
        // QEMU makes the socket's file a moment before it listens there: a
        // refused connect, like a missing file, is waited out.
        let stream = loop {
            match UnixStream::connect(socket).await {
                Ok(stream) => break stream,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                    ) && Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => return Err(broken("connect", format!("{}: {e}", socket.display()))),
            }
        };
        let (read, mut writer) = stream.into_split();
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).map_err(|e| broken("guest-sync-delimited", e))?;
        let id = u64::from(u32::from_le_bytes(random) & 0x7fff_ffff);
        // Sent once: QEMU holds it until the guest opens its end of the
        // channel (sending more would only fill the socket's buffer).
        // A leading 0xFF byte (not valid JSON, so the agent's parser resets
        // on it) flushes whatever partial request an earlier client left.
        let mut bytes = vec![0xffu8];
        let sync = json!({ "execute": "guest-sync-delimited", "arguments": { "id": id } });
        bytes.extend_from_slice(format!("{sync}\n").as_bytes());
        writer
            .write_all(&bytes)
            .await
            .map_err(|e| broken("guest-sync-delimited", e))?;
        let mut reader = BufReader::new(read);
        loop {
            // Skip to the delimiter, then read the answer's line.
            let mut skipped = Vec::new();
            match tokio::time::timeout_at(deadline, reader.read_until(0xff, &mut skipped)).await {
                Err(_) => return Ok(None),
                Ok(Err(e)) => return Err(broken("guest-sync-delimited", e)),
                Ok(Ok(0)) => return Err(broken("guest-sync-delimited", "QEMU closed the channel")),
                Ok(Ok(_)) => {}
            }
            let mut line = String::new();
            match tokio::time::timeout_at(deadline, reader.read_line(&mut line)).await {
                Err(_) => return Ok(None),
                Ok(Err(e)) => return Err(broken("guest-sync-delimited", e)),
                Ok(Ok(_)) => {}
            }
            let answer: Value = serde_json::from_str(line.trim()).unwrap_or(Value::Null);
            if answer["return"].as_u64() == Some(id) {
                return Ok(Some(Agent { reader, writer }));
            }
        }
    }

    /// Runs `command` with `arguments`; answers its `return`.
    pub(crate) async fn execute(
        &mut self,
        command: &str,
        arguments: Value,
    ) -> Result<Value, MachineError> {
        let mut line = json!({ "execute": command, "arguments": arguments }).to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .map_err(|e| broken(command, e))?;
        let mut answer = String::new();
        let read = tokio::time::timeout(ANSWER_LIMIT, self.reader.read_line(&mut answer))
            .await
            .map_err(|_| broken(command, format!("no answer within {ANSWER_LIMIT:?}")))?
            .map_err(|e| broken(command, e))?;
        if read == 0 {
            return Err(broken(command, "QEMU closed the channel"));
        }
        let answer: Value = serde_json::from_str(answer.trim())
            .map_err(|e| broken(command, format!("{e}: {answer:?}")))?;
        if let Some(ret) = answer.get("return") {
            return Ok(ret.clone());
        }
        let err = &answer["error"];
        Err(broken(
            command,
            format!(
                "{}: {}",
                err["class"].as_str().unwrap_or("error"),
                err["desc"].as_str().unwrap_or("unexpected answer")
            ),
        ))
    }

    /// Runs `argv` in the guest (as root), with `stdin`, until it exits or
    /// `limit` passes.
    pub(crate) async fn exec(
        &mut self,
        argv: &[&str],
        stdin: &[u8],
        limit: Duration,
    ) -> Result<GuestOutput, MachineError> {
        let shown = argv.join(" ");
        let Some((path, args)) = argv.split_first() else {
            return Err(broken("guest-exec", "an empty command"));
        };
        let mut arguments = json!({ "path": path, "arg": args, "capture-output": true });
        if !stdin.is_empty() {
            arguments["input-data"] = b64().encode(stdin).into();
        }
        let started = self.execute("guest-exec", arguments).await?;
        let pid = started["pid"]
            .as_i64()
            .ok_or_else(|| broken("guest-exec", format!("no pid in {started}")))?;
        let deadline = Instant::now() + limit;
        loop {
            let status = self
                .execute("guest-exec-status", json!({ "pid": pid }))
                .await?;
            if status["exited"].as_bool() == Some(true) {
                let data = |key: &str| {
                    status[key]
                        .as_str()
                        .and_then(|s| b64().decode(s).ok())
                        .unwrap_or_default()
                };
                return Ok(GuestOutput {
                    code: status["exitcode"].as_i64().map(|c| c as i32),
                    signal: status["signal"].as_i64().map(|s| s as i32),
                    stdout: data("out-data"),
                    stderr: data("err-data"),
                });
            }
            if Instant::now() >= deadline {
                return Err(MachineError::GuestTimeout {
                    command: shown,
                    limit,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Writes `bytes` to `path` in the guest (created or truncated).
    pub(crate) async fn write_file(
        &mut self,
        path: &str,
        bytes: &[u8],
    ) -> Result<(), MachineError> {
        let handle = self
            .execute("guest-file-open", json!({ "path": path, "mode": "w" }))
            .await?;
        let written = async {
            for chunk in bytes.chunks(WRITE_CHUNK) {
                self.execute(
                    "guest-file-write",
                    json!({ "handle": handle, "buf-b64": b64().encode(chunk) }),
                )
                .await?;
            }
            Ok(())
        }
        .await;
        let closed = self
            .execute("guest-file-close", json!({ "handle": handle }))
            .await;
        written.and(closed.map(|_| ()))
    }

    /// Reads all of `path` in the guest.
    pub(crate) async fn read_file(&mut self, path: &str) -> Result<Vec<u8>, MachineError> {
        self.read_file_at_most(path, usize::MAX).await
    }

    /// Reads a file of the guest, refusing one larger than `max` bytes
    /// once that much is read (a guest file may be of any size).
    pub(crate) async fn read_file_at_most(
        &mut self,
        path: &str,
        max: usize,
    ) -> Result<Vec<u8>, MachineError> {
        let handle = self
            .execute("guest-file-open", json!({ "path": path, "mode": "r" }))
            .await?;
        let read = async {
            let mut out = Vec::new();
            loop {
                let part = self
                    .execute(
                        "guest-file-read",
                        json!({ "handle": handle, "count": WRITE_CHUNK }),
                    )
                    .await?;
                if let Some(text) = part["buf-b64"].as_str() {
                    out.extend(
                        b64()
                            .decode(text)
                            .map_err(|e| broken("guest-file-read", e))?,
                    );
                }
                if out.len() > max {
                    return Err(MachineError::GuestFileTooLarge {
                        path: path.to_owned(),
                        max,
                    });
                }
                if part["eof"].as_bool() != Some(false) {
                    return Ok(out);
                }
            }
        }
        .await;
        let closed = self
            .execute("guest-file-close", json!({ "handle": handle }))
            .await;
        let out = read?;
        closed?;
        Ok(out)
    }
}
