//! Commands for a sandbox to run, and what an exec did.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// A command for [`Sandbox::exec`] or [`Sandbox::start`].
#[derive(Debug, Clone, Default)]
pub struct Cmd {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Per-call environment.
    pub env: BTreeMap<String, String>,
    /// `timeout_ms` of an exec.
    pub timeout_ms: Option<u64>,
}

impl Cmd {
    /// `argv` as given.
    pub fn new<I, S>(argv: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Cmd::default()
        }
    }

    /// `sh -c script`.
    pub fn sh(script: &str) -> Cmd {
        Cmd::new(["sh", "-c", script])
    }

    /// Adds a per-call environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Cmd {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Kills an exec after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Cmd {
        self.timeout_ms = Some(timeout.as_millis().max(1) as u64);
        self
    }
}

/// What an exec did.
#[derive(Debug, Clone, Deserialize)]
pub struct ExecOutput {
    /// Exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Whether it ran over its timeout and was killed.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl ExecOutput {
    /// Fails unless the command exited 0, showing what it printed.
    pub fn ensure_success(&self, what: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.exit_code == Some(0) && !self.timed_out,
            "`{what}` did not succeed: exit_code={:?} signal={:?} timed_out={}\nstdout: {}\nstderr: {}",
            self.exit_code,
            self.signal,
            self.timed_out,
            self.stdout.trim_end(),
            self.stderr.trim_end()
        );
        Ok(())
    }

    /// The `KEY=VALUE` lines of stdout (the output of `env`), as a map.
    pub fn env_lines(&self) -> BTreeMap<String, String> {
        self.stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}
