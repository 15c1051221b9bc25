//! Who owns a process: every descendant of a sandbox's commands belongs to
//! that sandbox, whatever session or process group it moves to, so delete
//! and shutdown can end all of them and check that none is left.
//!
//! Two ways, chosen at start:
//!
//! - **cgroup** (where a cgroup v2 hierarchy is writable): each sandbox gets
//!   `<our cgroup>/<instance>/<sandbox>/`, and each command joins it between
//!   fork and exec, before it can fork itself. Membership is the kernel's;
//!   `cgroup.kill` ends a whole cgroup at once, forks included, and the
//!   directory of an instance that crashed with processes running is found
//!   again at the next start (an idle instance has no directory). On a
//!   machine that mounts only cgroup v1 hierarchies, sandboxd started as
//!   root mounts the (single, kernel-wide) v2 hierarchy in a mount
//!   namespace of its own ([`mount_cgroup2_privately`]), so that the
//!   kernel's membership is there too.
//! - **lineage** (fallback, or `--no-cgroup`): ancestry read from `/proc`
//!   every reaper tick (50 ms) and before every kill. sandboxd is a child
//!   subreaper, so an orphan is re-parented to it rather than to init and
//!   stays in its subtree; a kill stops the processes first so none can
//!   fork while it is ended. Known gap: a process whose parent exits within
//!   one tick of forking it, and that also left its group, has no known
//!   sandbox; it is still ended at shutdown, with every other descendant.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::proc_table::{all_pids, read_stat, Stat};

/// A process as seen once: its pid and its start time (pids are reused).
pub(crate) type Proc = (i32, u64);

/// How long ending processes may take after SIGKILL before it counts as failed.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How this instance knows which sandbox a process belongs to.
pub(crate) enum Owner {
    /// The kernel's cgroup membership.
    Cgroup {
        /// `<mount>/<our cgroup>/<instance>`: one child directory per sandbox.
        base: PathBuf,
    },
    /// Ancestry seen in `/proc`.
    Lineage {
        /// Every process known to belong to a sandbox.
        known: Mutex<HashMap<Proc, String>>,
    },
}

/// Where no cgroup v2 hierarchy is mounted, mounts one, in a mount
/// namespace of this process's own (the host's mounts stay as they were),
/// at `<home>/.cgroup2`. Must run while the process has one thread: a
/// process whose threads share its filesystem context cannot leave its
/// mount namespace. Returns where it mounted the hierarchy, `None` when
/// one was mounted already, or why it could not (not root, say).
pub fn mount_cgroup2_privately(home: &Path) -> Result<Option<PathBuf>, String> {
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    if own_cgroup().is_some() {
        return Ok(None);
    }
    let at = home.join(".cgroup2");
    std::fs::create_dir_all(&at).map_err(|e| format!("cannot create {}: {e}", at.display()))?;
    unshare(CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot make a mount namespace of its own: {e}"))?;
    // Nothing mounted here may reach the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make its mounts private: {e}"))?;
    mount(
        Some("cgroup2"),
        &at,
        Some("cgroup2"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| {
        format!(
            "cannot mount the cgroup v2 hierarchy at {}: {e}",
            at.display()
        )
    })?;
    Ok(Some(at))
}

/// Where the cgroup v2 hierarchy is mounted and where this process sits in it.
fn own_cgroup() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })?;
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(rel.trim_start_matches('/')))
}

fn alive(p: Proc) -> bool {
    matches!(read_stat(p.0), Some(st) if st.start == p.1 && st.state != 'Z' && st.state != 'X')
}

fn signal(p: Proc, sig: Signal) {
    if alive(p) {
        let _ = kill(Pid::from_raw(p.0), sig);
    }
}

/// Live members of one cgroup directory and its children.
fn cgroup_members(dir: &Path) -> Vec<Proc> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if let Some(st) = read_stat(pid) {
                if st.state != 'Z' && st.state != 'X' {
                    out.push((pid, st.start));
                }
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(cgroup_members(&e.path()));
            }
        }
    }
    out
}

