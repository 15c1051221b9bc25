//! The reaper: a copy of the test binary, started on a test process's first
//! `create` or fault, in its own session (so that a process-group kill of
//! the test, such as nextest's timeout or Ctrl-C, does not reach it),
//! reading a Unix socket whose only other end is the test process's. `done`
//! means the test process cleaned up after itself: the reaper exits. End of
//! file without `done` means the test process died: the reaper undoes and
//! proves what the journal says is still there, records the outcome, and
//! exits. Either way it first ends the process groups (browsers) the test
//! process left on record (the engine's `resource::groups`).
//!
//! Two `flock`s make the reaper's work visible to the rest of the run:
//!
//! - **The pod lock, handed over.** A test that injects a fault sends the
//!   reaper a duplicate of its pod-lock descriptor (`hold`, the descriptor
//!   in `SCM_RIGHTS`). A `flock` belongs to the open file, so while the
//!   reaper holds the duplicate the lock stays taken even after the test
//!   process is SIGKILLed, and the next test waits until the reaper has
//!   undone and proven every fault, then lets go of it. A test that ends
//!   normally takes it back (`release`, answered `released`) before it lets
//!   go of the lock itself.
//! - **The reaper's own lock**, `<journal>.reaper.lock`, taken by the test
//!   process before it starts the reaper and inherited by it, so it is held
//!   from the reaper's first instant to its exit: the runner waits until it
//!   can take every such lock of the run before it builds the records of
//!   killed tests and sweeps for residue (the engine's `resource::reapers`).

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag, FlockArg};
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

use crate::engine::pod::fault::{self, Fault, Reverted};
use crate::engine::pod::Pod;
use crate::engine::resource::delete::{delete_and_verify, Leak};
use crate::engine::resource::reapers;
use crate::engine::resource::{journal, Event, Gone, Journal, JournalEntry, Kinds, ResourceRef};
use crate::engine::settings::var;

/// How long a test process waits for its reaper to exit after `done`, or
/// to answer `release`.
const EXIT_WAIT: Duration = Duration::from_secs(5);

struct Reaper {
    child: Child,
    /// The test process's end of the socket.
    channel: Option<UnixStream>,
    /// Whether the reaper holds a duplicate of the pod lock.
    holds_pod_lock: bool,
}

/// `None` before the first create; `Some(None)` when starting it failed.
static REAPER: Mutex<Option<Option<Reaper>>> = Mutex::new(None);

fn lock_reaper() -> std::sync::MutexGuard<'static, Option<Option<Reaper>>> {
    REAPER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts this process's reaper, once.
pub(crate) fn ensure_spawned(run: &crate::engine::run::Run) {
    let mut reaper = lock_reaper();
    if reaper.is_some() {
        return;
    }
    let journal = crate::globals::journal(run).path().to_owned();
    *reaper = match spawn(run, &journal) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("testkit: could not start the reaper ({e}); if this process is killed, run `testkit-runner janitor --run {}`", run.id);
            None
        }
    }
    .into();
}

fn spawn(run: &crate::engine::run::Run, journal: &Path) -> std::io::Result<Reaper> {
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(journal.parent().unwrap_or(Path::new(".")))?;
    // Its output goes to a file: a reaper holding the test's stdout open
    // would make cargo or nextest wait for it.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal.with_extension("reaper.log"))?;
    // Taken here and inherited, so that it is held before the reaper runs
    // a single instruction: a runner that finds it free knows the reaper is
    // gone, not that it has yet to start.
    let alive =
        crate::engine::files::open_lock_file(&journal.with_extension(reapers::LOCK_SUFFIX))?;
    // Not `Flock`: it unlocks when dropped, and an unlock lets go of the
    // lock for every holder of the open file, the reaper too.
    #[allow(deprecated)]
    nix::fcntl::flock(alive.as_raw_fd(), FlockArg::LockExclusiveNonblock)?;
    let alive_fd = alive.as_raw_fd();
    let (ours, theirs) = UnixStream::pair()?;
    let mut command = Command::new(exe);
    command
        .env(var::RUN_AS, "reaper")
        .env(var::REAPER_JOURNAL, journal)
        .env(var::REAPER_PARENT, std::process::id().to_string())
        .env(var::RUN_ID, &run.id)
        .env(var::RESULTS_DIR, &run.results_dir)
        // It outlives the test that started it, on purpose: not a process
        // that test left running.
        .env_remove(var::PROCESS_TAG)
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    if let Some(dir) = crate::globals::suite_dir() {
        command.env(var::SUITE_DIR, dir);
    }
    // SAFETY: setsid and fcntl are async-signal-safe and touch no memory of
    // the parent; `alive_fd` is open until `spawn` returns.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
            let fd = BorrowedFd::borrow_raw(alive_fd);
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty()))?;
            Ok(())
        });
    }
    // std creates the socket close-on-exec: no other child inherits the
    // reaper's end, so the reaper sees end of file exactly when this
    // process is gone.
    let child = command.spawn()?;
    drop(command);
    // The reaper holds the lock now; this process's descriptor may close
    // (a close, unlike an unlock, leaves the reaper's lock alone).
    drop(alive);
    Ok(Reaper {
        child,
        channel: Some(ours),
        holds_pod_lock: false,
    })
}

