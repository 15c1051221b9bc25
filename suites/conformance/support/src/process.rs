//! Background processes of a sandbox: they go away with it, so they need
//! no cleanup of their own.

use reqwest::Method;
use serde::Deserialize;
use testkit::wait::{self, Check};
use testkit::Cx;

use crate::api::{call, call_status, REQUEST_TIMEOUT};
use crate::{default_wait, encode, Body};

/// A background process; it goes away with its sandbox.
#[derive(Debug, Clone)]
pub struct Process {
    sandbox: String,
    pid: i32,
}

/// A background process as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProcessInfo {
    /// Its pid (and process group).
    pub pid: i32,
    /// What was started.
    pub argv: Vec<String>,
    /// `running` or `exited`.
    pub state: String,
    /// Exit code once exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
}

impl Process {
    pub(crate) fn new(sandbox: &str, pid: i32) -> Process {
        Process {
            sandbox: sandbox.to_owned(),
            pid,
        }
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    fn path(&self, tail: &str) -> String {
        format!(
            "/api/sandboxes/{}/processes/{}{tail}",
            encode(&self.sandbox),
            self.pid
        )
    }

    /// `GET .../processes/{pid}`.
    pub async fn info(&self, cx: &Cx) -> anyhow::Result<ProcessInfo> {
        call(
            cx,
            Method::GET,
            &self.path(""),
            Body::Empty,
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// `POST .../processes/{pid}/signal` with `signal` (`TERM`, `INT`, `KILL`, `HUP`, `USR1`).
    pub async fn signal(&self, cx: &Cx, signal: &str) -> anyhow::Result<()> {
        let body = serde_json::json!({ "signal": signal });
        call_status(cx, Method::POST, &self.path("/signal"), Body::Json(body)).await?;
        cx.log(format_args!("sent {signal} to pid {}", self.pid));
        Ok(())
    }

    /// Waits until the process has exited; returns how it ended.
    pub async fn wait_exited(&self, cx: &Cx) -> anyhow::Result<ProcessInfo> {
        let what = format!("process {} of {} to exit", self.pid, self.sandbox);
        let info = wait::until(cx, &what, default_wait(), || async {
            let info = self.info(cx).await?;
            Ok(if info.state == "exited" {
                Check::Done(info)
            } else {
                Check::pending(format!("state={}", info.state))
            })
        })
        .await?;
        Ok(info)
    }
}
