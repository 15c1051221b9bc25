//! A test's resources: named from the run, journaled before they exist,
//! deleted and verified gone whatever happens.
//!
//! A test creates through [`Cx::create`](crate::Cx::create), which waits for a
//! budget slot, journals the name, and only then sends the request. The
//! words (cleanup, reaper, leak, residue, janitor) are the engine's
//! `resource` module's.
//!

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::engine::report::{CleanupState, FaultRecord, FaultState, ResourceRecord, ResourceState};
use crate::engine::resource::{budget, groups, names, Event, Gone, JournalEntry, KindSpec};
use crate::engine::settings::Keep;
use crate::log::Log;
use crate::reaper;

mod faults;
pub(crate) use faults::HeldFaults;

pub(crate) use faults::InjectFailed;

/// Resources journaled by this process and not yet settled (verified gone,
/// kept or forgotten). The signal handler tells the reaper it is done only
/// when this is zero.
pub(crate) static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);

/// Resources journaled by this process whose cleanup has not ended either
/// way (a leak ends it too): what the signal handler waits for.
static UNFINISHED: AtomicUsize = AtomicUsize::new(0);

fn settled() {
    OUTSTANDING.fetch_sub(1, Ordering::SeqCst);
    UNFINISHED.fetch_sub(1, Ordering::SeqCst);
}

/// Set when a signal starts the process's shutdown: creating then fails.
pub(crate) static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Every live test's tracker, for the signal handler.
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

use crate::engine::pod::fault::JOURNAL_KIND as FAULT_KIND;

/// What a test's cleanup did.
#[derive(Debug, Default)]
pub(crate) struct CleanupSummary {
    pub(crate) state: CleanupState,
    pub(crate) resources: Vec<ResourceRecord>,
    /// Set when something leaked: names what and why.
    pub(crate) failure: Option<String>,
    /// The faults the test injected, and their undo.
    pub(crate) faults: Vec<FaultRecord>,
    /// Set when a fault is not undone: names the node, the fault and why.
    pub(crate) fault_failure: Option<String>,
}

/// The resources of one test.
pub(crate) struct Tracker {
    inner: Arc<Inner>,
}

struct Inner {
    test: String,
    tag: String,
    counter: AtomicU32,
    log: Log,
    /// Not yet claimed by a cleanup, in creation order.
    live: Mutex<Vec<Tracked>>,
    /// Every resource the test created, in creation order, with its state.
    records: Mutex<Vec<ResourceRecord>>,
    /// Every fault the test injected, in order.
    faults: Mutex<Vec<faults::FaultEntry>>,
    /// The descriptor of the pod lock the test holds exclusive, while it
    /// holds it: handed to the reaper with the first fault.
    pod_lock: Mutex<Option<std::os::fd::RawFd>>,
}

struct Tracked {
    kind: String,
    name: String,
    /// The server-assigned id, once the creating request answered it.
    id: Option<String>,
    _slot: Option<budget::Slot>,
}

impl Tracker {
    /// The tracker of the test `test` (its full name), logging to `log`;
    /// `attempt` is nextest's attempt number, for names of retries.
    pub(crate) fn new(test: &str, attempt: Option<u32>, log: Log) -> Tracker {
        let inner = Arc::new(Inner {
            test: test.to_owned(),
            tag: names::attempt_tag(test, attempt),
            counter: AtomicU32::new(0),
            log,
            live: Mutex::new(Vec::new()),
            records: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            pod_lock: Mutex::new(None),
        });
        let mut live = lock(&LIVE);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&inner));
        Tracker { inner }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts the process group `pgid` a test owns beyond its own process (a
/// browser) on record, and starts this process's reaper if it is not
/// running yet: whatever kills the process, the group is ended. See
/// [`groups`].
#[cfg_attr(not(feature = "browser"), allow(dead_code))]
pub(crate) fn own_group(
    run: &crate::engine::run::Run,
    what: &str,
    pgid: i32,
    start_ticks: Option<u64>,
    dir: Option<&std::path::Path>,
    tag: Option<(&str, &str)>,
) -> std::io::Result<()> {
    groups::record_started(
        crate::globals::journal(run).path(),
        what,
        pgid,
        start_ticks,
        dir,
        tag,
    )?;
    reaper::ensure_spawned(run);
    Ok(())
}

/// Whether the suite's resource kinds load; the error names what is wrong.
pub(crate) fn check_kinds() -> Result<(), &'static crate::globals::KindsError> {
    crate::globals::kinds().map(|_| ())
}

