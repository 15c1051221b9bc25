//! Process groups: the one place testkit starts, signals, ends and verifies
//! the processes it owns (pods, CLI runs, test commands of the runner).
//!
//! A process testkit starts goes into a group of its own
//! ([`spawn_in_group`]), so that one signal reaches everything it forked.
//! Ending it ([`terminate_group`]) sends SIGTERM to the group and to every
//! descendant (descendants that moved to groups of their own included),
//! waits for the tree to drain under a grace period, SIGKILLs what remains,
//! and verifies from `/proc` that nothing is left. Start times guard every
//! signal against a reused pid.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::time::Instant;

/// How long SIGKILLed processes get to disappear before they count as
/// survivors.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Puts the command's process in a new group whose id is its pid, with
/// every signal at its default action and none blocked (see
/// [`default_signals`]).
pub fn spawn_in_group(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, i32)> {
    default_signals(command);
    let child = command.process_group(0).spawn()?;
    let pgid = child.id().map(|p| p as i32).unwrap_or_default();
    Ok((child, pgid))
}

/// Has the command's process start with every signal at its default
/// action, real-time signals included, and none blocked.
///
/// A process inherits ignored signals and the signal mask across `exec`:
/// started from a runner under `nohup`, a pod or a machine's QEMU would
/// ignore SIGHUP, and a test that sends it one would see nothing happen.
/// What testkit starts behaves the same whatever started testkit.
pub fn default_signals(command: &mut tokio::process::Command) {
    // SAFETY: between fork and exec the closure calls only `sigaction`,
    // `sigprocmask` and libc's real-time signal bounds, which are
    // async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            use nix::libc;
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for signal in (1..32).chain(libc::SIGRTMIN()..=libc::SIGRTMAX()) {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    // Numbers the kernel does not know just fail.
                    libc::sigaction(signal, &default, std::ptr::null_mut());
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// What [`terminate_group`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Terminated {
    /// Processes of the tree when it began.
    pub processes: usize,
    /// Pids that ignored SIGTERM for the grace period and were SIGKILLed.
    pub killed: Vec<i32>,
}

/// Ends the group `pgid` and every descendant of it: SIGTERM, up to `grace`
/// to drain, SIGKILL for the rest, then verified. `start_ticks` (of the
/// group leader) guards against a reused pid: a live leader that started at
/// another time is not ours, and nothing is signalled. Returns the
/// survivors, with their command lines (redacted), when something outlived
/// SIGKILL.
pub async fn terminate_group(
    pgid: i32,
    start_ticks: Option<u64>,
    grace: Duration,
) -> Result<Terminated, Vec<(i32, String)>> {
    let reused = matches!((start_ticks, self::start_ticks(pgid)), (Some(a), Some(b)) if a != b);
    let tree = if reused { Vec::new() } else { tree_of(pgid) };
    let processes = tree.len();
    let mut killed = Vec::new();
    if !tree.is_empty() {
        signal_tree(pgid, &tree, Signal::SIGTERM);
        if let Err(rest) = wait_drained(pgid, &tree, grace).await {
            signal_tree(pgid, &rest, Signal::SIGKILL);
            killed = rest.iter().map(|(p, _)| *p).collect();
            if let Err(survivors) = wait_drained(pgid, &rest, KILL_WAIT).await {
                return Err(survivors
                    .into_iter()
                    .map(|(p, _)| (p, command_of(p)))
                    .collect());
            }
        }
    }
    Ok(Terminated { processes, killed })
}

/// SIGKILLs the group `pgid` and every descendant at once, and waits up to
/// `limit` for them to be gone. Returns the pids still alive then.
pub async fn kill_group(pgid: i32, limit: Duration) -> Result<(), Vec<i32>> {
    let tree = tree_of(pgid);
    signal_tree(pgid, &tree, Signal::SIGKILL);
    wait_drained(pgid, &tree, limit)
        .await
        .map_err(|rest| rest.into_iter().map(|(p, _)| p).collect())
}

/// SIGKILLs the group `pgid`, every descendant of it, and every live process
/// of `known` (a tree taken earlier, whose members the leader's exit may have
/// orphaned since), and waits up to `limit` for all of them to be gone.
/// A `pgid` of 0 kills `known` only. Returns the pids still alive then.
pub async fn kill_tree(pgid: i32, known: &[(i32, u64)], limit: Duration) -> Result<(), Vec<i32>> {
    let mut tree = if pgid > 0 { tree_of(pgid) } else { Vec::new() };
    for p in known {
        if !tree.iter().any(|t| t.0 == p.0) {
            tree.push(*p);
        }
    }
    signal_tree(pgid, &tree, Signal::SIGKILL);
    wait_drained(pgid, &tree, limit)
        .await
        .map_err(|rest| rest.into_iter().map(|(p, _)| p).collect())
}

/// Sends `signal` to the group `pgid` only (not to descendants in groups of
/// their own): how a process is asked to shut down in order, as a terminal's
/// Ctrl-C does.
pub fn signal_group(pgid: i32, signal: Signal) {
    if pgid > 0 {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

fn signal_tree(pgid: i32, tree: &[(i32, u64)], signal: Signal) {
    signal_group(pgid, signal);
    for &(pid, ticks) in tree {
        if alive_with(pid, ticks) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }
}

/// Waits until no process of the group and none of `tree` is alive.
/// Returns the ones still alive at the deadline.
pub async fn wait_drained(
    pgid: i32,
    tree: &[(i32, u64)],
    limit: Duration,
) -> Result<(), Vec<(i32, u64)>> {
    let deadline = crate::duration::tokio_deadline_after(Instant::now(), limit);
    loop {
        let mut alive: Vec<(i32, u64)> = tree
            .iter()
            .copied()
            .filter(|&(pid, t)| alive_with(pid, t))
            .collect();
        let members = if pgid > 0 {
            group_members(pgid)
        } else {
            Vec::new()
        };
        for p in members {
            if !alive.iter().any(|a| a.0 == p.0) {
                alive.push(p);
            }
        }
        if alive.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(alive);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A live process's state letter (`R`, `S`, `T`, `Z`...) and start time.
pub fn state_of(pid: i32) -> Option<(char, u64)> {
    stat(pid).map(|(state, _, _, ticks)| (state, ticks))
}

/// `/proc/<pid>/stat`: (state, ppid, pgrp, start ticks), for live processes.
fn stat(pid: i32) -> Option<(char, i32, i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields start after the last `)`.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        f.first()?.chars().next()?,
        f.get(1)?.parse().ok()?,
        f.get(2)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
    ))
}

/// Whether `pid` catches `signal`: it has a handler for it (`SigCgt` in
/// `/proc/<pid>/status`). Most signals end a process that does not, so a
/// signal meant as a question goes only to those that catch it.
pub fn catches(pid: i32, signal: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal as i32 - 1)) != 0)
}

