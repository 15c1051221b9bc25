//! The journal: one JSON line per resource event, appended to
//! `<results>/journal/<binary>-<pid>.jsonl` by each test process, *before* the
//! request that creates a resource is sent. Whatever kills the process, what
//! it may have created is on record for its reaper, the runner and the
//! janitor. Fields are only ever added.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// What happened to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// About to send the creating request.
    Pending,
    /// The creating request succeeded.
    Created,
    /// The creating request failed; the resource may still exist.
    Failed,
    /// The pod accepted the deletion.
    Deleted,
    /// The pod says it is gone.
    Verified,
    /// It could not be deleted or verified gone.
    Leaked,
    /// `TESTKIT_KEEP` kept it.
    Kept,
    /// The test deleted it itself.
    Forgotten,
    /// The reaper of a dead test process deleted it and verified it gone.
    Reaped,
    /// Its first delete found it already gone: something else deleted it
    /// (verified gone, but not by this delete).
    GoneBeforeDelete,
}

impl Event {
    /// Whether nothing remains to be done for the resource.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            Event::Verified
                | Event::Kept
                | Event::Forgotten
                | Event::Reaped
                | Event::GoneBeforeDelete
        )
    }
}

/// One line of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JournalEntry {
    /// What happened.
    pub event: Event,
    /// The resource kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The run id.
    pub run: String,
    /// The test's full name (empty for the reaper's and janitor's entries).
    #[serde(default)]
    pub test: String,
    /// The process that wrote the entry.
    pub pid: u32,
    /// When that process started, in clock ticks since boot: with `pid`,
    /// what tells whether it still runs (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
    /// Milliseconds since the Unix epoch.
    pub time: u64,
    /// An error or a reason, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The id the service assigned, once known (on `created`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl JournalEntry {
    /// An entry of the run `run_id`, written by the test `test`.
    pub fn new(
        event: Event,
        kind: &str,
        name: &str,
        run: &str,
        test: &str,
        detail: Option<String>,
    ) -> JournalEntry {
        JournalEntry {
            event,
            kind: kind.to_owned(),
            name: name.to_owned(),
            run: run.to_owned(),
            test: test.to_owned(),
            pid: std::process::id(),
            start_ticks: own_start_ticks(),
            time: now_ms(),
            detail,
            id: None,
        }
    }

    /// The same entry, with the resource's server-assigned id.
    pub fn with_id(mut self, id: Option<&str>) -> JournalEntry {
        self.id = id.map(str::to_owned);
        self
    }
}

/// This process's start time, read once.
fn own_start_ticks() -> Option<u64> {
    static TICKS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| crate::process::start_ticks(std::process::id() as i32))
}

/// The processes other than this one that wrote `entries` and still run
/// (the same pid, started at the same time), each once, with the test it
/// wrote for (empty for a reaper's or a janitor's entries). Entries of
/// older journals, without a start time, cannot be told from a reused pid
/// and name no one.
pub(crate) fn live_writers(entries: &[JournalEntry]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut seen: Vec<(u32, u64)> = Vec::new();
    let mut live = Vec::new();
    for e in entries {
        let Some(ticks) = e.start_ticks else { continue };
        if e.pid == me || seen.contains(&(e.pid, ticks)) {
            continue;
        }
        seen.push((e.pid, ticks));
        if crate::process::is_running(e.pid as i32, ticks) {
            live.push((e.pid, e.test.clone()));
        }
    }
    live
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The journal folder of a results folder.
pub fn dir(results_dir: &Path) -> PathBuf {
    results_dir.join("journal")
}

/// An append-only journal file.
pub struct Journal {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Journal {
    /// The journal in the file `path`, created on the first append.
    pub fn at(path: PathBuf) -> Journal {
        Journal {
            path,
            file: Mutex::new(None),
        }
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line. Each line goes to the kernel in one `write` on an
    /// `O_APPEND` file, so it survives the process being killed right after.
    pub fn append(&self, entry: &JournalEntry) -> std::io::Result<()> {
        let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            if let Some(parent) = self.path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            *file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
        }
        let f = file.as_mut().expect("opened above");
        f.write_all(line.as_bytes())?;
        f.flush()
    }
}

/// The journal of a test process of `run`: one file per process.
pub fn for_process(run: &crate::run::Run) -> Journal {
    Journal::at(dir(&run.results_dir).join(format!("{}-{}.jsonl", run.binary, std::process::id())))
}

/// Every entry of every journal of a results folder, in time order. Lines that do not parse (a line cut short by a
/// killed process) are skipped.
pub fn read_journal(results_dir: &Path) -> Vec<JournalEntry> {
    let Ok(entries) = std::fs::read_dir(dir(results_dir)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut all: Vec<JournalEntry> = files.iter().flat_map(|f| read_file(f)).collect();
    // Several processes write (tests, reapers, the janitor): time orders
    // them; the sort is stable, so a file's own order breaks ties.
    all.sort_by_key(|e| e.time);
    all
}

/// The entries of one journal file; lines that do not parse are skipped.
pub fn read_file(path: &Path) -> Vec<JournalEntry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<JournalEntry>(line).ok())
        .collect()
}

/// A resource a journal says may still exist.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outstanding {
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The run that created it.
    pub run: String,
    /// Its server-assigned id, when a journal entry recorded one.
    pub id: Option<String>,
}