/// The suite's declaration of the resource kind `kind`.
fn declared_kind(kind: &str) -> crate::Result<&'static KindSpec> {
    let kinds = crate::globals::kinds().map_err(|e| anyhow::Error::msg(e.to_string()))?;
    let Some(spec) = kinds.get(kind) else {
        anyhow::bail!(
            "unknown resource kind `{kind}`: declare it as [resources.{kind}] in testkit.toml (declared: {})",
            kinds.names()
        );
    };
    Ok(spec)
}

/// Refuses a name that does not carry the run id as `naming` (the kind's)
/// writes it: the test could not own it.
fn check_carries_run_id(
    naming: names::Naming,
    run: &crate::engine::run::Run,
    kind: &str,
    name: &str,
) -> crate::Result<()> {
    if !naming.carries_run_id(name, crate::globals::name_prefix(), &run.id) {
        let hint = if naming == names::Naming::default() {
            "`cx.unique_name()`"
        } else {
            "`cx.unique_name_for(kind)`: the kind's names look different"
        };
        anyhow::bail!(
            "refusing to create {kind} `{name}`: the names a test creates must carry the run id \
             (`{}…`, in the kind's alphabet); use {hint}",
            naming.run_prefix(crate::globals::name_prefix(), &run.id)
        );
    }
    Ok(())
}

impl Inner {
    fn set_state(&self, kind: &str, name: &str, state: ResourceState) {
        let mut records = lock(&self.records);
        match records
            .iter_mut()
            .rev()
            .find(|r| r.kind == kind && r.name == name)
        {
            Some(r) => r.state = state,
            None => records.push(ResourceRecord {
                kind: kind.to_owned(),
                name: name.to_owned(),
                state,
            }),
        }
    }

    fn journal(&self, event: Event, kind: &str, name: &str, detail: Option<String>) {
        self.append(
            crate::globals::journal_entry(event, kind, name, &self.test, detail),
            event,
            kind,
            name,
        );
    }

    fn journal_with_id(&self, event: Event, kind: &str, name: &str, id: Option<&str>) {
        self.append(
            crate::globals::journal_entry(event, kind, name, &self.test, None)
                .map(|e| e.with_id(id)),
            event,
            kind,
            name,
        );
    }

    fn append(&self, entry: Option<JournalEntry>, event: Event, kind: &str, name: &str) {
        let (Some(entry), Ok(run)) = (entry, crate::globals::run()) else {
            return;
        };
        if let Err(e) = crate::globals::journal(run).append(&entry) {
            self.log.push(format!(
                "testkit: could not journal {event:?} of {kind} `{name}`: {e}"
            ));
        }
    }

    /// Takes the newest unclaimed resource, so that it is cleaned up once.
    fn claim(&self) -> Option<Tracked> {
        lock(&self.live).pop()
    }

    /// Deletes and verifies every unclaimed resource, newest first. Returns
    /// the leaks, as `(kind, name, why)`.
    async fn clean_up_all(&self) -> Vec<(String, String, String)> {
        let mut leaks = Vec::new();
        while let Some(tracked) = self.claim() {
            if tracked.kind == FAULT_KIND {
                // Every fault of the test is undone together, so that each
                // one's proof finds the others undone (`fault::undo_all`).
                let mut faults = self.claim_faults();
                faults.push(tracked);
                for (t, why) in self.undo_faults(faults).await {
                    leaks.push((t.kind, t.name, why));
                }
                continue;
            }
            if let Some(why) = self.clean_up_one(&tracked).await {
                leaks.push((tracked.kind.clone(), tracked.name.clone(), why));
            }
        }
        leaks
    }