/// The program `pid` runs (`/proc/<pid>/exe`); `None` for a process gone
/// or not ours to read.
pub fn exe_of(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// When `pid` started, in clock ticks since boot: with the pid, what
/// identifies a process across pid reuse.
pub fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.3)
}

/// Whether `pid` runs (not a zombie) and is the process that started at
/// `ticks`: a later process given the same pid is not it.
pub fn is_running(pid: i32, ticks: u64) -> bool {
    alive_with(pid, ticks)
}

fn alive_with(pid: i32, ticks: u64) -> bool {
    stat(pid).is_some_and(|(state, _, _, t)| state != 'Z' && state != 'X' && t == ticks)
}

fn all_procs() -> Vec<(i32, char, i32, i32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| stat(pid).map(|(s, pp, pg, t)| (pid, s, pp, pg, t)))
        .filter(|p| p.1 != 'Z' && p.1 != 'X')
        .collect()
}

/// The live members of group `pgid`, as `(pid, start ticks)`.
pub fn group_members(pgid: i32) -> Vec<(i32, u64)> {
    all_procs()
        .into_iter()
        .filter(|p| p.3 == pgid)
        .map(|p| (p.0, p.4))
        .collect()
}

/// The group's processes and every descendant of them, even those that moved
/// to their own groups (a pod's workloads often do).
pub fn tree_of(pgid: i32) -> Vec<(i32, u64)> {
    let procs = all_procs();
    let mut tree: Vec<(i32, u64)> = procs
        .iter()
        .filter(|p| p.3 == pgid)
        .map(|p| (p.0, p.4))
        .collect();
    loop {
        let before = tree.len();
        for p in &procs {
            if tree.iter().any(|t| t.0 == p.2) && !tree.iter().any(|t| t.0 == p.0) {
                tree.push((p.0, p.4));
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// The live processes whose environment holds `var=value`: how the
/// descendants that left a group and were orphaned (a browser's crash
/// handler double-forks into a session of its own) are still found, by a
/// value unique to their owner, never by a program name.
pub fn with_env(var: &str, value: &str) -> Vec<(i32, u64)> {
    let needle = format!("{var}={value}");
    with_env_entry(0, |entry| entry == needle.as_bytes())
}

/// The live processes but this one whose environment holds `var=value`
/// and sets no `without`: a run's processes but those in a role that
/// must outlive them (`TESTKIT_RUN_AS`, a reaper).
pub fn with_env_without(var: &str, value: &str, without: &str) -> Vec<(i32, u64)> {
    let needle = format!("{var}={value}");
    let unwanted = format!("{without}=");
    let me = std::process::id() as i32;
    all_procs()
        .into_iter()
        .filter(|p| p.0 != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.0)).is_ok_and(|env| {
                let mut entries = env.split(|&b| b == 0);
                entries.clone().any(|e| e == needle.as_bytes())
                    && !entries.any(|e| e.starts_with(unwanted.as_bytes()))
            })
        })
        .map(|p| (p.0, p.4))
        .collect()
}

/// Sends `signal` to each of `procs` (`(pid, start ticks)`) still running
/// as the process that started then (a reused pid is left alone).
pub fn signal_each(procs: &[(i32, u64)], signal: Signal) {
    signal_tree(0, procs, signal);
}

/// The live processes whose environment holds `var` with a value that
/// starts with `prefix`: every process a run's test processes tagged (see
/// [`crate::settings::var::PROCESS_TAG`]), with the run id as `prefix`.
pub fn with_env_prefix(var: &str, prefix: &str) -> Vec<(i32, u64)> {
    let needle = format!("{var}={prefix}");
    with_env_entry(0, |entry| entry.starts_with(needle.as_bytes()))
}

/// The live processes but this one, started at or after `since` (clock
/// ticks since boot), with an environment entry (`VAR=value`) that
/// `matches`.
fn with_env_entry(since: u64, matches: impl Fn(&[u8]) -> bool) -> Vec<(i32, u64)> {
    let me = std::process::id() as i32;
    all_procs()
        .into_iter()
        .filter(|p| p.0 != me && p.4 >= since)
        .filter(|p| environ_of(p.0).is_some_and(|env| env.split(|&b| b == 0).any(&matches)))
        .map(|p| (p.0, p.4))
        .collect()
}

/// Now, in the clock ticks since boot that process start times are given
/// in (`/proc/<pid>/stat`): the start time of a process started now.
/// Rounded down, as the kernel rounds a start time; `None` where the clock
/// cannot be read.
pub fn now_ticks() -> Option<u64> {
    use nix::time::{clock_gettime, ClockId};
    use nix::unistd::{sysconf, SysconfVar};
    // The kernel keeps a start time on this clock, in nanoseconds, and
    // shows it divided down to ticks: the same division of the same clock
    // here gives the same tick. (A thread's own start time, read back from
    // `/proc`, gives it too, but creating the thread costs 25 times more.)
    let now = clock_gettime(ClockId::CLOCK_BOOTTIME).ok()?;
    let per_second = u64::try_from(sysconf(SysconfVar::CLK_TCK).ok()??).ok()?;
    let nanos =
        u64::try_from(now.tv_sec()).ok()? * 1_000_000_000 + u64::try_from(now.tv_nsec()).ok()?;
    Some(nanos / (1_000_000_000 / per_second.max(1)))
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): an
/// orphan among its descendants (a `setsid cmd &` or `nohup cmd &` whose
/// shell exited, a daemon's double fork) is reparented to it rather than to
/// init, so that everything it started and that still runs is one of its
/// [`descendants`]. It must then wait for the orphans that exit
/// ([`reap`]), or they stay zombies until it exits.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Whether this process has a child, running or exited and not waited
/// for: one `waitid` that takes nothing (`WNOWAIT`), whatever the rest of
/// the machine does.
pub fn has_children() -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(waitid(Id::All, flags), Err(nix::errno::Errno::ECHILD))
}

