//! `timeline.trace.json`: the run's timeline as a Chrome trace (the JSON
//! Trace Event Format that `chrome://tracing`, ui.perfetto.dev and
//! speedscope open): the run and its phases, each test and its earlier
//! attempts, the pod lock each held, the resources each created, and the
//! faults injected into the pod's nodes.
//!
//! The format: an object whose `traceEvents` are complete events
//! (`"ph": "X"`, a `dur`), begin/end pairs (`B`, `E`) and instants (`i`),
//! each with a `pid` and a `tid`, timestamps (`ts`) in microseconds from
//! the run's first event; `M` events name the processes and threads. Here
//! a process is a part of the run (`run`, `tests`, `resources`, `faults`)
//! and a thread a lane of it (a test, a node).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use testkit_engine::report::TestRecord;
use testkit_engine::resource::JournalEntry;

use crate::verdict::PhaseResult;

/// The file in a results folder.
pub(crate) const FILE: &str = "timeline.trace.json";

const RUN: u32 = 1;
const TESTS: u32 = 2;
const RESOURCES: u32 = 3;
const FAULTS: u32 = 4;

/// The events of a trace, and the time they are measured from.
///
/// Complete events are held back until [`Events::finish`]: a viewer draws
/// the slices of a thread as a stack, so two that cross (a lock released
/// a millisecond after its test ended, two tests' faults on one node) are
/// drawn wrong or dropped. `finish` gives a slice that would cross another
/// a lane of its own beside it, never a time it did not have.
struct Events {
    t0_ms: u64,
    events: Vec<Value>,
    spans: BTreeMap<(u32, usize), Vec<Span>>,
    thread_names: BTreeMap<(u32, usize), String>,
}

/// A complete event, before it is given a lane.
struct Span {
    cat: String,
    name: String,
    ms: (u64, u64),
    args: Value,
}

/// The thread ids of a lane's overflow lanes are this far apart: far
/// above any lane's own id.
const OVERFLOW_STRIDE: usize = 1_000_000;

impl Events {
    /// µs since the trace's start.
    fn ts(&self, ms: u64) -> u64 {
        ms.saturating_sub(self.t0_ms) * 1000
    }

    fn name_process(&mut self, pid: u32, name: &str) {
        self.events.push(json!({
            "ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": { "name": name },
        }));
    }

    fn name_thread(&mut self, pid: u32, tid: usize, name: &str) {
        self.thread_names.insert((pid, tid), name.to_owned());
        self.events.push(json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
            "args": { "name": name },
        }));
    }

    /// A complete event from `from_ms` to `to_ms`, on the lane `at` or,
    /// where it would cross a slice there, an overflow lane of it.
    fn span(&mut self, at: (u32, usize), cat: &str, name: &str, ms: (u64, u64), args: Value) {
        let (from, to) = ms;
        self.spans.entry(at).or_default().push(Span {
            cat: cat.to_owned(),
            name: name.to_owned(),
            ms: (from, to.max(from)),
            args,
        });
    }

    /// The events, each lane's slices nested: a slice that would cross
    /// one it overlaps goes to the first overflow lane where it nests.
    fn finish(mut self) -> Vec<Value> {
        for ((pid, tid), mut spans) in std::mem::take(&mut self.spans) {
            // By start, the longer first: an enclosing slice before those
            // it encloses.
            spans.sort_by(|a, b| a.ms.0.cmp(&b.ms.0).then(b.ms.1.cmp(&a.ms.1)));
            // Per lane, the slices still open at the current start.
            let mut lanes: Vec<Vec<u64>> = Vec::new();
            for span in spans {
                let (from, to) = span.ms;
                let fits = |open: &mut Vec<u64>| {
                    while open.last().is_some_and(|&end| end <= from) {
                        open.pop();
                    }
                    open.last().is_none_or(|&end| to <= end)
                };
                let lane = match lanes.iter_mut().position(fits) {
                    Some(lane) => lane,
                    None => {
                        lanes.push(Vec::new());
                        let lane = lanes.len() - 1;
                        let name = self
                            .thread_names
                            .get(&(pid, tid))
                            .map_or_else(|| format!("lane {tid}"), String::clone);
                        let overflow = tid + lane * OVERFLOW_STRIDE;
                        if lane > 0 {
                            self.events.push(json!({
                                "ph": "M", "name": "thread_name", "pid": pid, "tid": overflow,
                                "args": { "name": format!("{name} (overlapping, {})", lane + 1) },
                            }));
                        }
                        lane
                    }
                };
                lanes[lane].push(to);
                self.events.push(json!({
                    "ph": "X", "cat": span.cat, "name": span.name, "pid": pid,
                    "tid": tid + lane * OVERFLOW_STRIDE,
                    "ts": self.ts(from), "dur": (to - from) * 1000, "args": span.args,
                }));
            }
        }
        self.events
    }

    fn instant(&mut self, at: (u32, usize), cat: &str, name: &str, ms: u64, args: Value) {
        let (pid, tid) = at;
        self.events.push(json!({
            "ph": "i", "s": "t", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": self.ts(ms), "args": args,
        }));
    }
}

