//! Process groups: spawning commands, tracking every group this instance
//! started (in memory and on disk), reaping, and killing them.
//!
//! Every exec and every background process runs as the leader of a new
//! process group. A group is recorded on disk under `HOME/pgroups/` together
//! with its leader's start time (from `/proc/<pid>/stat`), so a later start
//! with the same HOME can kill what a crash left behind without hitting an
//! unrelated process that reused the pid. The server makes itself a child
//! subreaper so that grandchildren orphaned inside a sandbox are reaped here
//! instead of lingering as zombies. A process that leaves its group (or its
//! session) is still its sandbox's: [`crate::owner`] keeps that, and ending a
//! sandbox or the server ends those too.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use crate::api::{ExecResult, ProcessInfo, ProcessState};
use crate::error::ApiError;
use crate::owner::Owner;
use crate::proc_table::{all_pids, read_stat};

/// Cap on captured stdout and stderr of one exec.
pub(crate) const OUTPUT_CAP: usize = 1 << 20;

/// One process group this instance started.
#[derive(Debug, Clone)]
struct Group {
    start: u64,
    sandbox: String,
}

#[derive(Debug, Clone)]
struct Background {
    sandbox: String,
    info: ProcessInfo,
}

/// Registry of process groups and background processes.
pub(crate) struct Procs {
    dir: PathBuf,
    groups: Mutex<HashMap<i32, Group>>,
    /// Pids of our direct children still owned by tokio (the orphan reaper must not touch them).
    direct: Mutex<HashSet<i32>>,
    background: Mutex<BTreeMap<i32, Background>>,
    /// Which sandbox every process belongs to, groups and sessions aside.
    owner: Owner,
}

/// Whether the group led (originally) by `pgid` still has a live (non-zombie) member.
fn group_alive(pgid: i32, start: u64) -> bool {
    if let Some(st) = read_stat(pgid) {
        if st.start != start {
            // The pid was reused, so the original group is gone: a pid is not
            // handed out again while it is still in use as a group id.
            return false;
        }
    }
    all_pids().into_iter().any(|pid| matches!(read_stat(pid), Some(st) if st.pgrp == pgid && st.state != 'Z' && st.state != 'X'))
}

fn signal_group(pgid: i32, start: u64, sig: Signal) {
    if let Some(st) = read_stat(pgid) {
        if st.start != start {
            return;
        }
    }
    let _ = killpg(Pid::from_raw(pgid), sig);
}

/// Base environment of every command: nothing of the gateway's own leaks in.
fn base_env(root: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        "/usr/local/bin:/usr/bin:/bin".to_string(),
    );
    env.insert("HOME".to_string(), root.display().to_string());
    env
}

fn check_env(env: &BTreeMap<String, String>) -> Result<(), ApiError> {
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "invalid environment variable name {k:?}"
            )));
        }
        if v.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "environment variable {k:?} contains a NUL byte"
            )));
        }
    }
    Ok(())
}

/// Finds `prog` the way the child will, to answer a clear 400 instead of a spawn failure.
fn resolve(prog: &str, cwd: &Path, path_var: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if prog.contains('/') {
        let p = cwd.join(prog);
        return is_exec(&p).then_some(p);
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| cwd.join(d).join(prog))
        .find(|p| is_exec(p))
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(out.len());
                out.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    out
}

fn split_status(st: &ExitStatus) -> (Option<i32>, Option<i32>) {
    (st.code(), st.signal())
}

/// A command ready to spawn.
pub(crate) struct Spec<'a> {
    pub(crate) sandbox: &'a str,
    pub(crate) root: &'a Path,
    pub(crate) argv: &'a [String],
    /// Sandbox env then per-call env, already merged in order.
    pub(crate) env: Vec<&'a BTreeMap<String, String>>,
}

