//! A test's faults, on the same stack as its resources: journaled as
//! `pending` (the plan, naming every part to undo) before they are
//! injected, and undone together when cleanup reaches the newest: every
//! one reverted, newest first, before any is proven, so that no proof
//! waits on a peer another fault of the test still freezes or cuts off.
//! A test that holds a fault hands the pod lock to its reaper too (see
//! `reaper`): killed, it keeps the pod from the next test until the
//! reaper has undone its faults.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{lock, settled, Inner, Tracked, Tracker, OUTSTANDING, SHUTTING_DOWN, UNFINISHED};
use crate::engine::pod::fault::{
    self, Fault, FaultAction, Reverted, Target, JOURNAL_KIND as FAULT_KIND,
};
use crate::engine::pod::Pod;
use crate::engine::report::{FaultRecord, FaultState};
use crate::engine::resource::journal::now_ms;
use crate::engine::resource::{Event, JournalEntry};

impl Tracker {
    /// Plans `action` on `node`, journals the plan, and injects it. A fault
    /// whose injection fails is still undone at the end, as far as it went.
    pub(crate) async fn inject_fault(
        &self,
        run: &crate::engine::run::Run,
        pod: &Pod,
        node: &str,
        action: FaultAction,
    ) -> crate::Result {
        let inner = &self.inner;
        let target = Target::of(pod.handle()).ok_or_else(|| anyhow::anyhow!(NO_TARGET))?;
        if SHUTTING_DOWN.load(Ordering::SeqCst) {
            anyhow::bail!(
                "refusing to inject a fault into `{node}`: the test process is shutting down"
            );
        }
        let fault = target.plan(node, action).await?;
        let n = inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let name = format!("{FAULT_KIND}-{n:02}-{}-{node}", fault.verb());
        crate::reaper::ensure_spawned(run);
        inner.track_fault(run, &name, &fault)?;
        inner.hand_over_pod_lock();
        let started = std::time::Instant::now();
        let injected = target.inject(&fault).await.map_err(|cause| {
            let message = crate::engine::errors::error_chain(&cause);
            InjectFailed { message, cause }
        });
        crate::engine::trace::step::record(
            crate::engine::trace::EntryKind::Fault,
            started,
            format!("inject: {}", fault.describe()),
            injected.is_ok(),
            injected
                .as_ref()
                .err()
                .map(|e| e.message.clone())
                .unwrap_or_default(),
        );
        match injected {
            Ok(()) => {
                inner.journal(Event::Created, FAULT_KIND, &name, None);
                if let Some(f) = lock(&inner.faults).iter_mut().find(|f| f.name == name) {
                    f.injected = true;
                }
                inner
                    .log
                    .push(format!("fault injected: {}", fault.describe()));
                Ok(())
            }
            Err(e) => {
                inner.journal(Event::Failed, FAULT_KIND, &name, Some(e.message.clone()));
                Err(anyhow::Error::new(e))
            }
        }
    }

    /// Undoes every fault of the test now (all reverted, then each
    /// proven); the faults that cannot be undone are the error (and fail
    /// the test however it ends).
    pub(crate) async fn heal_faults(&self) -> crate::Result {
        let inner = &self.inner;
        let faults = inner.claim_faults();
        let problems: Vec<String> = inner
            .undo_faults(faults)
            .await
            .into_iter()
            .map(|(_, why)| why)
            .collect();
        match problems.is_empty() {
            true => Ok(()),
            false => Err(anyhow::anyhow!("fault not undone: {}", problems.join("; "))),
        }
    }

    /// While the test holds the pod lock exclusive (`fd`, valid until
    /// [`Tracker::forget_pod_lock`]), its first fault hands a duplicate of
    /// it to the reaper, so that a killed test's faults keep the pod from
    /// the next test until they are undone.
    pub(crate) fn set_pod_lock(&self, fd: std::os::fd::RawFd) {
        *lock(&self.inner.pod_lock) = Some(fd);
    }

    /// What says, at any moment, the faults the test holds: for a hang
    /// report, taken while the test's body (which borrows the tracker)
    /// still runs.
    pub(crate) fn held_faults(&self) -> HeldFaults {
        HeldFaults(self.inner.clone())
    }

    /// The pod lock is about to be let go: the reaper lets go of its
    /// duplicate first.
    pub(crate) fn forget_pod_lock(&self) {
        self.inner.take_back_pod_lock();
        *lock(&self.inner.pod_lock) = None;
    }
}