/// The trace of a run: its `phases` as `verdict.jsonl` has them, its
/// `records` and its `journal`.
pub(crate) fn trace(
    run_id: &str,
    phases: &[PhaseResult],
    records: &[TestRecord],
    journal: &[JournalEntry],
) -> Value {
    let ran: Vec<&TestRecord> = {
        let mut ran: Vec<&TestRecord> = records.iter().filter(|r| r.started_at_ms > 0).collect();
        ran.sort_by_key(|r| (r.started_at_ms, r.name.clone()));
        ran
    };
    let starts = phases
        .iter()
        .map(|p| p.at.saturating_sub(p.duration_ms))
        .chain(ran.iter().map(|r| r.started_at_ms))
        .chain(
            ran.iter()
                .flat_map(|r| r.attempts.iter().map(|a| a.started_at_ms)),
        )
        // What a test's process stamped itself may come before the start
        // the runner saw: the trace starts at the earliest of all.
        .chain(
            ran.iter()
                .filter_map(|r| r.lock.as_ref().map(|l| l.acquired_at_ms)),
        )
        .chain(
            ran.iter()
                .flat_map(|r| r.faults.iter().map(|f| f.injected_at_ms)),
        )
        .chain(ran.iter().flat_map(|r| {
            journal
                .iter()
                .filter(|j| j.run == r.run_id && j.test == r.name)
                .map(|j| j.time)
        }))
        .filter(|ms| *ms > 0);
    let t0_ms = starts.min().unwrap_or(0);
    let end_ms = phases
        .iter()
        .map(|p| p.at)
        .chain(ran.iter().map(|r| r.started_at_ms + r.duration_ms))
        .max()
        .unwrap_or(t0_ms);
    let mut e = Events {
        t0_ms,
        events: Vec::new(),
        spans: BTreeMap::new(),
        thread_names: BTreeMap::new(),
    };
    e.name_process(RUN, &format!("run {run_id}"));
    e.name_thread(RUN, 0, "phases");
    e.events.push(json!({
        "ph": "B", "cat": "run", "name": format!("run {run_id}"), "pid": RUN, "tid": 0,
        "ts": e.ts(t0_ms),
    }));
    for p in phases {
        e.span(
            (RUN, 0),
            "phase",
            p.phase,
            (p.at.saturating_sub(p.duration_ms), p.at),
            json!({
                "verdict": p.verdict.word(),
                "category": p.category.map(|c| c.as_str()),
                "evidence": p.evidence,
            }),
        );
    }
    e.events.push(json!({
        "ph": "E", "cat": "run", "name": format!("run {run_id}"), "pid": RUN, "tid": 0,
        "ts": e.ts(end_ms),
    }));

    e.name_process(TESTS, "tests");
    e.name_process(RESOURCES, "resources");
    let mut nodes: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in ran.iter().enumerate() {
        let tid = i + 1;
        let name = format!("{}::{}", r.binary, r.name);
        e.name_thread(TESTS, tid, &name);
        for a in r.attempts.iter().filter(|a| a.started_at_ms > 0) {
            e.span(
                (TESTS, tid),
                "attempt",
                &format!("{} (attempt {})", r.name, a.attempt),
                (a.started_at_ms, a.started_at_ms + a.duration_ms),
                json!({ "outcome": a.outcome.as_str() }),
            );
        }
        e.span(
            (TESTS, tid),
            "test",
            &r.name,
            (r.started_at_ms, r.started_at_ms + r.duration_ms),
            json!({
                "outcome": r.outcome.as_str(),
                "category": r.category().map(|c| c.as_str()),
                "binary": r.binary,
                "attempt": r.attempt,
            }),
        );
        if let Some(lock) = &r.lock {
            e.span(
                (TESTS, tid),
                "lock",
                &format!("pod lock ({})", lock.mode.as_str()),
                (lock.acquired_at_ms, lock.released_at_ms),
                json!({ "wait_ms": lock.wait_ms }),
            );
        }
        resources(&mut e, tid, &name, r, journal);
        for f in &r.faults {
            let next = nodes.len() + 1;
            let lane = *nodes.entry(f.node.as_str()).or_insert(next);
            let args = json!({ "test": name, "state": f.state.as_str(), "problem": f.problem });
            match f.undone_at_ms {
                Some(undone) => e.span(
                    (FAULTS, lane),
                    "fault",
                    &f.fault,
                    (f.injected_at_ms, undone),
                    args,
                ),
                None => e.instant((FAULTS, lane), "fault", &f.fault, f.injected_at_ms, args),
            }
        }
    }
    if !nodes.is_empty() {
        e.name_process(FAULTS, "faults");
        for (node, lane) in &nodes {
            e.name_thread(FAULTS, *lane, node);
        }
    }
    json!({
        "traceEvents": e.finish(),
        "displayTimeUnit": "ms",
        "otherData": { "run_id": run_id, "start_ms": t0_ms },
    })
}