    async fn clean_up_one(&self, t: &Tracked) -> Option<String> {
        let pod = match crate::globals::pod() {
            Ok(pod) => pod,
            Err(e) => return Some(self.leaked(t, format!("no pod to delete it from: {e}"))),
        };
        let spec = match crate::globals::kinds().map(|k| k.get(&t.kind)) {
            Ok(Some(spec)) => spec,
            Ok(None) => return Some(self.leaked(t, format!("kind `{}` is not declared", t.kind))),
            Err(e) => return Some(self.leaked(t, e.to_string())),
        };
        let log = |m: String| self.log.push(m);
        let deleted = || self.journal(Event::Deleted, &t.kind, &t.name, None);
        let target = crate::engine::resource::ResourceRef {
            name: t.name.clone(),
            id: t.id.clone(),
        };
        match crate::engine::resource::delete::delete_and_verify(pod, spec, &target, deleted, &log)
            .await
        {
            Ok(Gone::Verified) => {
                self.journal(Event::Verified, &t.kind, &t.name, None);
                self.set_state(&t.kind, &t.name, ResourceState::Deleted);
                self.log
                    .push(format!("deleted {} `{}` (verified gone)", t.kind, t.name));
                settled();
                None
            }
            Ok(_) if !self.was_created(&t.kind, &t.name) => {
                // Its creation was never answered, or failed: a first delete
                // that finds nothing says it never existed, not that
                // something else deleted it.
                self.journal(Event::Verified, &t.kind, &t.name, None);
                self.set_state(&t.kind, &t.name, ResourceState::Deleted);
                self.log.push(format!(
                    "{} `{}` is gone (verified): its creation was not answered, and there was nothing to delete",
                    t.kind, t.name
                ));
                settled();
                None
            }
            Ok(_) => {
                // Gone, but not by this cleanup: whatever deleted it (a
                // janitor, another run, the product) is worth knowing, and
                // "verified" would say this cleanup did it.
                self.journal(Event::GoneBeforeDelete, &t.kind, &t.name, None);
                self.set_state(&t.kind, &t.name, ResourceState::GoneBeforeDelete);
                self.log.push(format!(
                    "{} `{}` was gone before cleanup deleted it: something else deleted it (gone_before_delete)",
                    t.kind, t.name
                ));
                settled();
                None
            }
            Err(crate::engine::resource::delete::Leak(why)) => Some(self.leaked(t, why)),
        }
    }

    /// Whether the creating request of `kind` `name` succeeded.
    fn was_created(&self, kind: &str, name: &str) -> bool {
        lock(&self.records)
            .iter()
            .rev()
            .find(|r| r.kind == kind && r.name == name)
            .is_some_and(|r| r.state == ResourceState::Created)
    }

    fn leaked(&self, t: &Tracked, why: String) -> String {
        self.journal(Event::Leaked, &t.kind, &t.name, Some(why.clone()));
        self.set_state(&t.kind, &t.name, ResourceState::Leaked);
        self.log
            .push(format!("LEAKED {} `{}`: {why}", t.kind, t.name));
        UNFINISHED.fetch_sub(1, Ordering::SeqCst);
        why
    }

    /// A slot of `kind`'s budget, when the kind has one: waits for it,
    /// saying so in the test's log.
    async fn budget_slot(
        &self,
        run: &crate::engine::run::Run,
        kind: &str,
        name: &str,
        budget: Option<usize>,
    ) -> crate::Result<Option<budget::Slot>> {
        let Some(budget) = budget else {
            return Ok(None);
        };
        let holder = budget::Holder::new(&self.test, name);
        let bound = crate::globals::settings_or_default().budget_wait;
        let log = |m: String| self.log.push(m);
        let slot = budget::acquire(&run.results_dir, kind, budget, &holder, bound, log);
        Ok(Some(slot.await.map_err(anyhow::Error::new)?))
    }