/// Why the pod lock could not be handed to the reaper or taken back. A
/// cause is part of the text: the test's log prints it by `Display`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PodLockHandOver {
    /// No reaper runs for this process.
    #[error("no reaper runs for this process")]
    NoReaper,
    /// The reaper was told this process is done.
    #[error("the reaper was told this process is done")]
    ReaperDone,
    /// Sending the descriptor failed.
    #[error("could not hand the pod lock to the reaper: {0}")]
    Send(nix::errno::Errno),
    /// The reaper did not say it let go: it was killed.
    #[error(
        "the reaper (pid {pid}) did not let go of the pod lock ({answered}): killed it, or \
         the next test would wait on it; this process has no reaper from here on"
    )]
    NotReleased {
        /// The reaper's pid.
        pid: u32,
        /// What it answered, or how reading its answer failed.
        answered: String,
    },
}

/// Hands the reaper a duplicate of the pod lock `lock` (held exclusive by
/// a test that injects a fault): from now on the lock outlives this
/// process until the reaper has undone its faults. Once per hold.
pub(crate) fn hand_over_pod_lock(lock: BorrowedFd<'_>) -> Result<(), PodLockHandOver> {
    let mut guard = lock_reaper();
    let Some(Some(reaper)) = guard.as_mut() else {
        return Err(PodLockHandOver::NoReaper);
    };
    if reaper.holds_pod_lock {
        return Ok(());
    }
    let Some(channel) = reaper.channel.as_ref() else {
        return Err(PodLockHandOver::ReaperDone);
    };
    let fds = [lock.as_raw_fd()];
    let iov = [IoSlice::new(b"hold\n")];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(channel.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(PodLockHandOver::Send)?;
    reaper.holds_pod_lock = true;
    Ok(())
}

/// Takes the pod lock back from the reaper: it lets go of its duplicate,
/// and says so, before this returns. Call before the test lets go of the
/// lock, or the reaper keeps it taken. A reaper that does not answer is
/// killed (its duplicate closes with it), and the error says so.
pub(crate) fn take_back_pod_lock() -> Result<(), PodLockHandOver> {
    let mut guard = lock_reaper();
    let Some(Some(reaper)) = guard.as_mut() else {
        return Ok(());
    };
    if !reaper.holds_pod_lock {
        return Ok(());
    }
    reaper.holds_pod_lock = false;
    let Some(channel) = reaper.channel.as_mut() else {
        return Ok(());
    };
    let answered = channel
        .write_all(b"release\n")
        .and_then(|()| channel.set_read_timeout(Some(EXIT_WAIT)))
        .and_then(|()| {
            let mut answer = [0u8; 9];
            channel.read_exact(&mut answer).map(|()| answer)
        });
    if matches!(answered, Ok(ref a) if a == b"released\n") {
        return Ok(());
    }
    let pid = reaper.child.id();
    let _ = reaper.child.kill();
    let _ = reaper.child.wait();
    *guard = Some(None);
    Err(PodLockHandOver::NotReleased {
        pid,
        answered: format!("{answered:?}"),
    })
}

/// Tells the reaper this process cleaned up after itself, and waits for it
/// to exit, so that no reaper outlives a normal run.
pub(crate) fn finish_process() {
    let Some(mut reaper) = lock_reaper().take().flatten() else {
        return;
    };
    if let Some(mut channel) = reaper.channel.take() {
        let _ = channel.write_all(b"done\n").and_then(|()| channel.flush());
    }
    let deadline = Instant::now() + EXIT_WAIT;
    loop {
        match reaper.child.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                eprintln!(
                    "testkit: the reaper (pid {}) did not exit after `done`; killing it",
                    reaper.child.id()
                );
                let _ = reaper.child.kill();
                let _ = reaper.child.wait();
                return;
            }
        }
    }
}