/// A process below this one, as [`descendants`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descendant {
    /// Its pid.
    pub pid: i32,
    /// When it started, in clock ticks since boot: with the pid, what
    /// identifies it across pid reuse.
    pub ticks: u64,
    /// Its parent's pid.
    pub ppid: i32,
    /// Exited and not waited for yet.
    pub zombie: bool,
    /// The thread of this process whose children list its line of descent
    /// starts from: the thread that started its oldest ancestor below this
    /// process, or, for an orphan the subreaper adopted, a thread the
    /// kernel chose (the main thread while it runs). `None` when the
    /// kernel keeps no children lists (`CONFIG_PROC_CHILDREN`).
    pub thread: Option<i32>,
}

/// The descendants of this process: its children, theirs, and so on, but
/// the children listed under the threads `skip` and their descendants.
/// Read from the children list of each thread (`/proc/PID/task/TID/children`):
/// what it costs grows with this process's threads and descendants, not
/// with the rest of the machine. Without those lists, one scan of `/proc`.
pub fn descendants(skip: &[i32]) -> Vec<Descendant> {
    let me = std::process::id() as i32;
    let Some(roots) = children_by_thread(me) else {
        return descendants_by_scan(me);
    };
    let mut out: Vec<Descendant> = Vec::new();
    let mut queue: Vec<(i32, Option<i32>)> = roots
        .into_iter()
        .filter(|(tid, _)| !skip.contains(tid))
        .flat_map(|(tid, pids)| pids.into_iter().map(move |pid| (pid, Some(tid))))
        .collect();
    while let Some((pid, thread)) = queue.pop() {
        if out.iter().any(|d| d.pid == pid) {
            continue;
        }
        let Some((state, ppid, _, ticks)) = stat(pid) else {
            continue;
        };
        let zombie = state == 'Z' || state == 'X';
        out.push(Descendant {
            pid,
            ticks,
            ppid,
            zombie,
            thread,
        });
        if !zombie {
            let below = children_by_thread(pid).unwrap_or_default();
            queue.extend(below.into_iter().flat_map(|(_, p)| p).map(|p| (p, thread)));
        }
    }
    out
}