/// A fault that could not be injected. Its message tells its chain once;
/// its cause is kept, not as its `source` (which would tell the chain a
/// second time), for whoever asks whose fault it was.
#[derive(Debug)]
pub(crate) struct InjectFailed {
    message: String,
    cause: fault::FaultError,
}

impl InjectFailed {
    /// Why the injection failed.
    pub(crate) fn cause(&self) -> &fault::FaultError {
        &self.cause
    }
}

impl std::fmt::Display for InjectFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (what was done of it is undone at the end of the test)",
            self.message
        )
    }
}

impl std::error::Error for InjectFailed {}

/// The faults a test holds, read while it runs ([`Tracker::held_faults`]).
#[derive(Clone)]
pub(crate) struct HeldFaults(Arc<Inner>);

impl HeldFaults {
    /// Each fault injected and not yet undone: `pause worker-2`.
    pub(crate) fn now(&self) -> Vec<String> {
        let live: Vec<String> = lock(&self.0.live)
            .iter()
            .filter(|t| t.kind == FAULT_KIND)
            .map(|t| t.name.clone())
            .collect();
        lock(&self.0.faults)
            .iter()
            .filter(|f| live.contains(&f.name))
            .map(|f| f.record.fault.clone())
            .collect()
    }
}

/// Why a pod takes no faults.
const NO_TARGET: &str = "the pod takes no faults: it is one process or container; faults need \
                         a pod of several nodes ([pod.container.nodes]) or a machine pod \
                         ([pod.vm], `--pod vm`)";

/// A fault of the test, as its record and its undo need it.
pub(super) struct FaultEntry {
    /// Its journal name.
    pub(super) name: String,
    pub(super) record: FaultRecord,
    /// Whether its injection took: only then can a fault be found undone
    /// by someone else.
    pub(super) injected: bool,
}

impl Inner {
    /// Journals the fault's plan as pending, and tracks it: from here on
    /// its undo is owed.
    fn track_fault(
        &self,
        run: &crate::engine::run::Run,
        name: &str,
        fault: &Fault,
    ) -> crate::Result {
        let json = fault.to_json();
        let entry = JournalEntry::new(Event::Pending, FAULT_KIND, name, &run.id, &self.test, None)
            .with_id(Some(&json));
        crate::globals::journal(run).append(&entry).map_err(|e| {
            anyhow::anyhow!(
                "refusing to {}: could not journal it in {}: {e}",
                fault.describe(),
                crate::globals::journal(run).path().display()
            )
        })?;
        OUTSTANDING.fetch_add(1, Ordering::SeqCst);
        UNFINISHED.fetch_add(1, Ordering::SeqCst);
        lock(&self.live).push(Tracked {
            kind: FAULT_KIND.to_owned(),
            name: name.to_owned(),
            id: Some(json),
            _slot: None,
        });
        lock(&self.faults).push(FaultEntry {
            name: name.to_owned(),
            record: FaultRecord::injected(&fault.node, fault.describe()),
            injected: false,
        });
        Ok(())
    }

