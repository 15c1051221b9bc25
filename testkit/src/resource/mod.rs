//! Resources: named from the run, journaled before they exist, deleted and
//! verified gone whatever happens.
//!
//! A test creates through [`Cx::create`](crate::Cx::create), which waits for a
//! budget slot, journals the name, and only then sends the request. When the
//! test ends (pass, error, panic, timeout) its resources are deleted newest
//! first and verified gone; on SIGINT/SIGTERM a handler does the same within a
//! grace period; when the process is killed outright, its reaper (a process
//! in its own session, watching a pipe) finishes the job from the journal.
//! [`sweep`] and [`janitor`] find leftovers of a run on the pod.

mod budget;
mod janitor;
mod journal;
mod kind;
mod names;
mod reaper;
mod reclaim;
mod signals;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub use janitor::{janitor, sweep, JanitorTarget, Leftover, SweepReport};
pub use journal::{read_journal, unsettled, Event, JournalEntry};
pub use kind::{KindError, KindSpec, Kinds};
pub use names::carries_run_id;

pub(crate) use reaper::{finish_process, reap_main, MODE as REAP_MODE};
pub(crate) use signals::install_signal_handler;

use crate::cx::Log;
use crate::report::{CleanupState, ResourceRecord};
use crate::wait::Secs;

/// Resources journaled by this process and not yet settled (verified gone,
/// kept or forgotten). The signal handler tells the reaper it is done only
/// when this is zero.
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);

/// Resources journaled by this process whose cleanup has not ended either
/// way (a leak ends it too): what the signal handler waits for.
static UNFINISHED: AtomicUsize = AtomicUsize::new(0);

fn settled() {
    OUTSTANDING.fetch_sub(1, Ordering::SeqCst);
    UNFINISHED.fetch_sub(1, Ordering::SeqCst);
}

/// Set when a signal starts the process's shutdown: creating then fails.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Every live test's tracker, for the signal handler.
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// What a test's cleanup did.
#[derive(Debug, Default)]
pub(crate) struct CleanupSummary {
    pub(crate) state: CleanupState,
    pub(crate) resources: Vec<ResourceRecord>,
    /// Set when something leaked: names what and why.
    pub(crate) failure: Option<String>,
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
}

struct Tracked {
    kind: String,
    name: String,
    _slot: Option<budget::Slot>,
}

impl Tracker {
    pub(crate) fn new(test: &str, log: Log) -> Tracker {
        let inner = Arc::new(Inner {
            test: test.to_owned(),
            tag: names::attempt_tag(test),
            counter: AtomicU32::new(0),
            log,
            live: Mutex::new(Vec::new()),
            records: Mutex::new(Vec::new()),
        });
        let mut live = lock(&LIVE);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&inner));
        Tracker { inner }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The suite's resource-name prefix.
pub(crate) fn prefix() -> &'static str {
    crate::config::current()
        .map(|c| c.suite.name_prefix.as_str())
        .unwrap_or("ct")
}

impl Inner {
    fn set_state(&self, kind: &str, name: &str, state: &str) {
        let mut records = lock(&self.records);
        match records
            .iter_mut()
            .rev()
            .find(|r| r.kind == kind && r.name == name)
        {
            Some(r) => r.state = state.to_owned(),
            None => records.push(ResourceRecord {
                kind: kind.to_owned(),
                name: name.to_owned(),
                state: state.to_owned(),
            }),
        }
    }