/// Each resource of the test `r` from its first journal entry to its last,
/// on a lane of `resources` beside the test's.
fn resources(e: &mut Events, tid: usize, test: &str, r: &TestRecord, journal: &[JournalEntry]) {
    let mut spans: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for entry in journal
        .iter()
        .filter(|j| j.run == r.run_id && j.test == r.name && !j.name.is_empty())
        // A fault is journaled too: it has a lane of its own.
        .filter(|j| j.kind != testkit_engine::pod::fault::JOURNAL_KIND)
    {
        let span = spans
            .entry((entry.kind.as_str(), entry.name.as_str()))
            .or_insert((entry.time, entry.time));
        span.0 = span.0.min(entry.time);
        span.1 = span.1.max(entry.time);
    }
    if spans.is_empty() {
        return;
    }
    e.name_thread(RESOURCES, tid, test);
    for ((kind, name), ms) in spans {
        let state = r
            .resources
            .iter()
            .find(|res| res.kind == kind && res.name == name)
            .map(|res| res.state.as_str());
        e.span(
            (RESOURCES, tid),
            "resource",
            &format!("{kind} {name}"),
            ms,
            json!({ "state": state }),
        );
    }
}

/// Writes `<results>/timeline.trace.json`.
pub(crate) fn write(
    results_dir: &Path,
    run_id: &str,
    phases: &[PhaseResult],
    records: &[TestRecord],
) -> std::io::Result<()> {
    let journal = testkit_engine::resource::read_journal(results_dir);
    let text = serde_json::to_string(&trace(run_id, phases, records, &journal))
        .map_err(std::io::Error::other)?;
    std::fs::write(results_dir.join(FILE), text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;
    use testkit_engine::report::{FaultRecord, FaultState, LockMode, LockRecord};
    use testkit_engine::resource::Event;

    fn at(time: u64, event: Event, kind: &str, name: &str) -> JournalEntry {
        let mut e = JournalEntry::new(event, kind, name, "r1", "t::faulty", None);
        e.time = time;
        e
    }

    /// A test's lock, resources and faults land where the format puts
    /// them: µs from the run's first event, a fault never undone as an
    /// instant, the fault's own journal entries not taken for a resource.
    #[test]
    fn locks_resources_and_faults_are_on_their_lanes_in_microseconds() {
        let mut phase = PhaseResult::new("up", Verdict::Pass, "up", std::time::Duration::ZERO);
        phase.at = 1_000;
        phase.duration_ms = 500;
        let mut r = TestRecord::new("r1", "t", "t::faulty");
        r.started_at_ms = 2_000;
        r.duration_ms = 1_000;
        r.lock = Some(LockRecord::new(LockMode::Exclusive, 2_100, 2_900, 100));
        let mut undone = FaultRecord::injected("worker-1", "pause worker-1".into());
        undone.injected_at_ms = 2_200;
        undone.undone_at_ms = Some(2_400);
        undone.state = FaultState::Undone;
        let mut held = FaultRecord::injected("worker-2", "stop worker-2".into());
        held.injected_at_ms = 2_500;
        r.faults = vec![undone, held];
        let journal = [
            at(2_300, Event::Pending, "sandbox", "ct-a"),
            at(2_350, Event::Created, "sandbox", "ct-a"),
            at(2_800, Event::Verified, "sandbox", "ct-a"),
            at(
                2_200,
                Event::Pending,
                testkit_engine::pod::fault::JOURNAL_KIND,
                "fault-01",
            ),
        ];
        let trace = trace("r1", &[phase], &[r], &journal);
        let events = trace["traceEvents"].as_array().unwrap();
        let find = |cat: &str, name: &str| {
            events
                .iter()
                .find(|e| e["cat"] == cat && e["name"] == name)
                .unwrap_or_else(|| panic!("no {cat} {name} in {trace}"))
        };
        assert_eq!(trace["otherData"]["start_ms"], 500);
        let test = find("test", "t::faulty");
        assert_eq!(
            (test["ts"].as_u64(), test["dur"].as_u64()),
            (Some(1_500_000), Some(1_000_000))
        );
        let lock = find("lock", "pod lock (exclusive)");
        assert_eq!(lock["ts"], 1_600_000);
        let resource = find("resource", "sandbox ct-a");
        assert_eq!(
            (resource["ts"].as_u64(), resource["dur"].as_u64()),
            (Some(1_800_000), Some(500_000))
        );
        assert_eq!(resource["pid"], RESOURCES);
        assert!(!events
            .iter()
            .any(|e| e["cat"] == "resource" && e["name"].as_str().unwrap().starts_with("fault")));
        let pause = find("fault", "pause worker-1");
        assert_eq!(
            (pause["ph"].as_str(), pause["dur"].as_u64()),
            (Some("X"), Some(200_000))
        );
        let stop = find("fault", "stop worker-2");
        assert_eq!(
            (stop["ph"].as_str(), stop["s"].as_str()),
            (Some("i"), Some("t"))
        );
        assert_ne!(pause["tid"], stop["tid"], "a lane per node");
        assert!(events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "worker-2"));
    }

    /// Slices that overlap without nesting (a lock released after its test
    /// ended, by the two processes' rounding; two tests' faults on one
    /// node) are each drawn whole: the later one on an overflow lane, and
    /// no lane holds two that cross.
    #[test]
    fn slices_that_would_cross_get_an_overflow_lane_not_a_new_time() {
        let mut r = TestRecord::new("r1", "t", "t::locked");
        (r.started_at_ms, r.duration_ms) = (6_007, 3);
        r.lock = Some(LockRecord::new(LockMode::Shared, 6_008, 6_011, 0));
        let mut first = FaultRecord::injected("node-1", "pause node-1".into());
        (first.injected_at_ms, first.undone_at_ms) = (6_007, Some(6_010));
        let mut second = FaultRecord::injected("node-1", "isolate node-1".into());
        (second.injected_at_ms, second.undone_at_ms) = (6_009, Some(6_012));
        r.faults = vec![first, second];
        let trace = trace("r1", &[], &[r], &[]);
        let mut lanes: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
        for e in trace["traceEvents"].as_array().unwrap() {
            if e["ph"] == "X" {
                let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
                let lane = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                lanes.entry(lane).or_default().push((ts, ts + dur));
            }
        }
        let lock = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["cat"] == "lock")
            .unwrap();
        assert_eq!(
            (lock["ts"].as_u64(), lock["dur"].as_u64()),
            (Some(1_000), Some(3_000))
        );
        for (lane, slices) in &lanes {
            for (i, a) in slices.iter().enumerate() {
                for b in &slices[i + 1..] {
                    let nested = a.1 <= b.0
                        || b.1 <= a.0
                        || (a.0 <= b.0 && b.1 <= a.1)
                        || (b.0 <= a.0 && a.1 <= b.1);
                    assert!(nested, "crossing slices on {lane:?}: {a:?} and {b:?}");
                }
            }
        }
        assert_eq!(
            lanes.len(),
            4,
            "test, its lock beside it, two lanes of node-1: {lanes:?}"
        );
    }

    /// A resource its test's process journaled before the runner saw the
    /// test start is drawn at its own time, not moved to the trace's start.
    #[test]
    fn what_comes_before_the_first_start_moves_the_start_not_itself() {
        let mut r = TestRecord::new("r1", "t", "t::faulty");
        (r.started_at_ms, r.duration_ms) = (1_000, 20);
        let journal = [
            at(995, Event::Pending, "sandbox", "ct-a"),
            at(1_001, Event::Verified, "sandbox", "ct-a"),
        ];
        let trace = trace("r1", &[], &[r], &journal);
        assert_eq!(trace["otherData"]["start_ms"], 995);
        let resource = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["cat"] == "resource")
            .unwrap();
        assert_eq!(
            (resource["ts"].as_u64(), resource["dur"].as_u64()),
            (Some(0), Some(6_000))
        );
    }
}