/// The children of `pid`, by the thread of it they are listed under;
/// `None` when the kernel keeps no such lists.
fn children_by_thread(pid: i32) -> Option<Vec<(i32, Vec<i32>)>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for tid in tasks.filter_map(|t| t.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")) {
            Ok(text) => out.push((
                tid,
                text.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect(),
            )),
            // No lists at all: the kernel was built without them. (A
            // thread that just exited is also not found: only the first
            // one decides.)
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && out.is_empty() && tid == pid => {
                return None
            }
            Err(_) => {}
        }
    }
    Some(out)
}

/// [`descendants`] where the kernel keeps no children lists: the tree
/// below `me` built from every process's parent.
fn descendants_by_scan(me: i32) -> Vec<Descendant> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<Descendant> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            stat(pid).map(|(state, ppid, _, ticks)| Descendant {
                pid,
                ticks,
                ppid,
                zombie: state == 'Z' || state == 'X',
                thread: None,
            })
        })
        .collect();
    let mut tree: Vec<Descendant> = Vec::new();
    let mut parents = vec![me];
    while let Some(parent) = parents.pop() {
        for d in procs.iter().filter(|d| d.ppid == parent) {
            if !tree.iter().any(|t| t.pid == d.pid) {
                tree.push(*d);
                parents.push(d.pid);
            }
        }
    }
    tree
}