/// How the test process's messages ended.
struct Heard {
    /// `done` came: the test process cleaned up after itself.
    done: bool,
    /// The pod locks the test process handed over and did not take back.
    pod_locks: Vec<OwnedFd>,
}

/// Reads the test process's messages from stdin (the socket) until `done`
/// or end of file, keeping the descriptors it hands over.
fn listen() -> Heard {
    let socket = std::io::stdin().as_raw_fd();
    let mut heard = Heard {
        done: false,
        pod_locks: Vec::new(),
    };
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let mut buf = [0u8; 256];
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let (n, fds) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            match recvmsg::<()>(
                socket,
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(msg) => {
                    let mut fds = Vec::new();
                    if let Ok(cmsgs) = msg.cmsgs() {
                        for cmsg in cmsgs {
                            if let ControlMessageOwned::ScmRights(got) = cmsg {
                                fds.extend(got);
                            }
                        }
                    }
                    (msg.bytes, fds)
                }
                Err(Errno::EINTR) => continue,
                Err(_) => return heard,
            }
        };
        // SAFETY: the kernel just installed these descriptors in this
        // process, for it alone.
        heard.pod_locks.extend(
            fds.into_iter()
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
        );
        if n == 0 {
            return heard;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            match line.trim_ascii() {
                b"done" => {
                    heard.done = true;
                    return heard;
                }
                b"release" => {
                    heard.pod_locks.clear();
                    let _ = nix::unistd::write(std::io::stdin().as_fd(), b"released\n");
                }
                _ => {}
            }
        }
    }
}

/// The reaper's own lock, inherited from the test process, made
/// close-on-exec so that no program the reaper runs (docker, iptables)
/// holds it after the reaper is gone.
fn keep_own_lock_to_itself() {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in fds.flatten() {
        let is_lock = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().ends_with(reapers::LOCK_SUFFIX));
        let fd: Option<RawFd> = entry.file_name().to_str().and_then(|n| n.parse().ok());
        if let (true, Some(fd)) = (is_lock, fd) {
            // SAFETY: the descriptor is open (it was just listed) and stays
            // open: this only sets its flag.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
        }
    }
}

