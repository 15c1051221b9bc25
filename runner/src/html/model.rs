//! What a report shows, gathered from results folders: the records, the
//! journal, `verdict.jsonl` and `source.json` of each folder (one folder per
//! pod: a run, or a partition of a merged set).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use testkit_engine::report::{self, ReportError, TestRecord};
use testkit_engine::resource::{read_journal, Event, JournalEntry};

use super::source::Source;

/// One line of `verdict.jsonl`, as written by the `verdict` module.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct PhaseLine {
    pub(super) phase: String,
    pub(super) verdict: String,
    #[serde(default)]
    pub(super) evidence: String,
    #[serde(default)]
    pub(super) duration_ms: u64,
    #[serde(default)]
    pub(super) at: u64,
    #[serde(default)]
    pub(super) exit_code: Option<u8>,
    /// The run the line is of (absent in files of older runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) run_id: Option<String>,
    /// Whose fault a failed phase is (absent when it did not fail, and in
    /// files of older runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) category: Option<String>,
}

impl PhaseLine {
    /// When the phase started: it was decided at `at`, after `duration_ms`.
    pub(super) fn started_ms(&self) -> u64 {
        self.at.saturating_sub(self.duration_ms)
    }
}

/// A resource's life, from the journal: journaled (pending) until it was
/// verified gone, or leaked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Lifetime {
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) test: String,
    pub(super) from_ms: u64,
    /// The last event's time.
    pub(super) to_ms: u64,
    /// The last event: `verified`, `leaked`, …
    pub(super) fate: String,
    /// Whether nothing remains to be done for it.
    pub(super) settled: bool,
}

/// One results folder: a run on one pod.
pub(super) struct Part {
    pub(super) dir: PathBuf,
    /// The run shown, when the folder names one.
    pub(super) run: Option<String>,
    pub(super) records: Vec<TestRecord>,
    pub(super) phases: Vec<PhaseLine>,
    pub(super) lifetimes: Vec<Lifetime>,
    pub(super) source: Option<Source>,
    /// What the run's seal says of the folder.
    pub(super) seal: crate::seal::SealCheck,
}

impl Part {
    /// The run `run` of the folder `dir` (`None`: its latest, see
    /// [`crate::runs`]): its records, its resources, and its phases when
    /// `verdict.jsonl` is of that run. A folder other runs wrote into shows
    /// nothing of theirs.
    ///
    /// Its records are as every reading completes them ([`crate::runs::complete`]):
    /// a test that began and never ended fails, and, when `hold_to_seal`,
    /// so do results changed after a runner sealed them (the runner's own
    /// page, written before it seals the run, is not held to a seal).
    pub(super) fn read(
        dir: &Path,
        run: Option<&str>,
        hold_to_seal: bool,
    ) -> Result<Part, ReportError> {
        let all = report::read_records(dir)?;
        let journal = read_journal(dir);
        let starts = report::read_starts(dir)?;
        let run_id = match run {
            Some(id) => Some(id.to_owned()),
            None => crate::runs::runs_of(&all, &journal, &starts)
                .into_iter()
                .next()
                .map(|r| r.id),
        };
        let of_run = |id: &str| run_id.as_deref().is_none_or(|r| r == id);
        let mut records: Vec<TestRecord> = all.into_iter().filter(|r| of_run(&r.run_id)).collect();
        let seal = match &run_id {
            Some(id) => crate::runs::complete(dir, id, &mut records, hold_to_seal)?,
            None => crate::seal::SealCheck::Unsealed,
        };
        let journal: Vec<JournalEntry> = journal.into_iter().filter(|e| of_run(&e.run)).collect();
        let mut phases = read_phases(dir)?;
        // `verdict.jsonl` is the last runner run's: another run's phases
        // are not this run's. (A file of an older runner names no run.)
        if phases
            .iter()
            .any(|p| p.run_id.as_deref().is_some_and(|id| !of_run(id)))
        {
            phases.clear();
        }
        let lifetimes = lifetimes(&journal);
        Ok(Part {
            dir: dir.to_owned(),
            run: run_id,
            records,
            phases,
            lifetimes,
            source: Source::read(dir),
            seal,
        })
    }

    pub(super) fn phase(&self, name: &str) -> Option<&PhaseLine> {
        self.phases.iter().find(|p| p.phase == name)
    }

    /// The run's id: the one chosen, else the records say it; a run with
    /// none, its folder's name.
    pub(super) fn run_id(&self) -> String {
        self.run
            .clone()
            .filter(|id| !id.is_empty())
            .or_else(|| {
                self.records
                    .iter()
                    .map(|r| r.run_id.clone())
                    .find(|id| !id.is_empty())
            })
            .or_else(|| {
                self.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_default()
    }
}

fn read_phases(dir: &Path) -> Result<Vec<PhaseLine>, ReportError> {
    let path = dir.join("verdict.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        // A plain `cargo test` leaves no verdicts: the report says so.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ReportError::Io {
                path,
                cause: source,
            })
        }
    };
    // A run killed halfway may leave a last line cut short: the lines before
    // it are what it got through. A phase decided twice (the run's verdict,
    // made worse when an output could not be written) counts as decided
    // last.
    let mut phases: Vec<PhaseLine> = Vec::new();
    for line in text
        .lines()
        .filter_map(|l| serde_json::from_str::<PhaseLine>(l).ok())
    {
        match phases.iter_mut().find(|p| p.phase == line.phase) {
            Some(earlier) => *earlier = line,
            None => phases.push(line),
        }
    }
    Ok(phases)
}

