//! What runs around the pod's start, in its scrubbed environment: its
//! setup commands before it, its bootstrap commands once it is up.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

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
            run_setup(pod.scrubbed(c.engine.command()), args, spec, Step::Setup).await?;
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
        run_setup(pod.command(&program), &args, spec, Step::Setup).await?;
    }
    Ok(())
}

/// Runs the bootstrap commands against the pod that is up.
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
    bootstrap(spec, &values, later, &|program: &Path| pod.command(program)).await
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

/// Runs the `[pod] bootstrap` commands against the running pod, in turn,
/// with the `[pod] env` entries `later` that only the running pod could
/// fill (filled, and checked, even when there is no command to give them).
async fn bootstrap(
    spec: &LaunchSpec,
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
    for command in &spec.bootstrap {
        let with_env = |program: &Path| {
            let mut cmd = pod_command(program);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            cmd
        };
        run_bootstrap(command, values, spec, &with_env).await?;
    }
    Ok(())
}

/// Runs one `[pod] bootstrap` command against the running pod: its
/// arguments filled with `values` (the handle's fields among them), in the
/// pod's environment and `TESTKIT_BASE_URL`.
async fn run_bootstrap(
    command: &[String],
    values: &crate::template::Values<'_>,
    spec: &LaunchSpec,
    pod_command: &dyn Fn(&Path) -> tokio::process::Command,
) -> Result<(), LaunchError> {
    let program = resolve_program(
        &command[0],
        spec.base_dir.as_deref(),
        spec.target_dir.as_deref(),
    )?;
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            crate::template::fill(a, values, crate::template::verbatim)
                .map_err(|p| LaunchError::Placeholder(format!("pod.bootstrap: {p}")))
        })
        .collect::<Result<_, _>>()?;
    let mut cmd = pod_command(&program);
    if let Some(base_url) = values.get("base_url") {
        cmd.env("TESTKIT_BASE_URL", base_url);
    }
    run_setup(cmd, &args, spec, Step::Bootstrap).await
}

/// Runs one `[pod] setup` or `bootstrap` command to completion under the boot ceiling, its
/// output appended to `pod.setup.log`.
async fn run_setup(
    mut cmd: tokio::process::Command,
    args: &[String],
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
    let (mut child, pgid) = process::spawn_in_group(&mut cmd)
        .map_err(io(format!("start the {} command {shown}", step.name())))?;
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
