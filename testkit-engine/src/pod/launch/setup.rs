//! What runs around the pod's start, in its scrubbed environment: its
//! setup commands before it, its bootstrap commands once it is up.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::config::BootstrapStep;

use super::spec::{resolve_program, BootObserver, BootStep, LaunchError, LaunchSpec};
use crate::pod::container;
use crate::pod::handle::PodHandle;
use crate::process;

/// Environment variables a pod inherits from its launcher; everything else
/// (credentials, cloud config, the caller's HOME) stays out.
const INHERITED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ", "RUST_BACKTRACE", "RUST_LOG"];

/// The scrubbed environment every command of a pod runs in: the pod's
/// own, its setup's and its bootstrap's.
pub(super) struct PodEnv<'a> {
    pub(super) spec: &'a LaunchSpec,
    pub(super) home: &'a Path,
    pub(super) private_dir: &'a Path,
    pub(super) port: u16,
    /// The `[pod] env` entries filled before the pod runs.
    pub(super) env: &'a BTreeMap<&'a str, String>,
    pub(super) container: Option<&'a container::Prepared>,
}

impl PodEnv<'_> {
    pub(super) fn command(&self, program: &Path) -> tokio::process::Command {
        self.scrubbed(tokio::process::Command::new(program))
    }

    /// `cmd` in the pod's environment, and its private directory.
    pub(super) fn scrubbed(&self, mut cmd: tokio::process::Command) -> tokio::process::Command {
        cmd.env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
            )
            .env("HOME", self.home)
            .env("TMPDIR", self.private_dir)
            .env("TESTKIT_POD_PORT", self.port.to_string())
            .envs(&self.spec.env)
            .envs(self.env)
            .envs(self.container.iter().flat_map(|c| &c.client_env))
            .current_dir(self.private_dir)
            .stdin(Stdio::null());
        cmd
    }
}

/// Runs what comes before the pod: a container pod's `docker` setup
/// commands, or a process pod's `[pod] setup`.
pub(super) async fn run_setups(
    spec: &LaunchSpec,
    container: Option<&container::Prepared>,
    values: &crate::template::Values<'_>,
    pod: &PodEnv<'_>,
) -> Result<(), LaunchError> {
    if let Some(c) = container {
        for args in &c.setup_args {
            run_setup(
                pod.scrubbed(c.engine.command()),
                args,
                None,
                spec,
                Step::Setup,
            )
            .await?;
        }
        return Ok(());
    }
    for setup in &spec.setup {
        let program = resolve_program(
            &setup[0],
            spec.base_dir.as_deref(),
            spec.target_dir.as_deref(),
        )?;
        let args: Vec<String> = setup[1..]
            .iter()
            .map(|a| {
                crate::template::fill(a, values, crate::template::verbatim)
                    .map_err(|p| LaunchError::Placeholder(format!("pod.setup: {p}")))
            })
            .collect::<Result<_, _>>()?;
        run_setup(pod.command(&program), &args, None, spec, Step::Setup).await?;
    }
    Ok(())
}

/// Runs the bootstrap steps against the pod that is up.
pub(super) async fn bootstrap_running(
    spec: &LaunchSpec,
    handle: &PodHandle,
    values: &crate::template::Values<'_>,
    later: &[&str],
    pod: &PodEnv<'_>,
) -> Result<(), LaunchError> {
    // Against the running pod: the handle's own fields too.
    let port_text = handle.port().to_string();
    let values = values
        .clone()
        .extend(handle.values(&port_text).pairs().iter().copied());
    bootstrap(spec, handle, &values, later, &|program: &Path| {
        pod.command(program)
    })
    .await
}

/// A command run around the pod's start, each in its own log.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// `[pod] setup`: before the pod.
    Setup,
    /// `[pod] bootstrap`: once the pod is up.
    Bootstrap,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Bootstrap => "bootstrap",
        }
    }
}