    /// Journals `kind` `name` as pending and tracks it, with its budget
    /// `slot`, before the creating request is sent: from here on its
    /// cleanup is owed.
    fn track_pending(
        &self,
        run: &crate::engine::run::Run,
        kind: &str,
        name: &str,
        slot: Option<budget::Slot>,
    ) -> crate::Result<()> {
        let entry = JournalEntry::new(Event::Pending, kind, name, &run.id, &self.test, None);
        crate::globals::journal(run).append(&entry).map_err(|e| {
            anyhow::anyhow!(
                "refusing to create {kind} `{name}`: could not journal it in {}: {e}",
                crate::globals::journal(run).path().display()
            )
        })?;
        OUTSTANDING.fetch_add(1, Ordering::SeqCst);
        UNFINISHED.fetch_add(1, Ordering::SeqCst);
        lock(&self.live).push(Tracked {
            kind: kind.to_owned(),
            name: name.to_owned(),
            id: None,
            _slot: slot,
        });
        self.set_state(kind, name, ResourceState::Pending);
        Ok(())
    }

    /// Records that the creating request of `kind` `name` succeeded, with
    /// the id it answered, if any.
    fn created(&self, kind: &str, name: &str, id: Option<String>) {
        if let Some(id) = &id {
            if let Some(t) = lock(&self.live)
                .iter_mut()
                .rev()
                .find(|t| t.kind == kind && t.name == name)
            {
                t.id = Some(id.clone());
            }
        }
        self.journal_with_id(Event::Created, kind, name, id.as_deref());
        self.set_state(kind, name, ResourceState::Created);
    }
}

impl Tracker {
    /// The test's next resource name in the run `run_id`.
    pub(crate) fn unique_name(&self, run_id: &str) -> String {
        let n = self.inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
        names::name(crate::globals::name_prefix(), run_id, &self.inner.tag, n)
    }

    /// The test's next name for a resource of `kind`, in the kind's alphabet.
    pub(crate) fn unique_name_for(&self, run_id: &str, kind: &str) -> crate::Result<String> {
        let spec = declared_kind(kind)?;
        let n = self.inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(spec
            .naming()
            .name(crate::globals::name_prefix(), run_id, &self.inner.tag, n))
    }

    /// Tracks the resource `kind` `name` from before `request` (the future
    /// that creates it) is first polled; see [`Cx::create`](crate::Cx::create).
    /// `log` is the test's log, for budget waits.
    pub(crate) async fn create<T, F>(
        &self,
        run: &crate::engine::run::Run,
        kind: &str,
        name: &str,
        request: F,
    ) -> crate::Result<T>
    where
        F: Future<Output = crate::Result<(T, Option<String>)>>,
    {
        let inner = &self.inner;
        let spec = declared_kind(kind)?;
        check_carries_run_id(spec.naming(), run, kind, name)?;
        if SHUTTING_DOWN.load(Ordering::SeqCst) {
            anyhow::bail!("refusing to create {kind} `{name}`: the test process is shutting down");
        }
        let slot = inner.budget_slot(run, kind, name, spec.budget()).await?;
        reaper::ensure_spawned(run);
        inner.track_pending(run, kind, name, slot)?;
        match request.await {
            Ok((value, id)) => {
                inner.created(kind, name, id);
                Ok(value)
            }
            Err(error) => {
                inner.journal(Event::Failed, kind, name, Some(format!("{error:#}")));
                Err(error)
            }
        }
    }

    /// Stops tracking a resource the test deleted itself and verified gone.
    pub(crate) fn forget(&self, kind: &str, name: &str) {
        let inner = &self.inner;
        let removed = {
            let mut live = lock(&inner.live);
            live.iter()
                .rposition(|t| t.kind == kind && t.name == name)
                .map(|i| live.remove(i))
        };
        if removed.is_some() {
            inner.journal(Event::Forgotten, kind, name, None);
            inner.set_state(kind, name, ResourceState::Deleted);
            settled();
        }
    }

