//! Runs the product's CLI against the pod: `cx.cli(&["list"])`.
//!
//! The program is `TESTKIT_CLI`, else `[cli] program` of `testkit.toml`; its
//! environment gets `[cli] env` filled from the pod handle (by default
//! `SANDBOXD_URL` and `SANDBOXD_TOKEN`). It runs in its own process group,
//! killed as a group on timeout; its output is captured and redacted.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::Cx;

/// How long a CLI run may take unless told otherwise.
pub(crate) const DEFAULT_CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// What a CLI run did. Its output is redacted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CliOutput {
    /// The exit code, or `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// Standard output, redacted.
    pub stdout: String,
    /// Standard error, redacted.
    pub stderr: String,
    /// How long it ran.
    pub duration: Duration,
}

impl CliOutput {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// A CLI run with options: `cx.cli_command(&["ls"]).timeout(..).env(..).run().await`.
#[derive(Debug)]
#[must_use = "a CliCommand does nothing until `run` is awaited"]
pub struct CliCommand<'a> {
    cx: &'a Cx,
    args: Vec<String>,
    timeout: Duration,
    env: BTreeMap<String, String>,
}

impl Cx {
    /// Runs the suite's CLI with `args` against the pod (default timeout 60 s).
    pub async fn cli(&self, args: &[&str]) -> crate::Result<CliOutput> {
        self.cli_command(args).run().await
    }

    /// A CLI run to configure before running it.
    pub fn cli_command(&self, args: &[&str]) -> CliCommand<'_> {
        CliCommand {
            cx: self,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            timeout: DEFAULT_CLI_TIMEOUT,
            env: BTreeMap::new(),
        }
    }
}

impl CliCommand<'_> {
    /// Kills the run (its whole process group) after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets an environment variable for this run.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Runs it. A non-zero exit is not an error: check [`CliOutput::exit_code`].
    pub async fn run(self) -> crate::Result<CliOutput> {
        let pod = self.cx.pod()?;
        let config = crate::config::current().map_err(|e| anyhow::anyhow!("{e}"))?;
        let program = match std::env::var("TESTKIT_CLI").ok().filter(|p| !p.is_empty()) {
            Some(p) => p,
            None => config.cli.program.clone().ok_or_else(|| {
                anyhow::anyhow!("no CLI configured: set `[cli] program` in testkit.toml or the TESTKIT_CLI variable")
            })?,
        };
        let path = crate::pod::launch::resolve_program(&program, crate::config::suite_dir())
            .map_err(|_| anyhow::anyhow!("CLI program `{program}` not found next to the test binary, in the target dir, or on PATH"))?;
        let handle = pod.handle();
        let fill = |v: &str| {
            v.replace("{base_url}", handle.base_url())
                .replace("{port}", &handle.port().to_string())
                .replace("{name}", handle.name())
                .replace("{token}", handle.token())
        };
        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(&self.args)
            .envs(config.cli.env.iter().map(|(k, v)| (k, fill(v))))
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let line = format!("$ {program} {}", self.args.join(" "));
        self.cx.log(&line);
        let start = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("failed to start {}: {e}", path.display()))?;
        let pgid = child.id().map(|p| p as i32);
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(result) => result.map_err(|e| anyhow::anyhow!("failed to run {program}: {e}"))?,
            Err(_) => {
                if let Some(pgid) = pgid {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                }
                anyhow::bail!(
                    "`{}` did not finish within {} and was killed",
                    crate::redact(&line[2..]),
                    humantime::format_duration(self.timeout)
                );
            }
        };
        let out = CliOutput {
            exit_code: output.status.code(),
            stdout: crate::redact(&String::from_utf8_lossy(&output.stdout)).into_owned(),
            stderr: crate::redact(&String::from_utf8_lossy(&output.stderr)).into_owned(),
            duration: start.elapsed(),
        };
        self.cx.log(format!(
            "  exit {:?} after {:?}",
            out.exit_code, out.duration
        ));
        Ok(out)
    }
}