/// Whether the environment of `pid` holds `var=value`.
pub fn has_env(pid: i32, var: &str, value: &str) -> bool {
    let needle = format!("{var}={value}");
    environ_of(pid).is_some_and(|env| env.split(|&b| b == 0).any(|e| e == needle.as_bytes()))
}

/// Waits for the exited child `pid` of this process that started at
/// `ticks`, so that it does not stay a zombie. Only a zombie child with
/// that start time is waited for: a running child, a pid reused since, or
/// another process's child is left alone. Returns whether it was.
pub fn reap(pid: i32, ticks: u64) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    let me = std::process::id() as i32;
    // A zombie keeps its pid until it is waited for: checked here, it is
    // still the one waited for below.
    let ours =
        stat(pid).is_some_and(|(state, ppid, _, t)| state == 'Z' && ppid == me && t == ticks);
    ours && waitid(
        Id::Pid(Pid::from_raw(pid)),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
    )
    .is_ok()
}

/// The environment of `pid` (`VAR=value` entries, NUL-separated). A
/// process in the middle of an `execve` shows none for a moment (its
/// memory is being replaced): one that is alive, no kernel thread, and
/// shows an empty environment is read again, for up to 20 ms, so that a
/// `setsid cmd &` caught while it becomes `cmd` is not taken for a process
/// without the tag.
fn environ_of(pid: i32) -> Option<Vec<u8>> {
    /// A kernel thread's flag in `/proc/<pid>/stat` (field 9): its
    /// environment is empty for good.
    const PF_KTHREAD: u64 = 0x0020_0000;
    let path = format!("/proc/{pid}/environ");
    for _ in 0..20 {
        match std::fs::read(&path) {
            Ok(env) if !env.is_empty() => return Some(env),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            _ => {}
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let state = fields.first()?;
        let flags: u64 = fields.get(6)?.parse().ok()?;
        if flags & PF_KTHREAD != 0 || *state == "Z" || *state == "X" {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // A process whose environment is really empty (started with
    // `env -i`): it carries no tag.
    None
}

/// Ends the processes `procs` (`(pid, start ticks)`, each checked against a
/// reused pid): SIGTERM, up to `grace` for them to exit, then SIGKILL, and
/// verified gone. Returns the pids that needed SIGKILL, or the survivors
/// with their command lines.
pub async fn end_processes(
    procs: &[(i32, u64)],
    grace: Duration,
) -> Result<Vec<i32>, Vec<(i32, String)>> {
    signal_tree(0, procs, Signal::SIGTERM);
    let Err(rest) = wait_drained(0, procs, grace).await else {
        return Ok(Vec::new());
    };
    signal_tree(0, &rest, Signal::SIGKILL);
    let killed = rest.iter().map(|p| p.0).collect();
    match wait_drained(0, &rest, KILL_WAIT).await {
        Ok(()) => Ok(killed),
        Err(survivors) => Err(survivors
            .into_iter()
            .map(|(p, _)| (p, command_of(p)))
            .collect()),
    }
}

/// The command line of `pid`, redacted; `?` when it is gone.
pub fn command_of(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let s: Vec<String> = b
                .split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            crate::redact(&s.join(" ")).into_owned()
        })
        .unwrap_or_else(|_| "?".to_owned())
}

/// Whether the group `pgid` (whose leader started at `start_ticks`) still
/// has a live process.
pub fn is_alive(pgid: i32, start_ticks: Option<u64>) -> bool {
    match start_ticks {
        Some(t) => {
            alive_with(pgid, t)
                || !group_members(pgid).is_empty() && self::start_ticks(pgid).is_none()
        }
        None => !group_members(pgid).is_empty(),
    }
}

/// Finds a program: a path as given (relative to `base_dir`), else next to
/// the current executable, in the target dir's `debug/` and `release/`
/// (`target_dir`, else the one this executable is in), then on PATH.
/// `None` when it is nowhere.
pub fn find_program(
    program: &str,
    base_dir: Option<&Path>,
    target_dir: Option<&Path>,
) -> Option<PathBuf> {
    if program.contains('/') {
        let path = match base_dir {
            Some(base) if !Path::new(program).is_absolute() => base.join(program),
            _ => PathBuf::from(program),
        };
        return path.is_file().then_some(path);
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join(program));
        }
        if let Some(target) = exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()) {
            candidates.push(target.join("debug").join(program));
            candidates.push(target.join("release").join(program));
        }
    }
    if let Some(dir) = target_dir {
        candidates.push(dir.join("debug").join(program));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(program)));
    }
    candidates.into_iter().find(|c| is_executable(c))
}