    fn journal(&self, event: Event, kind: &str, name: &str, detail: Option<String>) {
        let Ok(run) = crate::run::current() else {
            return;
        };
        let entry = JournalEntry::new(event, kind, name, &run.id, &self.test, detail);
        if let Err(e) = journal::current(run).append(&entry) {
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
    async fn reclaim_all(&self) -> Vec<(String, String, String)> {
        let mut leaks = Vec::new();
        while let Some(tracked) = self.claim() {
            if let Some(why) = self.reclaim_one(&tracked).await {
                leaks.push((tracked.kind.clone(), tracked.name.clone(), why));
            }
        }
        leaks
    }

    async fn reclaim_one(&self, t: &Tracked) -> Option<String> {
        let pod = match crate::pod::current() {
            Ok(pod) => pod,
            Err(e) => return Some(self.leaked(t, format!("no pod to delete it from: {e}"))),
        };
        let spec = match kind::current().map(|k| k.get(&t.kind)) {
            Ok(Some(spec)) => spec,
            Ok(None) => return Some(self.leaked(t, format!("kind `{}` is not declared", t.kind))),
            Err(e) => return Some(self.leaked(t, e)),
        };
        let log = |m: String| self.log.push(m);
        let deleted = || self.journal(Event::Deleted, &t.kind, &t.name, None);
        match reclaim::reclaim(pod, spec, &t.name, deleted, &log).await {
            Ok(()) => {
                self.journal(Event::Verified, &t.kind, &t.name, None);
                self.set_state(&t.kind, &t.name, "deleted");
                self.log
                    .push(format!("deleted {} `{}` (verified gone)", t.kind, t.name));
                settled();
                None
            }
            Err(reclaim::Leak(why)) => Some(self.leaked(t, why)),
        }
    }

    fn leaked(&self, t: &Tracked, why: String) -> String {
        self.journal(Event::Leaked, &t.kind, &t.name, Some(why.clone()));
        self.set_state(&t.kind, &t.name, "leaked");
        self.log
            .push(format!("LEAKED {} `{}`: {why}", t.kind, t.name));
        UNFINISHED.fetch_sub(1, Ordering::SeqCst);
        why
    }
}

impl crate::Cx {
    /// A new name for a resource of this test: `<prefix>-<run id>-<test
    /// tag>-<nn>`, unique in the run, the same for the same test and call
    /// order, a DNS label of at most 63 characters.
    pub fn unique_name(&self) -> String {
        let n = self.resources.inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
        names::name(prefix(), self.run_id(), &self.resources.inner.tag, n)
    }

    /// Creates a resource of `kind` named `name` by running `request`, the
    /// future that sends the creating request. Before `request` is first
    /// polled, waits for a slot when the kind has a budget, and journals the
    /// name; the resource is tracked from then on, even when `request` fails
    /// (the request may have landed), and is deleted and verified gone when the
    /// test ends.
    ///
    /// ```no_run
    /// # async fn f(cx: &testkit::Cx) -> testkit::Result {
    /// let name = cx.unique_name();
    /// let created = cx.create("sandbox", &name, async { Ok::<_, anyhow::Error>(()) /* POST … */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create<T, E, F>(&self, kind: &str, name: &str, request: F) -> crate::Result<T>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<anyhow::Error>,
    {
        let inner = &self.resources.inner;
        // Without a pod there is nothing to create on (the test is skipped
        // with the reason) and nothing to delete from: check before journaling.
        self.pod()?;
        let kinds = kind::current().map_err(anyhow::Error::msg)?;
        let Some(spec) = kinds.get(kind) else {
            anyhow::bail!(
                "unknown resource kind `{kind}`: declare it as [resources.{kind}] in testkit.toml (declared: {})",
                kinds.names()
            );
        };
        if !carries_run_id(name, prefix(), self.run_id()) {
            anyhow::bail!(
                "refusing to create {kind} `{name}`: the names a test creates must carry the run id \
                 (`{}-{}-…`, a DNS label); use `cx.unique_name()`",
                prefix(),
                self.run_id()
            );
        }
        if SHUTTING_DOWN.load(Ordering::SeqCst) {
            anyhow::bail!("refusing to create {kind} `{name}`: the test process is shutting down");
        }
        let run = crate::run::current().map_err(anyhow::Error::msg)?;
        let slot = match spec.budget() {
            None => None,
            Some(budget) => {
                let on_wait = || {
                    self.log(format_args!(
                        "waiting for a `{kind}` slot (budget {budget})"
                    ))
                };
                let (slot, waited) = budget::acquire(&run.results_dir, kind, budget, on_wait)
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "failed to take a `{kind}` budget slot under {}: {e}",
                            run.results_dir.display()
                        )
                    })?;
                if let Some(waited) = waited {
                    self.log(format_args!("got a `{kind}` slot after {}", Secs(waited)));
                }
                Some(slot)
            }
        };
        reaper::ensure_spawned(run);
        let entry = JournalEntry::new(Event::Pending, kind, name, &run.id, &inner.test, None);
        journal::current(run).append(&entry).map_err(|e| {
            anyhow::anyhow!(
                "refusing to create {kind} `{name}`: could not journal it in {}: {e}",
                journal::current(run).path().display()
            )
        })?;
        OUTSTANDING.fetch_add(1, Ordering::SeqCst);
        UNFINISHED.fetch_add(1, Ordering::SeqCst);
        lock(&inner.live).push(Tracked {
            kind: kind.to_owned(),
            name: name.to_owned(),
            _slot: slot,
        });
        inner.set_state(kind, name, "pending");
        match request.await.map_err(Into::into) {
            Ok(value) => {
                inner.journal(Event::Created, kind, name, None);
                inner.set_state(kind, name, "created");
                Ok(value)
            }
            Err(error) => {
                inner.journal(Event::Failed, kind, name, Some(format!("{error:#}")));
                Err(error)
            }
        }
    }

    /// Stops tracking a resource the test deleted itself and verified gone.
    pub fn forget(&self, kind: &str, name: &str) {
        let inner = &self.resources.inner;
        let removed = {
            let mut live = lock(&inner.live);
            live.iter()
                .rposition(|t| t.kind == kind && t.name == name)
                .map(|i| live.remove(i))
        };
        if removed.is_some() {
            inner.journal(Event::Forgotten, kind, name, None);
            inner.set_state(kind, name, "deleted");
            settled();
        }
    }

    /// Deletes what the test created, newest first, and verifies it is gone,
    /// or keeps it when `TESTKIT_KEEP` says so.
    pub(crate) async fn finish(&mut self, body_failed: bool) -> CleanupSummary {
        let inner = Arc::clone(&self.resources.inner);
        let keep = match Keep::from_env() {
            Keep::Always => true,
            Keep::OnFailure => body_failed,
            Keep::Never => false,
        };
        let mut leaks = Vec::new();
        let mut kept = Vec::new();
        if keep {
            while let Some(t) = inner.claim() {
                inner.journal(Event::Kept, &t.kind, &t.name, None);
                inner.set_state(&t.kind, &t.name, "kept");
                settled();
                kept.push(format!("{} `{}`", t.kind, t.name));
            }
        } else {
            leaks = inner.reclaim_all().await;
        }
        let resources = lock(&inner.records).clone();
        if !kept.is_empty() {
            kept.reverse();
            let (id, dir) = crate::run::current()
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
        }
    }
}

/// `TESTKIT_KEEP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Never,
    OnFailure,
    Always,
}

impl Keep {
    fn from_env() -> Keep {
        match std::env::var("TESTKIT_KEEP").as_deref().map(str::trim) {
            Err(_) | Ok("") | Ok("never") => Keep::Never,
            Ok("on-failure") => Keep::OnFailure,
            Ok("always") => Keep::Always,
            Ok(other) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| eprintln!("testkit: ignoring TESTKIT_KEEP={other:?}: expected `on-failure`, `always` or `never`"));
                Keep::Never
            }
        }
    }
}

/// Deletes every live test's unclaimed resources, then waits for cleanups
/// already in flight, until nothing of this process is outstanding.
async fn reclaim_everything() {
    let trackers: Vec<Arc<Inner>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for inner in trackers {
        tasks.spawn(async move {
            inner.reclaim_all().await;
        });
    }
    while tasks.join_next().await.is_some() {}
    while UNFINISHED.load(Ordering::SeqCst) > 0 {
        // Claimed by a test's own cleanup, or pending in a body still
        // running: claim what appears, wait for the rest.
        let trackers: Vec<Arc<Inner>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
        for inner in trackers {
            inner.reclaim_all().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