impl Procs {
    /// Opens the registry under `home` (records of a previous run are kept for [`Procs::reap_leftovers`]).
    ///
    /// `instance` names this pod's cgroup; `use_cgroup` false forces tracking by ancestry.
    pub(crate) fn new(home: &Path, instance: &str, use_cgroup: bool) -> std::io::Result<Arc<Self>> {
        let dir = home.join("pgroups");
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Self {
            dir,
            groups: Mutex::new(HashMap::new()),
            direct: Mutex::new(HashSet::new()),
            background: Mutex::new(BTreeMap::new()),
            owner: Owner::new(instance, use_cgroup),
        }))
    }

    /// How sandbox processes are tracked (for the log).
    pub(crate) fn ownership(&self) -> String {
        self.owner.describe()
    }

    /// Makes this process a child subreaper (best effort) and starts the orphan reaper.
    pub(crate) fn start_reaper(self: &Arc<Self>) {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!("sandboxd: warning: cannot become a child subreaper: {e}");
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            for tick in 0u64.. {
                // Ancestry is only as good as the scans that saw it: look
                // often (a no-op with cgroups, or while nothing runs).
                tokio::time::sleep(Duration::from_millis(50)).await;
                me.owner.scan();
                if tick % 4 == 3 {
                    me.reap_orphans();
                }
            }
        });
    }

    /// Reaps zombies that were reparented to us (not our tokio-owned children).
    pub(crate) fn reap_orphans(&self) {
        let me = std::process::id() as i32;
        let direct = self.direct.lock().unwrap();
        for pid in all_pids() {
            if direct.contains(&pid) {
                continue;
            }
            if let Some(st) = read_stat(pid) {
                if st.ppid == me && st.state == 'Z' {
                    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
                }
            }
        }
    }

    /// Kills groups recorded by a previous run with the same HOME (after a crash) and forgets them.
    pub(crate) async fn reap_leftovers(&self) -> usize {
        let mut found = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let path = e.path();
                let Some(pgid) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.parse::<i32>().ok())
                else {
                    let _ = std::fs::remove_file(&path);
                    continue;
                };
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let start = text
                    .split_whitespace()
                    .next()
                    .and_then(|s| s.parse::<u64>().ok());
                if let Some(start) = start {
                    found.push((pgid, start));
                }
                let _ = std::fs::remove_file(&path);
            }
        }
        let alive: Vec<(i32, u64)> = found
            .into_iter()
            .filter(|(p, s)| group_alive(*p, *s))
            .collect();
        for (p, s) in &alive {
            signal_group(*p, *s, Signal::SIGKILL);
        }
        self.wait_gone(&alive, Duration::from_secs(10)).await;
        // In cgroup mode, what a crashed run left is still in its cgroup,
        // whatever group or session it moved to.
        let stray = self.owner.members(None);
        if !stray.is_empty() {
            let left = self
                .owner
                .end(None, Signal::SIGKILL, Duration::ZERO, &|| {
                    self.reap_orphans()
                })
                .await;
            if !left.is_empty() {
                eprintln!(
                    "sandboxd: warning: {} process(es) left by a previous run survived SIGKILL: {left:?}",
                    left.len()
                );
            }
        }
        alive.len() + stray.len()
    }

    fn record(&self, pgid: i32, start: u64, sandbox: &str) {
        self.groups.lock().unwrap().insert(
            pgid,
            Group {
                start,
                sandbox: sandbox.to_string(),
            },
        );
        let _ = std::fs::write(
            self.dir.join(pgid.to_string()),
            format!("{start} {sandbox}\n"),
        );
    }

    fn forget(&self, pgid: i32) {
        self.groups.lock().unwrap().remove(&pgid);
        let _ = std::fs::remove_file(self.dir.join(pgid.to_string()));
    }

    async fn wait_gone(&self, groups: &[(i32, u64)], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            self.reap_orphans();
            if !groups.iter().any(|(p, s)| group_alive(*p, *s)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `first` to the groups, waits up to `grace`, then SIGKILLs what is left and waits for it.
    async fn terminate(&self, groups: Vec<(i32, u64)>, first: Signal, grace: Duration) {
        for (p, s) in &groups {
            signal_group(*p, *s, first);
        }
        if first != Signal::SIGKILL && self.wait_gone(&groups, grace).await {
        } else {
            for (p, s) in &groups {
                signal_group(*p, *s, Signal::SIGKILL);
            }
            if !self.wait_gone(&groups, Duration::from_secs(10)).await {
                eprintln!("sandboxd: warning: some process groups did not exit after SIGKILL");
            }
        }
        for (p, _) in &groups {
            self.forget(*p);
        }
    }

    /// Kills every process of `sandbox` (its groups and whatever left them),
    /// waits for them to exit, forgets them. Answers the processes still alive
    /// after SIGKILL and waiting (none, normally).
    pub(crate) async fn kill_sandbox(&self, sandbox: &str) -> Vec<(i32, u64)> {
        let groups: Vec<(i32, u64)> = self
            .groups
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, g)| g.sandbox == sandbox)
            .map(|(p, g)| (*p, g.start))
            .collect();
        self.terminate(groups, Signal::SIGKILL, Duration::ZERO)
            .await;
        let left = self
            .owner
            .end(Some(sandbox), Signal::SIGKILL, Duration::ZERO, &|| {
                self.reap_orphans()
            })
            .await;
        if left.is_empty() {
            self.owner.forget(sandbox);
        }
        self.background
            .lock()
            .unwrap()
            .retain(|_, b| b.sandbox != sandbox);
        left
    }

    /// Shutdown: SIGTERM every process of every sandbox, SIGKILL after
    /// `grace`, wait for all of them. Answers the processes still alive.
    pub(crate) async fn kill_all(&self, grace: Duration) -> Vec<(i32, u64)> {
        let left = self
            .owner
            .end(None, Signal::SIGTERM, grace, &|| self.reap_orphans())
            .await;
        if left.is_empty() {
            self.owner.forget_all();
        }
        let groups: Vec<(i32, u64)> = self
            .groups
            .lock()
            .unwrap()
            .iter()
            .map(|(p, g)| (*p, g.start))
            .collect();
        // Their members are gone already; this forgets the groups.
        self.terminate(groups, Signal::SIGKILL, Duration::ZERO)
            .await;
        left
    }

    /// Pgids currently tracked (for diagnostics and tests).
    pub(crate) fn group_count(&self) -> usize {
        self.groups.lock().unwrap().len()
    }

    fn build(&self, spec: &Spec<'_>) -> Result<Command, ApiError> {
        let Some(prog) = spec.argv.first() else {
            return Err(ApiError::bad_request("argv must not be empty"));
        };
        if spec.argv.iter().any(|a| a.contains('\0')) {
            return Err(ApiError::bad_request("argv must not contain NUL bytes"));
        }
        let mut env = base_env(spec.root);
        for layer in &spec.env {
            check_env(layer)?;
            env.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let path_var = env.get("PATH").cloned().unwrap_or_default();
        if resolve(prog, spec.root, &path_var).is_none() {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "command_not_found",
                format!("command {prog:?} not found or not executable (PATH={path_var})"),
            ));
        }
        let mut cmd = Command::new(prog);
        cmd.args(&spec.argv[1..])
            .env_clear()
            .envs(&env)
            .current_dir(spec.root)
            .process_group(0)
            .stdin(Stdio::null())
            .kill_on_drop(false);
        Ok(cmd)
    }

    /// Spawns with the orphan reaper held off, and records the new group.
    fn spawn(
        &self,
        mut cmd: Command,
        sandbox: &str,
        argv0: &str,
    ) -> Result<(Child, i32), ApiError> {
        let join = self.owner.join_file(sandbox).map_err(|e| {
            ApiError::internal(format!(
                "cannot prepare the cgroup of sandbox {sandbox:?}: {e}"
            ))
        })?;
        if let Some(fd) = join.as_ref().map(std::os::fd::AsRawFd::as_raw_fd) {
            // SAFETY: the closure only calls write(2) on `fd`, which `join`
            // keeps open until `spawn` has returned.
            unsafe {
                cmd.pre_exec(move || crate::owner::join_in_child(fd));
            }
        }
        let mut direct = self.direct.lock().unwrap();
        let child = cmd
            .spawn()
            .map_err(|e| ApiError::bad_request(format!("failed to start {argv0:?}: {e}")))?;
        drop(join);
        let pid = child
            .id()
            .map(|p| p as i32)
            .ok_or_else(|| ApiError::internal("child exited before it had a pid"))?;
        direct.insert(pid);
        drop(direct);
        let start = read_stat(pid).map(|s| s.start).unwrap_or(0);
        self.record(pid, start, sandbox);
        self.owner.adopt(sandbox, (pid, start));
        Ok((child, pid))
    }

    /// Runs a command to completion (or timeout) and captures its output.
    pub(crate) async fn exec(
        &self,
        spec: Spec<'_>,
        timeout: Duration,
    ) -> Result<ExecResult, ApiError> {
        let mut cmd = self.build(&spec)?;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let (mut child, pid) = self.spawn(cmd, spec.sandbox, &spec.argv[0])?;
        let start = read_stat(pid).map(|s| s.start).unwrap_or(0);
        let out = tokio::spawn(read_capped(child.stdout.take().expect("piped")));
        let err = tokio::spawn(read_capped(child.stderr.take().expect("piped")));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(st) => (st, false),
            Err(_) => {
                signal_group(pid, start, Signal::SIGKILL);
                (child.wait().await, true)
            }
        };
        self.direct.lock().unwrap().remove(&pid);
        // Whatever the command left running in its group goes with it.
        signal_group(pid, start, Signal::SIGKILL);
        self.terminate(vec![(pid, start)], Signal::SIGKILL, Duration::ZERO)
            .await;
        let grab = |h: tokio::task::JoinHandle<Vec<u8>>| async move {
            match tokio::time::timeout(Duration::from_secs(2), h).await {
                Ok(Ok(v)) => String::from_utf8_lossy(&v).into_owned(),
                _ => String::new(),
            }
        };
        let (stdout, stderr) = (grab(out).await, grab(err).await);
        let status = status
            .map_err(|e| ApiError::internal(format!("waiting for the command failed: {e}")))?;
        let (exit_code, signal) = split_status(&status);
        Ok(ExecResult {
            exit_code,
            signal,
            timed_out,
            stdout,
            stderr,
        })
    }

    /// Starts a background process; its output goes to `logs/<pid>.stdout|stderr`.
    pub(crate) fn start(self: &Arc<Self>, spec: Spec<'_>, logs: &Path) -> Result<i32, ApiError> {
        let mut cmd = self.build(&spec)?;
        std::fs::create_dir_all(logs)?;
        let tmp = logs.join(format!(".new-{}", crate::state::random_id(12)));
        let (o, e) = (tmp.with_extension("stdout"), tmp.with_extension("stderr"));
        cmd.stdout(std::fs::File::create(&o)?)
            .stderr(std::fs::File::create(&e)?);
        let spawned = self.spawn(cmd, spec.sandbox, &spec.argv[0]);
        let (mut child, pid) = match spawned {
            Ok(x) => x,
            Err(err) => {
                let _ = std::fs::remove_file(&o);
                let _ = std::fs::remove_file(&e);
                return Err(err);
            }
        };
        let _ = std::fs::rename(&o, logs.join(format!("{pid}.stdout")));
        let _ = std::fs::rename(&e, logs.join(format!("{pid}.stderr")));
        let start = read_stat(pid).map(|s| s.start).unwrap_or(0);
        let info = ProcessInfo {
            pid,
            argv: spec.argv.to_vec(),
            state: ProcessState::Running,
            exit_code: None,
            signal: None,
        };
        self.background.lock().unwrap().insert(
            pid,
            Background {
                sandbox: spec.sandbox.to_string(),
                info,
            },
        );
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let status = child.wait().await;
            me.direct.lock().unwrap().remove(&pid);
            if let Some(b) = me.background.lock().unwrap().get_mut(&pid) {
                b.info.state = ProcessState::Exited;
                if let Ok(st) = &status {
                    (b.info.exit_code, b.info.signal) = split_status(st);
                }
            }
            // The group may outlive its leader; it stays recorded (and is killed
            // with the sandbox) until nothing of it is left.
            if !group_alive(pid, start) {
                me.forget(pid);
            }
        });
        Ok(pid)
    }

    /// Background processes of `sandbox`.
    pub(crate) fn list(&self, sandbox: &str) -> Vec<ProcessInfo> {
        self.background
            .lock()
            .unwrap()
            .values()
            .filter(|b| b.sandbox == sandbox)
            .map(|b| b.info.clone())
            .collect()
    }

    /// One background process of `sandbox`.
    pub(crate) fn get(&self, sandbox: &str, pid: i32) -> Option<ProcessInfo> {
        self.background
            .lock()
            .unwrap()
            .get(&pid)
            .filter(|b| b.sandbox == sandbox)
            .map(|b| b.info.clone())
    }

    /// Delivers `sig` to one running background process of `sandbox`.
    pub(crate) fn signal(&self, sandbox: &str, pid: i32, sig: Signal) -> Result<(), ApiError> {
        let bg = self.background.lock().unwrap();
        let Some(b) = bg.get(&pid).filter(|b| b.sandbox == sandbox) else {
            return Err(ApiError::not_found(format!(
                "process {pid} not found in sandbox {sandbox:?}"
            )));
        };
        if b.info.state != ProcessState::Running {
            return Err(ApiError::conflict(format!(
                "process {pid} has already exited"
            )));
        }
        // Checked under the lock the waiter takes to mark the process exited; the
        // remaining window (reaped, not yet marked) is a few instructions long.
        nix::sys::signal::kill(Pid::from_raw(pid), sig)
            .map_err(|e| ApiError::conflict(format!("cannot signal process {pid}: {e}")))
    }
}

/// Parses a signal name of the API.
pub(crate) fn parse_signal(name: &str) -> Result<Signal, ApiError> {
    let n = name.strip_prefix("SIG").unwrap_or(name);
    match n {
        "TERM" => Ok(Signal::SIGTERM),
        "INT" => Ok(Signal::SIGINT),
        "KILL" => Ok(Signal::SIGKILL),
        "HUP" => Ok(Signal::SIGHUP),
        "USR1" => Ok(Signal::SIGUSR1),
        _ => Err(ApiError::bad_request(format!(
            "unknown signal {name:?}; expected one of: TERM, INT, KILL, HUP, USR1"
        ))),
    }
}