/// Each resource's life from its journal entries, in order of creation.
pub(super) fn lifetimes(entries: &[JournalEntry]) -> Vec<Lifetime> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut lives: BTreeMap<(String, String), Lifetime> = BTreeMap::new();
    for e in entries {
        let key = (e.kind.clone(), e.name.clone());
        let life = lives.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            Lifetime {
                kind: e.kind.clone(),
                name: e.name.clone(),
                test: e.test.clone(),
                from_ms: e.time,
                to_ms: e.time,
                fate: String::new(),
                settled: false,
            }
        });
        // The reaper and the janitor write without a test name: the
        // creating test's name stays.
        if life.test.is_empty() {
            life.test = e.test.clone();
        }
        life.to_ms = life.to_ms.max(e.time);
        life.fate = event_word(e.event).to_owned();
        life.settled = e.event.is_settled();
    }
    order.into_iter().filter_map(|k| lives.remove(&k)).collect()
}

fn event_word(event: Event) -> &'static str {
    match event {
        Event::Pending => "pending",
        Event::Created => "created",
        Event::Failed => "creation failed",
        Event::Deleted => "deleted",
        Event::Verified => "verified gone",
        Event::Leaked => "leaked",
        Event::Kept => "kept",
        Event::Forgotten => "deleted by the test",
        Event::Reaped => "reaped",
        Event::GoneBeforeDelete => "gone before its delete (something else deleted it)",
        _ => "unknown",
    }
}

/// Lanes for the timeline: each test on the first lane free when it
/// starts, in start order. Under nextest every test is a process of its
/// own, so a lane is a slot of concurrency; under `cargo test`, a thread.
/// Returns each record's lane (tests that never ran get none).
pub(super) fn pack_lanes(records: &[&TestRecord]) -> (Vec<Option<usize>>, usize) {
    let mut order: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].started_at_ms > 0)
        .collect();
    order.sort_by_key(|&i| (records[i].started_at_ms, records[i].duration_ms));
    let mut lane_free_at: Vec<u64> = Vec::new();
    let mut lanes = vec![None; records.len()];
    for i in order {
        let r = records[i];
        let end = r.started_at_ms + r.duration_ms.max(1);
        let lane = match lane_free_at.iter().position(|&t| t <= r.started_at_ms) {
            Some(l) => l,
            None => {
                lane_free_at.push(0);
                lane_free_at.len() - 1
            }
        };
        lane_free_at[lane] = end;
        lanes[i] = Some(lane);
    }
    (lanes, lane_free_at.len())
}

#[cfg(test)]
mod unit {
    use super::*;

    fn rec(name: &str, start: u64, dur: u64) -> TestRecord {
        let mut r = TestRecord::new("r1", "b", name);
        r.started_at_ms = start;
        r.duration_ms = dur;
        r
    }

    #[test]
    fn overlapping_tests_get_lanes_of_their_own_and_free_lanes_are_reused() {
        let rs = [
            rec("a", 1000, 100),
            rec("b", 1050, 100),
            rec("c", 1120, 10),
            rec("never", 0, 0),
            rec("d", 1200, 10),
        ];
        let refs: Vec<&TestRecord> = rs.iter().collect();
        let (lanes, count) = pack_lanes(&refs);
        assert_eq!(lanes, [Some(0), Some(1), Some(0), None, Some(0)]);
        assert_eq!(count, 2);
    }

    #[test]
    fn a_resource_lives_from_its_first_to_its_last_event_and_keeps_its_test() {
        let entry = |event, name: &str, test: &str, time| {
            let mut e: JournalEntry = serde_json::from_value(serde_json::json!({
                "event": "pending", "kind": "sandbox", "name": name, "run": "r1",
                "test": test, "pid": 7, "time": time
            }))
            .unwrap();
            e.event = event;
            e
        };
        let lives = lifetimes(&[
            entry(Event::Pending, "x", "t::a", 10),
            entry(Event::Pending, "y", "t::b", 11),
            entry(Event::Created, "x", "t::a", 12),
            entry(Event::Verified, "x", "t::a", 30),
            entry(Event::Leaked, "y", "", 40),
        ]);
        assert_eq!(lives.len(), 2);
        assert_eq!(
            (lives[0].name.as_str(), lives[0].from_ms, lives[0].to_ms),
            ("x", 10, 30)
        );
        assert!(lives[0].settled);
        assert_eq!(lives[0].fate, "verified gone");
        assert_eq!(
            (lives[1].test.as_str(), lives[1].fate.as_str()),
            ("t::b", "leaked")
        );
        assert!(!lives[1].settled);
    }
}