/// A file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether cargo or nextest sets `var` for a process it starts: the program
/// of `cargo run`, a test binary, a build script. Handed on to a nested
/// cargo, such a variable makes its build see another environment than a
/// build started from a shell: a build script that declared
/// `rerun-if-env-changed` on one (ring's names `CARGO_MANIFEST_DIR` and the
/// `CARGO_PKG_*` variables) reruns, everything above it rebuilds, and the
/// next build from a shell rebuilds it all back. A process that starts
/// cargo removes these from the command's environment; the nested cargo
/// sets its own for what it runs. `CARGO`, the cargo to start, is not one.
pub(crate) fn set_by_cargo(var: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "CARGO_PKG_",
        "CARGO_BIN_",
        "CARGO_MANIFEST_",
        "NEXTEST",
        "__NEXTEST",
        "__CARGO",
    ];
    const NAMES: &[&str] = &[
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|p| var.starts_with(p)) || NAMES.contains(&var)
}

/// The variables of this process's environment that `set_by_cargo` names:
/// what to remove from a nested cargo command.
pub fn vars_set_by_cargo() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(var, _)| var)
        .filter(|var| set_by_cargo(&var.to_string_lossy()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signals a process ignores, from its `/proc/<pid>/status`.
    fn ignored_by(status: &str) -> u64 {
        let line = status.lines().find(|l| l.starts_with("SigIgn:")).unwrap();
        u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
    }

    /// Started by a process that ignores SIGHUP (a runner under `nohup`),
    /// a group still dies of it.
    #[tokio::test]
    async fn a_started_group_ignores_no_signal_its_starter_ignored() {
        use nix::sys::signal::{signal, SigHandler};
        // SAFETY: SIG_IGN installs no handler; the previous action is put back.
        let before = unsafe { signal(Signal::SIGHUP, SigHandler::SigIgn) }.unwrap();
        let mut command = tokio::process::Command::new("cat");
        command
            .arg("/proc/self/status")
            .stdout(std::process::Stdio::piped());
        let spawned = spawn_in_group(&mut command);
        // SAFETY: as above.
        unsafe { signal(Signal::SIGHUP, before) }.unwrap();
        let (child, _) = spawned.unwrap();
        let out = child.wait_with_output().await.unwrap();
        let status = String::from_utf8(out.stdout).unwrap();
        let sighup = 1u64 << (Signal::SIGHUP as i32 - 1);
        assert_eq!(ignored_by(&status) & sighup, 0, "{status}");
    }

    /// The same for a real-time signal, which nix's list of signals
    /// leaves out.
    #[tokio::test]
    async fn a_started_group_ignores_no_real_time_signal_either() {
        use nix::libc;
        let rt = libc::SIGRTMIN() + 2;
        // SAFETY: SIG_IGN installs no handler; the previous action is put back.
        let before = unsafe { libc::signal(rt, libc::SIG_IGN) };
        let mut command = tokio::process::Command::new("cat");
        command
            .arg("/proc/self/status")
            .stdout(std::process::Stdio::piped());
        let spawned = spawn_in_group(&mut command);
        // SAFETY: as above.
        unsafe { libc::signal(rt, before) };
        let (child, _) = spawned.unwrap();
        let out = child.wait_with_output().await.unwrap();
        let status = String::from_utf8(out.stdout).unwrap();
        assert_eq!(ignored_by(&status) & (1u64 << (rt - 1)), 0, "{status}");
    }

    #[test]
    fn the_variables_cargo_sets_for_what_it_runs_are_named() {
        // `cargo run` and `cargo test` set these (cargo 1.95); nextest adds
        // its own.
        for var in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_PKG_VERSION_PRE",
            "CARGO_PKG_AUTHORS",
            "CARGO_PKG_DESCRIPTION",
            "CARGO_PKG_README",
            "CARGO_PKG_RUST_VERSION",
            "CARGO_BIN_NAME",
            "CARGO_BIN_EXE_sandboxd",
            "CARGO_CRATE_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "OUT_DIR",
            "NEXTEST_RUN_ID",
            "NEXTEST_EXECUTION_MODE",
            "__NEXTEST_TEST_GROUP",
        ] {
            assert!(set_by_cargo(var), "{var}");
        }
        // What the caller chose, and the cargo to start, are handed on.
        for var in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_TERM_COLOR",
            "CARGO_BUILD_JOBS",
            "RUSTFLAGS",
            "PATH",
            "TESTKIT_RUN_ID",
        ] {
            assert!(!set_by_cargo(var), "{var}");
        }
    }

    #[test]
    fn this_test_process_has_variables_cargo_set() {
        // Under `cargo test` and nextest alike.
        let vars = vars_set_by_cargo();
        assert!(vars.iter().any(|v| v == "CARGO_MANIFEST_DIR"), "{vars:?}");
        assert!(vars.iter().any(|v| v == "CARGO_PKG_NAME"), "{vars:?}");
    }

    /// A run's processes are found by the value they were started with,
    /// and those in a role are left out.
    #[test]
    fn with_env_without_finds_the_runs_processes_but_its_roles() {
        let value = format!("with-env-without-{}", std::process::id());
        let start = |role: bool| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("30").env("PROBE_RUN", &value);
            if role {
                cmd.env("PROBE_ROLE", "reaper");
            }
            cmd.spawn().unwrap()
        };
        let (mut plain, mut in_role) = (start(false), start(true));
        let found: Vec<i32> = with_env_without("PROBE_RUN", &value, "PROBE_ROLE")
            .into_iter()
            .map(|p| p.0)
            .collect();
        for child in [&mut plain, &mut in_role] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(found, [plain.id() as i32]);
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed_with_its_escaped_descendant() {
        runtime().block_on(async {
            // The shell ignores SIGTERM; its child moves to a session of its own.
            let mut cmd = tokio::process::Command::new("sh");
            cmd.args(["-c", "trap '' TERM; setsid sleep 300 & echo $!; sleep 300"])
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true);
            let (mut child, pgid) = spawn_in_group(&mut cmd).unwrap();
            let ticks = start_ticks(pgid);
            let mut out = child.stdout.take().unwrap();
            let mut line = String::new();
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 32];
            while !line.contains('\n') {
                let n = out.read(&mut buf).await.unwrap();
                assert!(n > 0, "the shell said nothing");
                line.push_str(std::str::from_utf8(&buf[..n]).unwrap());
            }
            let escaped: i32 = line.trim().parse().unwrap();
            // Wait until the escaped child is in the tree (setsid done).
            let deadline = Instant::now() + Duration::from_secs(10);
            while !tree_of(pgid).iter().any(|(p, _)| *p == escaped) {
                assert!(Instant::now() < deadline, "the escaped child never showed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let escaped_ticks = start_ticks(escaped).unwrap();
            let reaper = tokio::spawn(async move { child.wait().await });
            let ended = terminate_group(pgid, ticks, Duration::from_millis(300))
                .await
                .unwrap();
            assert!(ended.processes >= 2, "{ended:?}");
            assert!(ended.killed.contains(&pgid), "{ended:?}");
            assert!(!is_alive(pgid, ticks));
            assert!(
                !alive_with(escaped, escaped_ticks),
                "the child that moved to its own session survived"
            );
            let _ = reaper.await;
        });
    }

    #[test]
    fn the_clock_reads_in_the_ticks_a_process_start_time_is_given_in() {
        for _ in 0..20 {
            let before = now_ticks().unwrap();
            let mut child = std::process::Command::new("sleep")
                .arg("5")
                .spawn()
                .unwrap();
            let started = start_ticks(child.id() as i32).unwrap();
            let after = now_ticks().unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
            assert!(
                before <= started && started <= after,
                "started at tick {started}, outside {before}..={after}"
            );
        }
    }

    #[test]
    fn a_child_is_a_descendant_under_its_thread_and_once_killed_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let ticks = start_ticks(pid).unwrap();
        let me = nix::unistd::gettid().as_raw();
        let found = descendants(&[]);
        let skipped = descendants(&[me]);
        assert!(has_children());
        assert!(!reap(pid, ticks), "a running child was waited for");
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        while stat(pid).is_some_and(|s| s.0 != 'Z') {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!reap(pid, ticks + 1), "another start time was waited for");
        let reaped = reap(pid, ticks);
        // std's own wait finds it already waited for.
        let waited = child.wait();
        assert!(
            found
                .iter()
                .any(|d| d.pid == pid && d.ticks == ticks && d.thread == Some(me) && !d.zombie),
            "{found:?}"
        );
        assert!(!skipped.iter().any(|d| d.pid == pid), "{skipped:?}");
        assert!(reaped, "the zombie was not waited for");
        assert!(waited.is_err(), "{waited:?}");
    }

    #[test]
    fn a_reused_pid_is_not_signalled() {
        runtime().block_on(async {
            let mut cmd = tokio::process::Command::new("sleep");
            cmd.arg("300").kill_on_drop(true);
            let (mut child, pgid) = spawn_in_group(&mut cmd).unwrap();
            let real = start_ticks(pgid).unwrap();
            let ended = terminate_group(pgid, Some(real + 1), Duration::from_millis(100))
                .await
                .unwrap();
            assert_eq!(ended.processes, 0);
            assert!(is_alive(pgid, Some(real)), "the group was signalled");
            kill_group(pgid, Duration::from_secs(5)).await.unwrap();
            let _ = child.wait().await;
            assert!(!is_alive(pgid, Some(real)));
        });
    }

    #[test]
    fn programs_are_found_by_path_and_on_path() {
        assert_eq!(
            find_program("sh", None, None).map(|p| p.is_file()),
            Some(true)
        );
        assert!(find_program("no-such-program-here", None, None).is_none());
        assert_eq!(
            find_program("./bin/sh", Some(Path::new("/")), None),
            Some(PathBuf::from("/./bin/sh"))
        );
    }
}