    /// Hands the pod lock to the reaper, when the test holds it; failing
    /// to is said, and leaves the lock to the kernel as before.
    fn hand_over_pod_lock(&self) {
        let Some(fd) = *lock(&self.pod_lock) else {
            return;
        };
        // SAFETY: `fd` is the pod lock's, open while `pod_lock` names it.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        if let Err(e) = crate::reaper::hand_over_pod_lock(fd) {
            self.log.push(format!(
                "the pod lock stays with this process only ({e}): if it is killed, the next \
                 test may start before its faults are undone"
            ));
        }
    }

    /// Takes the pod lock back from the reaper, if it was handed over.
    pub(super) fn take_back_pod_lock(&self) {
        if lock(&self.pod_lock).is_some() {
            if let Err(e) = crate::reaper::take_back_pod_lock() {
                eprintln!("testkit: {}: {e}", self.test);
                self.log.push(e.to_string());
            }
        }
    }

    /// Takes every fault not yet claimed off the stack, oldest first.
    pub(super) fn claim_faults(&self) -> Vec<Tracked> {
        let mut live = lock(&self.live);
        let (faults, rest): (Vec<Tracked>, Vec<Tracked>) =
            live.drain(..).partition(|t| t.kind == FAULT_KIND);
        *live = rest;
        faults
    }

    /// Undoes the tracked faults `ts` (oldest first) and proves them: all
    /// are reverted before any is proven. Those not undone, with why.
    pub(super) async fn undo_faults(&self, ts: Vec<Tracked>) -> Vec<(Tracked, String)> {
        if ts.is_empty() {
            return Vec::new();
        }
        let started = std::time::Instant::now();
        let planned: Vec<Result<Fault, String>> = ts
            .iter()
            .map(|t| {
                Fault::from_json(t.id.as_deref().unwrap_or_default())
                    .map_err(|e| crate::engine::errors::error_chain(&e))
            })
            .collect();
        let target = crate::globals::pod()
            .map_err(|e| format!("no pod to undo it in: {e}"))
            .and_then(|pod| Target::of(pod.handle()).ok_or_else(|| NO_TARGET.to_owned()));
        let outcomes: Vec<Result<Reverted, String>> = match target {
            Err(why) => planned.iter().map(|_| Err(why.clone())).collect(),
            Ok(target) => {
                let ok: Vec<Fault> = planned.iter().filter_map(|p| p.clone().ok()).collect();
                let mut undone = target
                    .undo_all(&ok)
                    .await
                    .into_iter()
                    .map(|o| o.map_err(|e| crate::engine::errors::error_chain(&e)));
                planned
                    .iter()
                    .map(|p| match p {
                        Err(why) => Err(why.clone()),
                        Ok(_) => undone
                            .next()
                            .unwrap_or_else(|| Err("its undo did not run".to_owned())),
                    })
                    .collect()
            }
        };
        let mut problems = Vec::new();
        for ((t, plan), outcome) in ts.into_iter().zip(planned).zip(outcomes) {
            let what = plan.map_or_else(|_| t.name.clone(), |f| f.describe());
            if let Some(why) = self.settle_fault(&t, &what, started, outcome) {
                problems.push((t, why));
            }
        }
        problems
    }

    /// Records how the undo of a tracked fault went; why it is not undone,
    /// when it is not.
    fn settle_fault(
        &self,
        t: &Tracked,
        what: &str,
        started: std::time::Instant,
        outcome: Result<Reverted, String>,
    ) -> Option<String> {
        crate::engine::trace::step::record(
            crate::engine::trace::EntryKind::Fault,
            started,
            format!("undo and prove: {what}"),
            outcome.is_ok(),
            outcome.as_ref().err().cloned().unwrap_or_default(),
        );
        let mut faults = lock(&self.faults);
        let entry = faults.iter_mut().find(|f| f.name == t.name);
        let injected = entry.as_ref().is_some_and(|f| f.injected);
        let record = entry.map(|f| &mut f.record);
        match outcome {
            Ok(Reverted::AlreadyUndone) if injected => {
                // Nothing of it was left: the test (or a later fault on the
                // same node) undid it. "Undone" would say this cleanup did.
                self.journal(Event::GoneBeforeDelete, FAULT_KIND, &t.name, None);
                if let Some(r) = record {
                    r.state = FaultState::GoneBeforeUndo;
                    r.undone_at_ms = Some(now_ms());
                }
                self.log.push(format!(
                    "fault {what} was undone before cleanup came (gone_before_undo): nothing of \
                     it was left; proven: the node answers its health check, its peers reach it"
                ));
                settled();
                None
            }
            Ok(_) => {
                self.journal(Event::Verified, FAULT_KIND, &t.name, None);
                if let Some(r) = record {
                    r.state = FaultState::Undone;
                    r.undone_at_ms = Some(now_ms());
                }
                self.log.push(format!(
                    "fault undone: {what} (proven: the node answers its health check, its peers reach it)"
                ));
                settled();
                None
            }
            Err(why) => {
                self.journal(Event::Leaked, FAULT_KIND, &t.name, Some(why.clone()));
                let what = record.as_ref().map_or(what.to_owned(), |r| r.fault.clone());
                if let Some(r) = record {
                    r.state = FaultState::NotUndone;
                    r.problem = Some(why.clone());
                }
                self.log.push(format!("FAULT NOT UNDONE: {what}: {why}"));
                UNFINISHED.fetch_sub(1, Ordering::SeqCst);
                Some(format!("{what}: {why}"))
            }
        }
    }
}