    /// Deletes what the test created, newest first, and verifies it is gone,
    /// or keeps it when `keep` (`TESTKIT_KEEP`) says so.
    pub(crate) async fn finish(&self, keep: Keep, body_failed: bool) -> CleanupSummary {
        let inner = Arc::clone(&self.inner);
        let keep = match keep {
            Keep::Always => true,
            Keep::OnFailure => body_failed,
            Keep::Never => false,
        };
        let mut leaks = Vec::new();
        let mut kept = Vec::new();
        if keep {
            // A fault left in place would break the next test, not help
            // anyone look at this one: it is undone all the same.
            let faults = inner.claim_faults();
            for (t, why) in inner.undo_faults(faults).await {
                leaks.push((t.kind, t.name, why));
            }
            while let Some(t) = inner.claim() {
                inner.journal(Event::Kept, &t.kind, &t.name, None);
                inner.set_state(&t.kind, &t.name, ResourceState::Kept);
                settled();
                kept.push(format!("{} `{}`", t.kind, t.name));
            }
        } else {
            leaks = inner.clean_up_all().await;
        }
        let resources = lock(&inner.records).clone();
        // Every fault is settled: the reaper need not hold the pod for it.
        inner.take_back_pod_lock();
        let faults: Vec<FaultRecord> = lock(&inner.faults)
            .iter()
            .map(|f| f.record.clone())
            .collect();
        let fault_failure = fault_failure(&faults);
        leaks.retain(|(kind, _, _)| kind != FAULT_KIND);
        if !kept.is_empty() {
            kept.reverse();
            let (id, dir) = crate::globals::run()
                .map(|r| (r.id.clone(), r.results_dir.display().to_string()))
                .unwrap_or_default();
            let message = format!(
                "kept {} (TESTKIT_KEEP): {}; remove them with: testkit-runner janitor --run {id} --results {dir}",
                if kept.len() == 1 { "1 resource".to_owned() } else { format!("{} resources", kept.len()) },
                kept.join(", ")
            );
            inner.log.push(message.clone());
            eprintln!("testkit: {}: {message}", inner.test);
        }
        let state = if resources.is_empty() {
            CleanupState::Nothing
        } else if !leaks.is_empty() {
            CleanupState::Failed
        } else if !kept.is_empty() {
            CleanupState::Kept
        } else if resources
            .iter()
            .any(|r| r.state == ResourceState::GoneBeforeDelete)
        {
            CleanupState::GoneBeforeDelete
        } else {
            CleanupState::Verified
        };
        let failure = (!leaks.is_empty()).then(|| {
            let list: Vec<String> = leaks
                .iter()
                .map(|(kind, name, why)| format!("leaked {kind} `{name}` ({why})"))
                .collect();
            format!("cleanup failed: {}", list.join("; "))
        });
        CleanupSummary {
            state,
            resources,
            failure,
            faults,
            fault_failure,
        }
    }
}

/// The failure of faults that are not undone, naming each node.
fn fault_failure(faults: &[FaultRecord]) -> Option<String> {
    let not_undone: Vec<String> = faults
        .iter()
        .filter(|f| !matches!(f.state, FaultState::Undone | FaultState::GoneBeforeUndo))
        .map(|f| {
            format!(
                "node `{}`: {} ({})",
                f.node,
                f.fault,
                f.problem.as_deref().unwrap_or("not undone")
            )
        })
        .collect();
    (!not_undone.is_empty()).then(|| format!("fault not undone: {}", not_undone.join("; ")))
}

/// The full names of the tests whose tracker is live: the tests running.
pub(crate) fn live_tests() -> Vec<String> {
    lock(&LIVE)
        .iter()
        .filter_map(Weak::upgrade)
        .map(|inner| inner.test.clone())
        .collect()
}

/// Deletes every live test's unclaimed resources, then waits for cleanups
/// already in flight, until nothing of this process is outstanding.
pub(crate) async fn clean_up_everything() {
    let trackers: Vec<Arc<Inner>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for inner in trackers {
        tasks.spawn(async move {
            inner.clean_up_all().await;
        });
    }
    while tasks.join_next().await.is_some() {}
    while UNFINISHED.load(Ordering::SeqCst) > 0 {
        // Claimed by a test's own cleanup, or pending in a body still
        // running: claim what appears, wait for the rest.
        let trackers: Vec<Arc<Inner>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
        for inner in trackers {
            inner.clean_up_all().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
