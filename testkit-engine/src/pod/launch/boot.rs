//! Boot: a private directory, free ports, the pod's process in a group of
//! its own, and the wait for its handle and a healthy answer.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::setup::{bootstrap_running, run_setups, PodEnv};
use super::spec::{resolve_program, BootObserver, BootStep, LaunchError, LaunchSpec, LaunchedPod};
use super::stop::keep_logs;
use crate::pod::check::{check_health, HealthReport};
use crate::pod::container;
use crate::pod::handle::PodHandle;
use crate::process;

/// Starts a pod and waits until it is up (handle printed, health answered).
pub async fn launch(spec: &LaunchSpec) -> Result<LaunchedPod, LaunchError> {
    // A machine pod starts no program of this machine but QEMU.
    let program = match (&spec.container, &spec.machine) {
        (Some(c), _) => Some(c.engine().program().to_owned()),
        (None, Some(_)) => None,
        (None, None) => Some(resolve_program(
            &spec.command[0],
            spec.base_dir.as_deref(),
            spec.target_dir.as_deref(),
        )?),
    };
    let io = |what: String| {
        move |source| LaunchError::Io {
            what,
            cause: source,
        }
    };
    std::fs::create_dir_all(&spec.logs_dir)
        .map_err(io(format!("create {}", spec.logs_dir.display())))?;
    let private_dir = create_private_dir(spec.private_parent.as_deref())?;
    BootObserver::tell(
        spec.observer.as_ref(),
        BootStep::PrivateDir(private_dir.clone()),
    );
    let booted = match (&spec.machine, &program) {
        (Some(m), _) => super::machine::boot(spec, m, private_dir.clone()).await,
        (None, Some(program)) => boot(spec, program, private_dir.clone()).await,
        (None, None) => unreachable!("a pod that is no machine has a program"),
    };
    if booted.is_err() {
        container::remove_after_failed_boot(&private_dir).await;
        let _ = std::fs::remove_dir_all(&private_dir);
    }
    booted
}