/// Runs the `[pod] bootstrap` steps against the running pod, in turn,
/// with the `[pod] env` entries `later` that only the running pod could
/// fill (filled, and checked, even when there is no command to give them).
async fn bootstrap(
    spec: &LaunchSpec,
    handle: &PodHandle,
    values: &crate::template::Values<'_>,
    later: &[&str],
    pod_command: &dyn Fn(&Path) -> tokio::process::Command,
) -> Result<(), LaunchError> {
    let env: Vec<(&str, String)> = later
        .iter()
        .map(|k| {
            let template = spec.env_templates.get(*k).map_or("", String::as_str);
            crate::template::fill(template, values, crate::template::verbatim)
                .map(|v| (*k, v))
                .map_err(|p| LaunchError::Placeholder(format!("pod.env.{k}: {p}")))
        })
        .collect::<Result<_, _>>()?;
    for step in &spec.bootstrap {
        match step {
            BootstrapStep::Command { command, stdin } => {
                let with_env = |program: &Path| {
                    let mut cmd = pod_command(program);
                    cmd.envs(env.iter().map(|(k, v)| (k, v)));
                    cmd
                };
                run_bootstrap(command, stdin.as_deref(), values, spec, &with_env).await?;
            }
            BootstrapStep::Request {
                request,
                body,
                headers,
                error,
            } => {
                let request = BootstrapRequest {
                    request,
                    body: body.as_deref(),
                    headers,
                    error: error.as_deref(),
                };
                request.send(spec, handle, values).await?;
            }
        }
    }
    Ok(())
}

/// Runs one `[pod] bootstrap` command against the running pod: its
/// arguments (and its stdin) filled with `values` (the handle's fields
/// among them), in the pod's environment and `TESTKIT_BASE_URL`.
async fn run_bootstrap(
    command: &[String],
    stdin: Option<&str>,
    values: &crate::template::Values<'_>,
    spec: &LaunchSpec,
    pod_command: &dyn Fn(&Path) -> tokio::process::Command,
) -> Result<(), LaunchError> {
    let program = resolve_program(
        &command[0],
        spec.base_dir.as_deref(),
        spec.target_dir.as_deref(),
    )?;
    let fill = |a: &str| {
        crate::template::fill(a, values, crate::template::verbatim)
            .map_err(|p| LaunchError::Placeholder(format!("pod.bootstrap: {p}")))
    };
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| fill(a))
        .collect::<Result<_, _>>()?;
    let stdin = stdin.map(fill).transpose()?;
    let mut cmd = pod_command(&program);
    if let Some(base_url) = values.get("base_url") {
        cmd.env("TESTKIT_BASE_URL", base_url);
    }
    run_setup(cmd, &args, stdin.as_deref(), spec, Step::Bootstrap).await
}

/// A `[pod] bootstrap` step that is an HTTP request to the running pod.
struct BootstrapRequest<'a> {
    request: &'a str,
    body: Option<&'a str>,
    headers: &'a std::collections::BTreeMap<String, String>,
    error: Option<&'a str>,
}

impl BootstrapRequest<'_> {
    /// Sends it, without a credential, and fails the boot unless it
    /// answered 2xx with nothing at its `error` pointer; the answer is
    /// appended to `pod.bootstrap.log`, redacted.
    async fn send(
        &self,
        spec: &LaunchSpec,
        handle: &PodHandle,
        values: &crate::template::Values<'_>,
    ) -> Result<(), LaunchError> {
        let placeholder = |p: crate::template::TemplateError| {
            LaunchError::Placeholder(format!("pod.bootstrap: {p}"))
        };
        let template = crate::template::RequestTemplate::parse(self.request)
            .map_err(placeholder)?
            .with_body(self.body.map(str::to_owned));
        let url = format!(
            "{}{}",
            handle.base_url(),
            template.render_path(values).map_err(placeholder)?
        );
        let body = template.render_body(values).map_err(placeholder)?;
        let failed = |status: String, last_seen: String| LaunchError::Setup {
            step: Step::Bootstrap.name(),
            command: self.request.to_owned(),
            status,
            last_seen: crate::redact(&last_seen).into_owned(),
            logs: spec.logs_dir.clone(),
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(spec.ceiling)
            .build()
            .map_err(|e| failed("could not be sent".to_owned(), e.to_string()))?;
        let mut builder = client.request(template.method().clone(), &url);
        for (name, value) in self.headers {
            let value = crate::template::fill(value, values, crate::template::verbatim)
                .map_err(placeholder)?;
            builder = builder.header(name.as_str(), value);
        }
        if let Some(body) = body {
            builder = builder
                .header(
                    reqwest::header::CONTENT_TYPE,
                    crate::template::body_content_type(&body),
                )
                .body(body);
        }
        let resp = builder
            .send()
            .await
            .map_err(|e| failed("was not answered".to_owned(), e.to_string()))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let excerpt: String = text.chars().take(300).collect();
        let log_path = spec
            .logs_dir
            .join(format!("pod.{}.log", Step::Bootstrap.name()));
        let line = format!("{} answered {status}: {excerpt}\n", self.request);
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, crate::redact(&line).as_bytes()));
        if !status.is_success() {
            return Err(failed(format!("answered {status}"), excerpt));
        }
        if let Some(pointer) = self.error {
            let found = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.pointer(pointer).filter(|e| !e.is_null()).cloned());
            if let Some(error) = found {
                return Err(failed(
                    format!("answered {status} with an error at {pointer:?} (`error`): {error}"),
                    excerpt,
                ));
            }
        }
        Ok(())
    }
}

