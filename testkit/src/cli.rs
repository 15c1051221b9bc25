//! Runs the product's CLI against the pod: `cx.cli(&["list"])`.
//!
//! The program is `TESTKIT_CLI`, else `[cli] program` of `testkit.toml`; its
//! environment gets `[cli] env` filled from the pod handle's fields (by
//! default `SANDBOXD_URL`, `SANDBOXD_TOKEN` and `SANDBOXD_COOKIE`; any extra
//! field, such as `{user}`, too), `{session_cookie}`, the `Cookie` header
//! the tests' client sends at that moment, and `{credential}`, the
//! credential itself as the client sends it then (a login's token, renewed
//! after an expiry, rather than the handle's raw token). It runs in its own
//! process group, killed as a group on timeout; its output is captured and
//! redacted.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::engine::process;
use crate::log::Log;

/// The credential the client sends now, as `[auth] send` carries it: the
/// bearer token, the named header's value without `prefix`, the basic
/// pair's encoding, or the cookie's value; empty with `send = "none"` or
/// before a credential exists.
fn credential_of(
    headers: &[(String, String)],
    auth: &crate::engine::config::AuthSection,
) -> String {
    use crate::engine::config::SendAs;
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let value = match auth.send {
        SendAs::Bearer => header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
        SendAs::Basic => header("authorization").and_then(|v| v.strip_prefix("Basic ")),
        SendAs::Header => auth
            .header
            .as_deref()
            .and_then(header)
            .map(|v| v.strip_prefix(auth.prefix.as_str()).unwrap_or(v)),
        SendAs::Cookie => auth.cookie.as_deref().and_then(|name| {
            header("cookie")?
                .split("; ")
                .find_map(|c| c.strip_prefix(name)?.strip_prefix('='))
        }),
        _ => None,
    };
    value.unwrap_or_default().to_owned()
}

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
    log: &'a Log,
    args: Vec<String>,
    timeout: Duration,
    env: BTreeMap<String, String>,
}

impl<'a> CliCommand<'a> {
    /// A run of the CLI with `args`, logging to the test's `log`.
    pub(crate) fn new(log: &'a Log, args: &[&str]) -> CliCommand<'a> {
        CliCommand {
            log,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            timeout: DEFAULT_CLI_TIMEOUT,
            env: BTreeMap::new(),
        }
    }

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
        let pod = crate::globals::require_pod()?;
        let config = crate::globals::config().map_err(crate::globals::Shared)?;
        let settings = crate::globals::settings().map_err(crate::globals::Shared)?;
        let program = match &settings.cli {
            Some(p) => p.clone(),
            None => config.cli.program.clone().ok_or_else(|| {
                anyhow::anyhow!("no CLI configured: set `[cli] program` in testkit.toml or the TESTKIT_CLI variable")
            })?,
        };
        let path = crate::engine::pod::launch::resolve_program(
            &program,
            crate::globals::suite_dir(),
            settings.target_dir.as_deref(),
        )
            .map_err(|_| anyhow::anyhow!("CLI program `{program}` not found next to the test binary, in the target dir, or on PATH"))?;
        let handle = pod.handle();
        let port = handle.port().to_string();
        // The session of the moment, so that a CLI outlives a token that is
        // only good for a login (sandboxd's window): empty when the
        // credential is no cookie.
        let cookie = pod
            .credential_headers()
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("cookie"))
            .map(|(_, value)| value)
            .unwrap_or_default();
        let credential = credential_of(&pod.credential_headers(), pod.auth());
        let values = handle
            .values(&port)
            .with("session_cookie", &cookie)
            .with("credential", &credential);
        let mut env = Vec::with_capacity(config.cli.env.len());
        for (key, value) in &config.cli.env {
            let value =
                crate::engine::template::fill(value, &values, crate::engine::template::verbatim)
                    .map_err(|p| anyhow::anyhow!("[cli] env {key}: {p}"))?;
            env.push((key, value));
        }
        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(&self.args)
            .envs(env)
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let line = format!("$ {program} {}", self.args.join(" "));
        self.log.push(line.clone());
        let start = Instant::now();
        let (child, pgid) = process::spawn_in_group(&mut cmd)
            .map_err(|e| anyhow::anyhow!("failed to start {}: {e}", path.display()))?;
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(result) => result.map_err(|e| anyhow::anyhow!("failed to run {program}: {e}"))?,
            Err(_) => {
                if let Err(left) = process::kill_group(pgid, Duration::from_secs(5)).await {
                    self.log.push(format!(
                        "  processes {left:?} of the timed-out CLI run outlived SIGKILL"
                    ));
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
        self.log.push(format!(
            "  exit {:?} after {:?}",
            out.exit_code, out.duration
        ));
        crate::engine::trace::step::cli(&line[2..], start, out.exit_code, &out.stdout, &out.stderr);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::credential_of;
    use crate::engine::config::SuiteConfig;

    fn auth(toml: &str) -> crate::engine::config::AuthSection {
        SuiteConfig::parse(toml, std::path::Path::new("testkit.toml"))
            .unwrap()
            .auth
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_credential_is_what_the_client_sends_as_each_scheme_carries_it() {
        let bearer = auth("[auth]\nsend = \"bearer\"\nprobe = \"GET /x\"\n");
        let sent = headers(&[("Authorization", "Bearer renewed-1")]);
        assert_eq!(credential_of(&sent, &bearer), "renewed-1");
        let header = auth(
            "[auth]\nsend = \"header\"\nheader = \"X-Key\"\nprefix = \"Key \"\nprobe = \"GET /x\"\n",
        );
        assert_eq!(
            credential_of(&headers(&[("x-key", "Key k2")]), &header),
            "k2"
        );
        let cookie = auth("[auth]\nsend = \"cookie\"\ncookie = \"sid\"\nprobe = \"GET /x\"\n");
        let sent = headers(&[("Cookie", "other=1; sid=s3")]);
        assert_eq!(credential_of(&sent, &cookie), "s3");
        assert_eq!(credential_of(&[], &bearer), "", "none yet");
    }
}