async fn boot(
    spec: &LaunchSpec,
    program: &Path,
    private_dir: PathBuf,
) -> Result<LaunchedPod, LaunchError> {
    let home = private_dir.join("home");
    std::fs::create_dir(&home).map_err(|source| LaunchError::Io {
        what: format!("create {}", home.display()),
        cause: source,
    })?;
    let site = PodSite {
        home: home.to_string_lossy().into_owned(),
        ports: PodPorts::find(spec)?,
    };
    let port = site.ports.port;
    let fields = fill_fields(spec, &site)?;
    let made_handle = made_handle(spec, &site.ports, &fields)?;
    let values = site
        .values()
        .extend(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (env, for_bootstrap) = split_env(spec, &values);
    let host_ports = node_ports(spec, port)?;
    let container = match &spec.container {
        Some(c) => Some(
            container::prepare_launch(
                c,
                spec.base_dir.as_deref(),
                &private_dir,
                &host_ports,
                &fields,
            )
            .await
            .map_err(|e| LaunchError::Container(crate::errors::error_chain(&e)))?,
        ),
        None => None,
    };
    let cluster = spec
        .container
        .as_ref()
        .zip(container.as_ref())
        .and_then(|(c, p)| crate::pod::cluster::describe(c, p, &host_ports, &spec.health_path));
    let args = pod_args(spec, container.as_ref(), &site, &values)?;

    let stdout_raw = private_dir.join("stdout.raw");
    let stderr_log = spec.logs_dir.join("pod.stderr.log");
    let (out, err) = (create_private_log(&stdout_raw)?, create_log(&stderr_log)?);
    let pod = PodEnv {
        spec,
        home: &home,
        private_dir: &private_dir,
        port,
        env: &env,
        container: container.as_ref(),
    };
    run_setups(spec, container.as_ref(), &values, &pod).await?;
    if let Some(c) = &container {
        crate::pod::cluster::start_nodes(&c.node_args, &spec.logs_dir, || {
            pod.scrubbed(c.engine.command())
        })
        .await
        .map_err(|e| LaunchError::Container(crate::errors::error_chain(&e)))?;
    }
    let mut cmd = match &container {
        Some(c) => pod.scrubbed(c.engine.command()),
        None => pod.command(program),
    };
    cmd.args(&args).stdout(out).stderr(err).kill_on_drop(false);
    let started = Instant::now();
    let (mut child, pgid, start_ticks) = spawn_pod(spec, cmd, program)?;

    let result = async {
        let (handle, health) = wait_until_up(
            spec,
            &mut child,
            &stdout_raw,
            &stderr_log,
            started,
            made_handle,
            spec.container.as_ref().map(|_| port),
        )
        .await?;
        let handle = match cluster {
            Some(info) => {
                info.wait_healthy(started + spec.ceiling)
                    .await
                    .map_err(|e| LaunchError::Container(crate::errors::error_chain(&e)))?;
                handle.with_cluster(info)
            }
            // A pod that is its process group: a test process reads its
            // state and its last lines when the test hangs.
            None if container.is_none() => handle.with_process(
                crate::pod::process::PodProcess::new(pgid, start_ticks, stderr_log.clone()),
            ),
            // A pod that is one container: the same, from the engine.
            None => match spec.container.as_ref().zip(container.as_ref()) {
                Some((section, prepared)) => {
                    handle.with_container(crate::pod::container::PodContainer::new(
                        prepared.pod_id.clone(),
                        section.docker.clone(),
                    ))
                }
                None => handle,
            },
        };
        bootstrap_running(spec, &handle, &values, &for_bootstrap, &pod).await?;
        Ok((handle, health))
    }
    .await;
    match result {
        Ok((handle, health)) => Ok(LaunchedPod {
            handle,
            pid: pgid as u32,
            pgid,
            start_ticks,
            private_dir,
            home,
            logs_dir: spec.logs_dir.clone(),
            health,
            boot_time: started.elapsed(),
            child: Some(child),
            machine: None,
        }),
        Err(e) => {
            abandon(spec, child, pgid, &private_dir, &stdout_raw, &stderr_log).await;
            Err(e)
        }
    }
}

/// Creates a file the pod's output goes to.
fn create_log(path: &Path) -> Result<File, LaunchError> {
    File::create(path).map_err(|source| LaunchError::Io {
        what: format!("create {}", path.display()),
        cause: source,
    })
}

/// Creates the file the pod's stdout goes to, which holds its token until
/// it is redacted: mode 0600, in the private dir (0700), for the owner
/// alone whatever the umask.
fn create_private_log(path: &Path) -> Result<File, LaunchError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| LaunchError::Io {
            what: format!("create {}", path.display()),
            cause: source,
        })
}

/// Starts the pod's process in a process group of its own, and tells the
/// observer: its child, group and start time.
fn spawn_pod(
    spec: &LaunchSpec,
    mut cmd: tokio::process::Command,
    program: &Path,
) -> Result<(tokio::process::Child, i32, Option<u64>), LaunchError> {
    let (child, pgid) = process::spawn_in_group(&mut cmd).map_err(|source| LaunchError::Io {
        what: format!("start {}", program.display()),
        cause: source,
    })?;
    let start_ticks = process::start_ticks(pgid);
    BootObserver::tell(spec.observer.as_ref(), BootStep::Pod { pgid, start_ticks });
    Ok((child, pgid, start_ticks))
}

/// The loopback ports of a pod: `{port}`, and `{port_<name>}` of each of
/// `[pod] ports`.
struct PodPorts {
    port: u16,
    port_text: String,
    listen: String,
    keys: Vec<String>,
    texts: Vec<String>,
}

impl PodPorts {
    fn find(spec: &LaunchSpec) -> Result<PodPorts, LaunchError> {
        // Free ports, held open together while they are found, so that no
        // two are one.
        let all_ports = free_ports(1 + spec.ports.len()).map_err(|source| LaunchError::Io {
            what: "find a free loopback port".to_owned(),
            cause: source,
        })?;
        let (port, extra_ports) = (all_ports[0], &all_ports[1..]);
        Ok(PodPorts {
            port,
            port_text: port.to_string(),
            listen: format!("127.0.0.1:{port}"),
            keys: spec.ports.iter().map(|n| format!("port_{n}")).collect(),
            texts: extra_ports.iter().map(u16::to_string).collect(),
        })
    }

