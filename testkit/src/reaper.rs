//! The reaper: a copy of the test binary, started on a test process's first
//! `create`, in its own session (so that a process-group kill of the test,
//! such as nextest's timeout or Ctrl-C, does not reach it), reading a pipe
//! whose only writer is the test process. `done` means the test process
//! cleaned up after itself: the reaper exits. End of file without `done`
//! means the test process died: the reaper deletes and verifies what the
//! journal says is still there, records the outcome, and exits. Either way it
//! first ends the process groups (browsers) the test process left on record
//! (the engine's `resource::groups`).

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::engine::pod::fault::{self, Fault};
use crate::engine::pod::Pod;
use crate::engine::resource::delete::{delete_and_verify, Leak};
use crate::engine::resource::{journal, Event, Gone, Journal, JournalEntry, Kinds, ResourceRef};
use crate::engine::settings::var;

/// How long a test process waits for its reaper to exit after `done`.
const EXIT_WAIT: Duration = Duration::from_secs(5);

struct Reaper {
    child: Child,
    stdin: Option<ChildStdin>,
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

fn spawn(run: &crate::engine::run::Run, journal: &std::path::Path) -> std::io::Result<Reaper> {
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(journal.parent().unwrap_or(std::path::Path::new(".")))?;
    // Its output goes to a file: a reaper holding the test's stdout open
    // would make cargo or nextest wait for it.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal.with_extension("reaper.log"))?;
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
        .stdin(Stdio::piped())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    if let Some(dir) = crate::globals::suite_dir() {
        command.env(var::SUITE_DIR, dir);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    // std creates the pipe close-on-exec: no other child inherits the write
    // end, so the reaper sees end of file exactly when this process is gone.
    let mut child = command.spawn()?;
    let stdin = child.stdin.take();
    Ok(Reaper { child, stdin })
}

/// Tells the reaper this process cleaned up after itself, and waits for it
/// to exit, so that no reaper outlives a normal run.
pub(crate) fn finish_process() {
    let Some(mut reaper) = lock_reaper().take().flatten() else {
        return;
    };
    if let Some(mut stdin) = reaper.stdin.take() {
        let _ = stdin.write_all(b"done\n").and_then(|()| stdin.flush());
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

/// The reaper's main: wait for `done` or for the test process `parent`
/// (whose journal is `journal`) to die.
pub(crate) fn reaper_main(journal: PathBuf, parent: &str) -> ExitCode {
    let stdin = std::io::stdin();
    let mut done = false;
    for line in stdin.lock().lines() {
        match line {
            Ok(l) if l.trim() == "done" => {
                done = true;
                break;
            }
            Ok(_) => continue,
            Err(_) => break,
        }
    }
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
        "testkit reaper: test process {parent} ended without cleaning up; reaping {}",
        journal.display()
    );
    match runtime.block_on(reap(journal)) {
        code if survivors == 0 => code,
        _ => ExitCode::FAILURE,
    }
}

async fn reap(path: PathBuf) -> ExitCode {
    let entries = journal::read_file(&path);
    let todo = journal::outstanding(&entries);
    if todo.is_empty() {
        eprintln!("testkit reaper: nothing to reap");
        return ExitCode::SUCCESS;
    }
    let journal: &'static Journal = Box::leak(Box::new(Journal::at(path)));
    // Faults first, newest first, one at a time: the nodes come back
    // before anything is deleted from them, in the order they went. They
    // need the handle's nodes only: connecting to the pod first could wait
    // on the node a fault froze.
    let (faults, todo): (Vec<_>, Vec<_>) = todo
        .into_iter()
        .partition(|o| o.kind == fault::JOURNAL_KIND);
    let mut leaks = 0;
    for fault in faults.into_iter().rev() {
        if !undo_fault(&fault, journal).await {
            leaks += 1;
        }
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

/// Undoes a fault the dead test process injected, and proves it undone;
/// whether it is.
async fn undo_fault(fault: &journal::Outstanding, journal: &Journal) -> bool {
    let started = std::time::Instant::now();
    let undone = async {
        let handle = crate::globals::pod_handle()?;
        let cluster = handle.cluster().ok_or_else(|| {
            "the pod's handle names no nodes: the fault cannot be undone here".to_owned()
        })?;
        let planned = Fault::from_json(fault.id.as_deref().unwrap_or_default())?;
        fault::undo(cluster, &planned, fault::UNDO_LIMIT)
            .await
            .map(|()| planned.describe())
    }
    .await;
    let (event, detail) = match &undone {
        Ok(what) => {
            eprintln!(
                "testkit reaper: fault undone: {what} (proven in {} ms: the node answers its \
                 health check, its peers reach it)",
                started.elapsed().as_millis()
            );
            (Event::Reaped, None)
        }
        Err(why) => {
            eprintln!("testkit reaper: FAULT NOT UNDONE: `{}`: {why}", fault.name);
            (Event::Leaked, Some(why.clone()))
        }
    };
    let entry = JournalEntry::new(event, &fault.kind, &fault.name, &fault.run, "", detail);
    if let Err(e) = journal.append(&entry) {
        eprintln!(
            "testkit reaper: could not journal the undo of `{}`: {e}",
            fault.name
        );
    }
    undone.is_ok()
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