/// The resources whose last event leaves something to do, in order of
/// first appearance (creation order).
pub fn outstanding(entries: &[JournalEntry]) -> Vec<Outstanding> {
    let mut order: Vec<Outstanding> = Vec::new();
    let mut last: std::collections::HashMap<(String, String), Event> =
        std::collections::HashMap::new();
    for e in entries {
        let key = (e.kind.clone(), e.name.clone());
        if !last.contains_key(&key) {
            order.push(Outstanding {
                kind: e.kind.clone(),
                name: e.name.clone(),
                run: e.run.clone(),
                id: None,
            });
        }
        if let Some(id) = &e.id {
            if let Some(o) = order
                .iter_mut()
                .find(|o| o.kind == e.kind && o.name == e.name)
            {
                o.id = Some(id.clone());
            }
        }
        last.insert(key, e.event);
    }
    order.retain(|o| !last[&(o.kind.clone(), o.name.clone())].is_settled());
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_settled_resources_drop_out() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::at(super::dir(dir.path()).join("t-1.jsonl"));
        let e = |event, name: &str| JournalEntry::new(event, "sandbox", name, "run1", "t::a", None);
        for entry in [
            e(Event::Pending, "ct-run1-a-01"),
            e(Event::Pending, "ct-run1-a-02"),
            e(Event::Created, "ct-run1-a-01"),
            e(Event::Pending, "ct-run1-a-03"),
            e(Event::Verified, "ct-run1-a-02"),
            e(Event::Leaked, "ct-run1-a-03"),
        ] {
            journal.append(&entry).unwrap();
        }
        // A line cut short by a killed process is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(journal.path())
            .unwrap()
            .write_all(b"{\"event\":\"pend")
            .unwrap();
        let entries = read_journal(dir.path());
        assert_eq!(entries.len(), 6);
        let names: Vec<String> = outstanding(&entries).into_iter().map(|o| o.name).collect();
        assert_eq!(names, ["ct-run1-a-01", "ct-run1-a-03"]);
        let line = std::fs::read_to_string(journal.path()).unwrap();
        assert!(
            line.starts_with(
                "{\"event\":\"pending\",\"kind\":\"sandbox\",\"name\":\"ct-run1-a-01\""
            ),
            "{line}"
        );
    }

    #[test]
    fn a_writer_is_live_only_with_its_own_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let pid = child.id();
        let ticks = crate::process::start_ticks(pid as i32).unwrap();
        let entry = |pid: u32, start_ticks: Option<u64>| JournalEntry {
            pid,
            start_ticks,
            ..JournalEntry::new(
                Event::Pending,
                "sandbox",
                "ct-run1-a-01",
                "run1",
                "t::a",
                None,
            )
        };
        let live = live_writers(&[entry(pid, Some(ticks))]);
        // The same pid, started at another time, is another process: a
        // reused pid; and an entry without a start time proves nothing.
        let reused = live_writers(&[entry(pid, Some(ticks + 1)), entry(pid, None)]);
        let _ = child.kill();
        let _ = child.wait();
        let dead = live_writers(&[entry(pid, Some(ticks))]);
        assert_eq!(live, [(pid, "t::a".to_owned())]);
        assert!(reused.is_empty(), "{reused:?}");
        assert!(dead.is_empty(), "{dead:?}");
    }
}