    /// `port_<name>` and its port, for each of `[pod] ports`.
    fn named(&self) -> impl Iterator<Item = (&str, &str)> {
        self.keys
            .iter()
            .map(String::as_str)
            .zip(self.texts.iter().map(String::as_str))
    }
}

/// What a pod's placeholders are filled from before anything of it runs:
/// its HOME and its ports.
struct PodSite {
    home: String,
    ports: PodPorts,
}

impl PodSite {
    fn values(&self) -> crate::template::Values<'_> {
        crate::template::Values::new()
            .with("home", &self.home)
            .with("port", &self.ports.port_text)
            .with("listen", &self.ports.listen)
            .extend(self.ports.named())
    }
}

/// `[pod] fields`, filled: each may use the pod's site and a `{random}` of
/// its own.
fn fill_fields(spec: &LaunchSpec, site: &PodSite) -> Result<BTreeMap<String, String>, LaunchError> {
    let randoms: Vec<String> = spec
        .fields
        .keys()
        .map(|_| crate::ids::random_id(24))
        .collect();
    let mut fields = BTreeMap::new();
    for ((key, value), random) in spec.fields.iter().zip(&randoms) {
        let values = site.values().with("random", random);
        let filled = crate::template::fill(value, &values, crate::template::verbatim)
            .map_err(|p| LaunchError::Placeholder(format!("pod.fields.{key}: {p}")))?;
        fields.insert(key.clone(), filled);
    }
    Ok(fields)
}

/// A pod that prints no handle gets one made of `[pod] fields`.
fn made_handle(
    spec: &LaunchSpec,
    ports: &PodPorts,
    fields: &BTreeMap<String, String>,
) -> Result<Option<PodHandle>, LaunchError> {
    if spec.fields.is_empty() {
        return Ok(None);
    }
    super::spec::handle_of_fields(spec, ports.port, fields).map(Some)
}

/// `[pod] env` split in two: the entries filled now, for the pod, and the
/// names of those left for the bootstrap commands.
fn split_env<'s>(
    spec: &'s LaunchSpec,
    values: &crate::template::Values<'_>,
) -> (BTreeMap<&'s str, String>, Vec<&'s str>) {
    // An entry that needs what only the running pod's handle says
    // (`{base_url}`, a printed handle's `{token}`) is for the bootstrap
    // commands, filled once the pod is up; the rest is the pod's too.
    let mut env = BTreeMap::new();
    let mut later = Vec::new();
    for (k, v) in &spec.env_templates {
        match crate::template::fill(v, values, crate::template::verbatim) {
            Ok(filled) => {
                env.insert(k.as_str(), filled);
            }
            Err(_) => later.push(k.as_str()),
        }
    }
    (env, later)
}

/// The pod's arguments: a container pod's `docker run`, or `[pod] command`
/// filled, given `--home` and `--listen` when it places neither itself.
fn pod_args(
    spec: &LaunchSpec,
    container: Option<&container::Prepared>,
    site: &PodSite,
    values: &crate::template::Values<'_>,
) -> Result<Vec<String>, LaunchError> {
    let mut args: Vec<String> = match container {
        Some(c) => c.run_args.clone(),
        None => spec.command[1..]
            .iter()
            .map(|a| {
                crate::template::fill(a, values, crate::template::verbatim)
                    .map_err(|p| LaunchError::Placeholder(format!("pod.command: {p}")))
            })
            .collect::<Result<_, _>>()?,
    };
    if container.is_none() && !places_itself(spec) {
        args.extend([
            "--home".to_owned(),
            site.home.clone(),
            "--listen".to_owned(),
            site.ports.listen.clone(),
        ]);
    }
    Ok(args)
}

/// Whether `[pod] command` says where the pod lives and listens itself: it
/// uses `{home}`, `{port}` or `{listen}`, in its arguments or in `[pod]
/// env` (a service that reads its address from the environment, and
/// rejects flags it does not know).
fn places_itself(spec: &LaunchSpec) -> bool {
    let places = |a: &String| {
        ["{home}", "{port}", "{listen}"]
            .iter()
            .any(|p| a.contains(p))
    };
    spec.command.iter().any(places) || spec.env_templates.values().any(places)
}