/// The reaper's main: wait for `done` or for the test process `parent`
/// (whose journal is `journal`) to die.
pub(crate) fn reaper_main(journal: PathBuf, parent: &str) -> ExitCode {
    keep_own_lock_to_itself();
    let Heard { done, pod_locks } = listen();
    let runtime = crate::runtime::runtime();
    // A group still on record after `done` is one its owner could not end.
    let survivors = runtime.block_on(crate::engine::resource::groups::reap_groups(&journal));
    if done {
        return if survivors == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    eprintln!(
        "testkit reaper: test process {parent} ended without cleaning up; reaping {}{}",
        journal.display(),
        if pod_locks.is_empty() {
            ""
        } else {
            " (holding the pod lock it handed over until its faults are undone)"
        }
    );
    match runtime.block_on(reap(journal, pod_locks)) {
        code if survivors == 0 => code,
        _ => ExitCode::FAILURE,
    }
}

async fn reap(path: PathBuf, pod_locks: Vec<OwnedFd>) -> ExitCode {
    let entries = journal::read_file(&path);
    let todo = journal::outstanding(&entries);
    if todo.is_empty() {
        eprintln!("testkit reaper: nothing to reap");
        return ExitCode::SUCCESS;
    }
    let journal: &'static Journal = Box::leak(Box::new(Journal::at(path)));
    // Faults first, all of them reverted before any is proven (see
    // `fault::undo_all`): the nodes come back before anything is deleted
    // from them. They need the handle's nodes only: connecting to the pod
    // first could wait on the node a fault froze.
    let (faults, todo): (Vec<_>, Vec<_>) = todo
        .into_iter()
        .partition(|o| o.kind == fault::JOURNAL_KIND);
    let mut leaks = undo_faults(&faults, &entries, journal).await;
    // The next test may have the pod now: every fault of the dead test is
    // undone and proven, or known not to be.
    if !pod_locks.is_empty() {
        drop(pod_locks);
        eprintln!("testkit reaper: let go of the pod lock");
    }
    if todo.is_empty() {
        return if leaks == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let Some((pod, kinds)) = pod_and_kinds(todo.len()).await else {
        return ExitCode::FAILURE;
    };
    let prefix = crate::globals::name_prefix();
    // Newest first, concurrently: each resource stands alone.
    let mut tasks = tokio::task::JoinSet::new();
    for resource in todo.into_iter().rev() {
        let leftover = Leftover {
            others_deleted: others_deleted(&entries, &resource),
            resource,
            journal,
        };
        tasks.spawn(leftover.reap(pod, kinds, prefix));
    }
    while let Some(result) = tasks.join_next().await {
        if !matches!(result, Ok(true)) {
            leaks += 1;
        }
    }
    if leaks == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The pod and the resource kinds to delete with, or `None` (said why)
/// when there is no deleting: `outstanding` resources are left for the
/// janitor.
async fn pod_and_kinds(outstanding: usize) -> Option<(&'static Pod, &'static Kinds)> {
    crate::globals::init_pod().await;
    let pod = match crate::globals::pod() {
        Ok(pod) => pod,
        Err(e) => {
            eprintln!(
                "testkit reaper: no pod ({e}); {} resource(s) left for the janitor",
                outstanding
            );
            return None;
        }
    };
    let kinds = match crate::globals::kinds() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("testkit reaper: {e}");
            return None;
        }
    };
    Some((pod, kinds))
}

/// Undoes the faults the dead test process injected, oldest first in
/// `faults`, and proves them undone; how many are not.
async fn undo_faults(
    faults: &[journal::Outstanding],
    entries: &[JournalEntry],
    journal: &Journal,
) -> usize {
    if faults.is_empty() {
        return 0;
    }
    let started = Instant::now();
    let planned: Vec<Result<Fault, String>> = faults
        .iter()
        .map(|f| {
            Fault::from_json(f.id.as_deref().unwrap_or_default())
                .map_err(|e| crate::engine::errors::error_chain(&e))
        })
        .collect();
    let target = crate::globals::pod_handle().and_then(|handle| {
        fault::Target::of(handle).ok_or_else(|| {
            "the pod's handle names no nodes and no machine: the fault cannot be undone here"
                .to_owned()
        })
    });
    let outcomes: Vec<Result<(Reverted, String), String>> = match target {
        Err(why) => planned.iter().map(|_| Err(why.clone())).collect(),
        Ok(target) => {
            let ok: Vec<Fault> = planned.iter().filter_map(|p| p.clone().ok()).collect();
            let mut undone = target
                .undo_all(&ok)
                .await
                .into_iter()
                .zip(ok.iter().map(Fault::describe));
            planned
                .iter()
                .map(|p| match p {
                    Err(why) => Err(why.clone()),
                    Ok(_) => match undone.next() {
                        Some((Ok(found), what)) => Ok((found, what)),
                        Some((Err(why), _)) => Err(crate::engine::errors::error_chain(&why)),
                        None => Err("its undo did not run".to_owned()),
                    },
                })
                .collect()
        }
    };
    let mut leaks = 0;
    for (fault, outcome) in faults.iter().zip(outcomes) {
        let injected = entries
            .iter()
            .any(|e| e.kind == fault.kind && e.name == fault.name && e.event == Event::Created);
        let (event, detail) = match outcome {
            Ok((Reverted::AlreadyUndone, what)) if injected => {
                eprintln!(
                    "testkit reaper: fault `{what}` was undone before the reaper came \
                     (gone_before_undo); the node is proven whole in {} ms",
                    started.elapsed().as_millis()
                );
                (Event::GoneBeforeDelete, None)
            }
            Ok((_, what)) => {
                eprintln!(
                    "testkit reaper: fault undone: {what} (proven in {} ms: the node answers its \
                     health check, its peers reach it)",
                    started.elapsed().as_millis()
                );
                (Event::Reaped, None)
            }
            Err(why) => {
                eprintln!("testkit reaper: FAULT NOT UNDONE: `{}`: {why}", fault.name);
                leaks += 1;
                (Event::Leaked, Some(why))
            }
        };
        let entry = JournalEntry::new(event, &fault.kind, &fault.name, &fault.run, "", detail);
        if let Err(e) = journal.append(&entry) {
            eprintln!(
                "testkit reaper: could not journal the undo of `{}`: {e}",
                fault.name
            );
        }
    }
    leaks
}

/// Whether a resource that turns out gone was deleted by something else.
fn others_deleted(entries: &[JournalEntry], resource: &journal::Outstanding) -> bool {
    // Gone before the reaper's delete says something else deleted it
    // only of a resource that was created and that no delete of the
    // test process's was accepted for.
    let events = |event: Event| {
        entries
            .iter()
            .any(|e| e.kind == resource.kind && e.name == resource.name && e.event == event)
    };
    events(Event::Created) && !events(Event::Deleted)
}

/// A resource the journal says is still there, as the reaper deletes it.
struct Leftover {
    resource: journal::Outstanding,
    /// See [`others_deleted`].
    others_deleted: bool,
    journal: &'static Journal,
}

impl Leftover {
    /// Journals `event` of the resource; failing to is only said.
    fn note(&self, event: Event, detail: Option<String>) {
        let journal::Outstanding {
            kind, name, run, ..
        } = &self.resource;
        let entry = JournalEntry::new(event, kind, name, run, "", detail);
        if let Err(e) = self.journal.append(&entry) {
            eprintln!(
                "testkit reaper: could not journal {event:?} of `{}`: {e}",
                entry.name
            );
        }
    }

    /// Deletes the resource and verifies it gone, when it carries the run
    /// id and its kind is declared; whether it is gone.
    async fn reap(self, pod: &'static Pod, kinds: &'static Kinds, prefix: &'static str) -> bool {
        let journal::Outstanding {
            kind: kind_name,
            name,
            run,
            id,
            ..
        } = &self.resource;
        let naming = kinds.get(kind_name).map(|k| k.naming()).unwrap_or_default();
        if !naming.carries_run_id(name, prefix, run) {
            eprintln!(
                "testkit reaper: refusing to delete `{name}`: it does not carry the run id `{run}`"
            );
            self.note(
                Event::Leaked,
                Some(format!("refused: `{name}` does not carry the run id")),
            );
            return false;
        }
        let Some(spec) = kinds.get(kind_name) else {
            self.note(
                Event::Leaked,
                Some(format!("kind `{kind_name}` is not declared")),
            );
            return false;
        };
        let log = |m: String| eprintln!("testkit reaper: {m}");
        let target = ResourceRef {
            name: name.clone(),
            id: id.clone(),
        };
        match delete_and_verify(pod, spec, &target, || self.note(Event::Deleted, None), &log).await
        {
            Ok(Gone::Verified) => {
                eprintln!("testkit reaper: deleted {kind_name} `{name}` (verified gone)");
                self.note(Event::Reaped, None);
                true
            }
            Ok(_) if self.others_deleted => {
                eprintln!("testkit reaper: {kind_name} `{name}` was already gone: something else deleted it");
                self.note(Event::GoneBeforeDelete, None);
                true
            }
            Ok(_) => {
                eprintln!("testkit reaper: {kind_name} `{name}` is gone (verified)");
                self.note(Event::Reaped, None);
                true
            }
            Err(Leak(why)) => {
                eprintln!("testkit reaper: LEAKED {kind_name} `{name}`: {why}");
                self.note(Event::Leaked, Some(why));
                false
            }
        }
    }
}
