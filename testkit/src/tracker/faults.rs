//! A test's faults, on the same stack as its resources: journaled as
//! `pending` (the plan, naming every part to undo) before they are
//! injected, undone newest first with the resources, each undo proven.

use std::sync::atomic::Ordering;

use super::{lock, settled, Inner, Tracked, Tracker, OUTSTANDING, SHUTTING_DOWN, UNFINISHED};
use crate::engine::pod::fault::{self, Fault, FaultAction, JOURNAL_KIND as FAULT_KIND, UNDO_LIMIT};
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
        let cluster = pod.cluster().map_err(anyhow::Error::msg)?;
        if SHUTTING_DOWN.load(Ordering::SeqCst) {
            anyhow::bail!(
                "refusing to inject a fault into `{node}`: the test process is shutting down"
            );
        }
        let fault = fault::plan(cluster, node, action)
            .await
            .map_err(anyhow::Error::msg)?;
        let n = inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let name = format!("{FAULT_KIND}-{n:02}-{}-{node}", fault.verb());
        crate::reaper::ensure_spawned(run);
        inner.track_fault(run, &name, &fault)?;
        let started = std::time::Instant::now();
        let injected = fault::inject(cluster, &fault).await;
        crate::engine::trace::step::record(
            crate::engine::trace::EntryKind::Fault,
            started,
            format!("inject: {}", fault.describe()),
            injected.is_ok(),
            injected.as_ref().err().cloned().unwrap_or_default(),
        );
        match injected {
            Ok(()) => {
                inner.journal(Event::Created, FAULT_KIND, &name, None);
                inner
                    .log
                    .push(format!("fault injected: {}", fault.describe()));
                Ok(())
            }
            Err(e) => {
                inner.journal(Event::Failed, FAULT_KIND, &name, Some(e.clone()));
                Err(anyhow::anyhow!(
                    "{e} (what was done of it is undone at the end of the test)"
                ))
            }
        }
    }

    /// Undoes every fault of the test now, newest first; the first that
    /// cannot be undone is the error (and fails the test however it ends).
    pub(crate) async fn heal_faults(&self) -> crate::Result {
        let inner = &self.inner;
        let faults: Vec<Tracked> = {
            let mut live = lock(&inner.live);
            let (faults, rest): (Vec<Tracked>, Vec<Tracked>) =
                live.drain(..).partition(|t| t.kind == FAULT_KIND);
            *live = rest;
            faults
        };
        let mut problems = Vec::new();
        for t in faults.iter().rev() {
            if let Some(why) = inner.undo_fault(t).await {
                problems.push(why);
            }
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(anyhow::anyhow!("fault not undone: {}", problems.join("; "))),
        }
    }
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
        let record = FaultRecord::injected(&fault.node, fault.describe());
        lock(&self.faults).push((name.to_owned(), record));
        Ok(())
    }

    /// Undoes a tracked fault and proves it; why not, when it is not.
    pub(super) async fn undo_fault(&self, t: &Tracked) -> Option<String> {
        let started = std::time::Instant::now();
        let undone = async {
            let pod = crate::globals::pod().map_err(|e| format!("no pod to undo it in: {e}"))?;
            let cluster = pod.cluster()?;
            let fault = Fault::from_json(t.id.as_deref().unwrap_or_default())?;
            fault::undo(cluster, &fault, UNDO_LIMIT)
                .await
                .map(|()| fault)
        }
        .await;
        crate::engine::trace::step::record(
            crate::engine::trace::EntryKind::Fault,
            started,
            format!(
                "undo and prove: {}",
                Fault::from_json(t.id.as_deref().unwrap_or_default())
                    .map_or_else(|_| t.name.clone(), |f| f.describe())
            ),
            undone.is_ok(),
            undone.as_ref().err().cloned().unwrap_or_default(),
        );
        let mut faults = lock(&self.faults);
        let record = faults
            .iter_mut()
            .find(|(n, _)| *n == t.name)
            .map(|(_, r)| r);
        match undone {
            Ok(fault) => {
                self.journal(Event::Verified, FAULT_KIND, &t.name, None);
                if let Some(r) = record {
                    r.state = FaultState::Undone;
                    r.undone_at_ms = Some(now_ms());
                }
                self.log.push(format!(
                    "fault undone: {} (proven: the node answers its health check, its peers reach it)",
                    fault.describe()
                ));
                settled();
                None
            }
            Err(why) => {
                self.journal(Event::Leaked, FAULT_KIND, &t.name, Some(why.clone()));
                let what = record.as_ref().map_or(t.name.clone(), |r| r.fault.clone());
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