/// Cleans up after a pod that did not come up.
async fn abandon(
    spec: &LaunchSpec,
    mut child: tokio::process::Child,
    pgid: i32,
    private_dir: &Path,
    stdout_raw: &Path,
    stderr_log: &Path,
) {
    // Leave nothing running; keep the logs.
    container::remove_after_failed_boot(private_dir).await;
    let reaped = tokio::spawn(async move { child.wait().await });
    let _ = process::kill_group(pgid, Duration::from_secs(5)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), reaped).await;
    keep_logs(stdout_raw, &spec.logs_dir, stderr_log);
    let _ = std::fs::remove_dir_all(private_dir);
}

/// `n` distinct free loopback ports: each bound until all are found.
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

async fn wait_until_up(
    spec: &LaunchSpec,
    child: &mut tokio::process::Child,
    stdout_raw: &Path,
    stderr_log: &Path,
    started: Instant,
    made_handle: Option<PodHandle>,
    published_port: Option<u16>,
) -> Result<(PodHandle, HealthReport), LaunchError> {
    let mut watch = BootWatch {
        out: Tail::new(stdout_raw),
        err: Tail::new(stderr_log),
        last_activity: Instant::now(),
        last_seen: "nothing (the pod printed no output)".to_owned(),
        handle: made_handle,
        next_health: Instant::now(),
    };
    loop {
        watch.read_output(spec, published_port)?;
        if let Some(up) = watch.check_health(spec).await {
            return Ok(up);
        }
        if let Some(exited) = watch.exited(spec, child) {
            return Err(exited);
        }
        watch.within_limits(spec, started)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a booting pod has shown so far, and when it last showed anything.
struct BootWatch {
    out: Tail,
    err: Tail,
    last_activity: Instant,
    /// The latest sign of life, for the error if the pod never comes up.
    last_seen: String,
    handle: Option<PodHandle>,
    next_health: Instant,
}

impl BootWatch {
    /// Reads the new lines the pod printed; a line of stdout that opens a
    /// JSON object, while there is no handle, is the pod's handle.
    fn read_output(
        &mut self,
        spec: &LaunchSpec,
        published_port: Option<u16>,
    ) -> Result<(), LaunchError> {
        let mut progressed = false;
        for line in self.out.lines() {
            progressed = true;
            if self.handle.is_none() && spec.fields.is_empty() && line.trim_start().starts_with('{')
            {
                // A container's service prints its address inside the
                // container; the tests reach it at the published port.
                let line = match published_port {
                    Some(port) => container::rewrite_printed_handle(&line, port),
                    None => line.clone(),
                };
                match PodHandle::parse(line.trim(), &spec.policy) {
                    Ok(h) => {
                        h.register_secrets();
                        self.last_seen =
                            format!("the handle of pod {} at {}", h.name(), h.base_url());
                        self.handle = Some(h);
                        continue;
                    }
                    Err(source) => {
                        return Err(LaunchError::BadHandle {
                            cause: source,
                            logs: spec.logs_dir.clone(),
                        })
                    }
                }
            }
            self.last_seen = format!("stdout: {}", crate::redact(&line));
        }
        for line in self.err.lines() {
            progressed = true;
            self.last_seen = format!("stderr: {}", crate::redact(&line));
        }
        if progressed {
            self.last_activity = Instant::now();
        }
        Ok(())
    }

    /// The handle and its health once a pod with a handle answers healthy;
    /// asked at most every 200ms.
    async fn check_health(&mut self, spec: &LaunchSpec) -> Option<(PodHandle, HealthReport)> {
        let h = self.handle.as_ref()?;
        if Instant::now() < self.next_health {
            return None;
        }
        let path = h.health().unwrap_or(&spec.health_path).to_owned();
        let report = check_health(h.base_url(), &path, Duration::from_secs(2)).await;
        if report.ok() {
            return Some((self.handle.take().expect("checked"), report));
        }
        self.last_seen = format!("health {}", report.summary());
        self.next_health = Instant::now() + Duration::from_millis(200);
        None
    }

    /// The error of a pod that exited before it was up.
    fn exited(
        &mut self,
        spec: &LaunchSpec,
        child: &mut tokio::process::Child,
    ) -> Option<LaunchError> {
        let Ok(Some(status)) = child.try_wait() else {
            return None;
        };
        // Read what it printed last before reporting.
        for line in self.out.lines().into_iter().chain(self.err.lines()) {
            self.last_seen = crate::redact(&line).into_owned();
        }
        // The engine names a taken port lines before its last one.
        if spec.container.is_some() {
            let said = std::fs::read_to_string(&self.err.path).unwrap_or_default();
            if let Some(mut taken) = crate::containers::port_taken(&said) {
                taken.said = crate::redact(&taken.said).into_owned();
                return Some(LaunchError::PortTaken {
                    status: status.to_string(),
                    taken,
                    logs: spec.logs_dir.clone(),
                });
            }
        }
        Some(LaunchError::ExitedEarly {
            status: status.to_string(),
            last_seen: self.last_seen.clone(),
            logs: spec.logs_dir.clone(),
        })
    }

    /// Fails a boot past the hard ceiling, or silent for the inactivity
    /// timeout.
    fn within_limits(&self, spec: &LaunchSpec, started: Instant) -> Result<(), LaunchError> {
        if started.elapsed() >= spec.ceiling {
            return Err(LaunchError::Timeout {
                which: format!("hard ceiling {}", humantime::format_duration(spec.ceiling)),
                waited: started.elapsed(),
                last_seen: self.last_seen.clone(),
                logs: spec.logs_dir.clone(),
            });
        }
        if self.last_activity.elapsed() >= spec.inactivity_timeout {
            return Err(LaunchError::Timeout {
                which: format!(
                    "no progress for {}",
                    humantime::format_duration(spec.inactivity_timeout)
                ),
                waited: started.elapsed(),
                last_seen: self.last_seen.clone(),
                logs: spec.logs_dir.clone(),
            });
        }
        Ok(())
    }
}

/// Follows a file the pod appends to, a line at a time.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_owned(),
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn lines(&mut self) -> Vec<String> {
        let mut buf = Vec::new();
        if let Ok(mut f) = File::open(&self.path) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                let _ = f.read_to_end(&mut buf);
            }
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut lines = Vec::new();
        while let Some(pos) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            lines.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        lines
    }
}