/// Removes a cgroup directory and its children (each must be empty).
fn remove_cgroup(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Owner {
    /// A cgroup for `instance` if one can be made (and `use_cgroup`), else lineage.
    pub(crate) fn new(instance: &str, use_cgroup: bool) -> Owner {
        if use_cgroup {
            match own_cgroup() {
                Some(parent) => {
                    let base = parent.join(instance);
                    match std::fs::create_dir_all(&base).and_then(|()| probe_join(&base)) {
                        Ok(()) => {
                            // Empty unless a crashed run left processes in it.
                            let _ = std::fs::remove_dir(&base);
                            return Owner::Cgroup { base };
                        }
                        Err(e) => {
                            remove_cgroup(&base);
                            eprintln!(
                                "sandboxd: warning: cannot use the cgroup {}: {e}; tracking sandbox processes by ancestry instead",
                                base.display()
                            );
                        }
                    }
                }
                None => eprintln!(
                    "sandboxd: warning: no cgroup v2 hierarchy found; tracking sandbox processes by ancestry instead"
                ),
            }
        }
        Owner::Lineage {
            known: Mutex::new(HashMap::new()),
        }
    }

    /// What the log says about the mechanism.
    pub(crate) fn describe(&self) -> String {
        match self {
            Owner::Cgroup { base } => format!("cgroup {}", base.display()),
            Owner::Lineage { .. } => "ancestry".to_string(),
        }
    }

    /// Prepares the spawn of a command of `sandbox`: in cgroup mode, the
    /// `cgroup.procs` file the child writes itself into before exec.
    pub(crate) fn join_file(&self, sandbox: &str) -> std::io::Result<Option<File>> {
        let Owner::Cgroup { base } = self else {
            return Ok(None);
        };
        let dir = base.join(sandbox);
        // `forget` of another sandbox may remove `base` in between: try again.
        let mut made = std::fs::create_dir_all(&dir);
        for _ in 0..3 {
            match &made {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    made = std::fs::create_dir_all(&dir);
                }
                _ => break,
            }
        }
        made?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map(Some)
    }

    /// Records a command just spawned for `sandbox`.
    pub(crate) fn adopt(&self, sandbox: &str, p: Proc) {
        if let Owner::Lineage { known } = self {
            known.lock().unwrap().insert(p, sandbox.to_string());
        }
    }

    /// Lineage: attributes every new process to its parent's sandbox, and
    /// forgets processes that are gone.
    pub(crate) fn scan(&self) {
        let Owner::Lineage { known } = self else {
            return;
        };
        if known.lock().unwrap().is_empty() {
            // Nothing to descend from, so nothing new can be attributed.
            return;
        }
        let stats: HashMap<i32, Stat> = all_pids()
            .into_iter()
            .filter_map(|p| Some((p, read_stat(p)?)))
            .collect();
        let mut known = known.lock().unwrap();
        known.retain(|(pid, start), _| {
            stats
                .get(pid)
                .is_some_and(|st| st.start == *start && st.state != 'Z' && st.state != 'X')
        });
        let mut by_pid: HashMap<i32, String> =
            known.iter().map(|((p, _), s)| (*p, s.clone())).collect();
        // Parents start before their children: in start order one pass sees
        // every chain of new processes, however long.
        let mut order: Vec<(&i32, &Stat)> = stats.iter().collect();
        order.sort_by_key(|(_, st)| st.start);
        for (pid, st) in order {
            if by_pid.contains_key(pid) || st.state == 'Z' {
                continue;
            }
            if let Some(sb) = by_pid.get(&st.ppid).cloned() {
                known.insert((*pid, st.start), sb.clone());
                by_pid.insert(*pid, sb);
            }
        }
    }

    /// Live processes of `sandbox` (all sandboxes if `None`).
    pub(crate) fn members(&self, sandbox: Option<&str>) -> Vec<Proc> {
        match self {
            Owner::Cgroup { base } => match sandbox {
                Some(sb) => cgroup_members(&base.join(sb)),
                None => cgroup_members(base),
            },
            Owner::Lineage { known } => {
                self.scan();
                let mut out: Vec<Proc> = known
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, s)| sandbox.is_none_or(|sb| sb == s.as_str()))
                    .map(|(p, _)| *p)
                    .collect();
                if sandbox.is_none() {
                    out.extend(descendants_of_me());
                    out.sort_unstable();
                    out.dedup();
                }
                out.retain(|p| alive(*p));
                out
            }
        }
    }

    /// Ends every process of `sandbox` (all if `None`): `first` to each, up
    /// to `grace` for them to go, then SIGKILL. Answers what is still alive
    /// after waiting (empty when all are gone).
    pub(crate) async fn end(
        &self,
        sandbox: Option<&str>,
        first: Signal,
        grace: Duration,
        reap: &(dyn Fn() + Sync),
    ) -> Vec<Proc> {
        if first != Signal::SIGKILL {
            for p in self.members(sandbox) {
                signal(p, first);
            }
            if self.wait_empty(sandbox, grace, reap).await.is_empty() {
                return Vec::new();
            }
        }
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            match self {
                Owner::Cgroup { base } => {
                    let dir = sandbox.map_or_else(|| base.clone(), |sb| base.join(sb));
                    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
                        // No cgroup.kill (Linux < 5.14): freeze, kill each, thaw.
                        let _ = std::fs::write(dir.join("cgroup.freeze"), "1");
                        for p in cgroup_members(&dir) {
                            signal(p, Signal::SIGKILL);
                        }
                        let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
                    }
                }
                Owner::Lineage { .. } => {
                    // Stopped processes cannot fork: stop them all, look again
                    // for children forked meanwhile, then kill what was found.
                    let mut seen = self.members(sandbox);
                    for p in &seen {
                        signal(*p, Signal::SIGSTOP);
                    }
                    seen.extend(self.members(sandbox));
                    for p in seen {
                        signal(p, Signal::SIGKILL);
                    }
                }
            }
            let left = self
                .wait_empty(sandbox, Duration::from_millis(500), reap)
                .await;
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
        }
    }

    async fn wait_empty(
        &self,
        sandbox: Option<&str>,
        limit: Duration,
        reap: &(dyn Fn() + Sync),
    ) -> Vec<Proc> {
        let deadline = Instant::now() + limit;
        loop {
            reap();
            let left = self.members(sandbox);
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Drops what is kept for `sandbox` once its processes are gone.
    pub(crate) fn forget(&self, sandbox: &str) {
        match self {
            Owner::Cgroup { base } => {
                remove_cgroup(&base.join(sandbox));
                // The instance's directory exists only while a sandbox has a
                // cgroup, so a pod killed while idle leaves nothing behind;
                // this fails, as it should, while another sandbox has one.
                let _ = std::fs::remove_dir(base);
            }
            Owner::Lineage { known } => known.lock().unwrap().retain(|_, s| s != sandbox),
        }
    }

    /// Drops everything at shutdown (the instance's cgroup too).
    pub(crate) fn forget_all(&self) {
        match self {
            Owner::Cgroup { base } => remove_cgroup(base),
            Owner::Lineage { known } => known.lock().unwrap().clear(),
        }
    }
}

/// Every live descendant of this process.
fn descendants_of_me() -> Vec<Proc> {
    let me = std::process::id() as i32;
    let stats: HashMap<i32, Stat> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, read_stat(p)?)))
        .collect();
    let mut out = Vec::new();
    for (pid, st) in &stats {
        let mut cur = st.ppid;
        // Bounded walk: a chain can be no longer than the process table.
        for _ in 0..stats.len() {
            if cur == me {
                out.push((*pid, st.start));
                break;
            }
            match stats.get(&cur) {
                Some(s) if cur > 1 => cur = s.ppid,
                _ => break,
            }
        }
    }
    out.retain(|p| p.0 != me && alive(*p));
    out
}

/// Proves that a command can join a cgroup under `base` (a directory one may
/// make is not always one a process may enter): runs `true` in
/// `base/probe.join` (no sandbox name has a dot).
fn probe_join(base: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = base.join("probe.join");
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&procs);
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure only calls write(2) on `fd`, open until spawn returns.
    unsafe {
        cmd.pre_exec(move || join_in_child(fd));
    }
    let status = cmd.spawn().and_then(|mut c| c.wait());
    drop(procs);
    let _ = std::fs::remove_dir(&dir);
    status.map(|_| ())
}

/// The `pre_exec` step of a command: write "0" (this process) into the
/// sandbox's `cgroup.procs`. Only async-signal-safe calls after fork.
pub(crate) fn join_in_child(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: write(2) on an fd this process holds open; no allocation.
    let n = unsafe { nix::libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