/// Runs one `[pod] setup` or `bootstrap` command to completion under the boot ceiling, its
/// output appended to `pod.setup.log`.
async fn run_setup(
    mut cmd: tokio::process::Command,
    args: &[String],
    stdin: Option<&str>,
    spec: &LaunchSpec,
    step: Step,
) -> Result<(), LaunchError> {
    let log_path = spec.logs_dir.join(format!("pod.{}.log", step.name()));
    let io = |what: String| {
        move |source| LaunchError::Io {
            what,
            cause: source,
        }
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(io(format!("open {}", log_path.display())))?;
    let shown = crate::redact(&format!(
        "{:?} {}",
        cmd.as_std().get_program(),
        args.join(" ")
    ))
    .into_owned();
    cmd.args(args)
        .stdout(
            log.try_clone()
                .map_err(io("open the setup log".to_owned()))?,
        )
        .stderr(log)
        .kill_on_drop(true);
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let (mut child, pgid) = process::spawn_in_group(&mut cmd)
        .map_err(io(format!("start the {} command {shown}", step.name())))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Written whole, then closed: the command reads to its end. A
        // command that exits without reading it all is judged by its exit.
        use tokio::io::AsyncWriteExt as _;
        let _ = pipe.write_all(text.as_bytes()).await;
        drop(pipe);
    }
    let start_ticks = process::start_ticks(pgid);
    BootObserver::tell(
        spec.observer.as_ref(),
        match step {
            Step::Setup => BootStep::Setup { pgid, start_ticks },
            Step::Bootstrap => BootStep::Bootstrap { pgid, start_ticks },
        },
    );
    let status = match tokio::time::timeout(spec.ceiling, child.wait()).await {
        Ok(status) => status.map_err(io(format!("run the {} command {shown}", step.name())))?,
        Err(_) => {
            let _ = process::kill_group(pgid, Duration::from_secs(5)).await;
            let _ = child.wait().await;
            return Err(LaunchError::Setup {
                step: step.name(),
                command: shown,
                status: format!(
                    "still running after {}",
                    humantime::format_duration(spec.ceiling)
                ),
                last_seen: last_line(&log_path),
                logs: spec.logs_dir.clone(),
            });
        }
    };
    redact_in_place(&log_path);
    if status.success() {
        Ok(())
    } else {
        Err(LaunchError::Setup {
            step: step.name(),
            command: shown,
            status: status.to_string(),
            last_seen: last_line(&log_path),
            logs: spec.logs_dir.clone(),
        })
    }
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .map(|l| crate::redact(&l).into_owned())
        .unwrap_or_else(|| "nothing".to_owned())
}

fn redact_in_place(path: &Path) {
    if let Ok(text) = std::fs::read_to_string(path) {
        if let std::borrow::Cow::Owned(r) = crate::redact(&text) {
            let _ = std::fs::write(path, r);
        }
    }
}