/// The loopback port each node of a container pod is published on, by
/// name: the pod's `port` for the entry (or, for a pod of one container,
/// for the name `""`), a free one for each other node.
fn node_ports(spec: &LaunchSpec, port: u16) -> Result<BTreeMap<String, u16>, LaunchError> {
    let mut ports = BTreeMap::from([(String::new(), port)]);
    let Some(c) = &spec.container else {
        return Ok(ports);
    };
    if let Some(entry) = &c.entry {
        ports.insert(entry.clone(), port);
    }
    let others: Vec<&String> = c.other_nodes().map(|(n, _)| n).collect();
    let free = free_ports(others.len() + 1).map_err(|source| LaunchError::Io {
        what: "find free loopback ports for the pod's nodes".to_owned(),
        cause: source,
    })?;
    // The pod's own port was free a moment ago, and may be again: skip it.
    let mut free = free.into_iter().filter(|p| *p != port);
    for name in others {
        let p = free.next().ok_or_else(|| LaunchError::Io {
            what: "find free loopback ports for the pod's nodes".to_owned(),
            cause: std::io::Error::other("too few"),
        })?;
        ports.insert(name.clone(), p);
    }
    Ok(ports)
}

pub(super) fn create_private_dir(parent: Option<&Path>) -> Result<PathBuf, LaunchError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = parent
        .map(Path::to_owned)
        .unwrap_or_else(std::env::temp_dir);
    let mut last = None;
    for _ in 0..8 {
        let dir = parent.join(format!("testkit-pod-{}", crate::ids::random_id(10)));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    Err(LaunchError::Io {
        what: format!("create a private directory under {}", parent.display()),
        cause: last.expect("tried"),
    })
}
