//! Process groups a test owns beyond its own process (its browsers): each is
//! journaled as it starts, beside the resource journal, in
//! `<results>/journal/<binary>-<pid>.groups` (one JSON line per event), and
//! released once its owner ended it and verified it gone. Whatever kills the
//! test process, its reaper ends every group still on record there (by
//! process group and start time, never by name), so that no browser outlives
//! a run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a reaped group gets between SIGTERM and SIGKILL.
const REAP_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum GroupEvent {
    Started,
    Ended,
}

#[derive(Debug, Serialize, Deserialize)]
struct GroupEntry {
    event: GroupEvent,
    pgid: i32,
    #[serde(default)]
    start_ticks: Option<u64>,
    /// A folder of the group's to delete once it is gone (a browser profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir: Option<PathBuf>,
    /// What the group is, for messages.
    what: String,
    /// `[var, value]`: an environment entry every process of the group
    /// carries, which finds those that left it (and were orphaned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tag: Option<(String, String)>,
}

/// The groups file beside a resource journal.
fn path_beside(journal: &Path) -> PathBuf {
    journal.with_extension("groups")
}

fn append(path: &Path, entry: &GroupEntry) -> std::io::Result<()> {
    let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    line.push('\n');
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // One `write` on an `O_APPEND` file: the line survives a kill right after.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// Puts the group `pgid` (its leader started at `start_ticks`) on record for
/// this process's reaper. `dir` is deleted once the group is gone; `tag`
/// (`var`, `value`) is in the environment of every process of the group.
/// `journal` is the owning process's journal; testkit's `own_group` also
/// starts the reaper.
pub fn record_started(
    journal: &Path,
    what: &str,
    pgid: i32,
    start_ticks: Option<u64>,
    dir: Option<&Path>,
    tag: Option<(&str, &str)>,
) -> std::io::Result<()> {
    let path = path_beside(journal);
    append(
        &path,
        &GroupEntry {
            event: GroupEvent::Started,
            pgid,
            start_ticks,
            dir: dir.map(Path::to_owned),
            what: what.to_owned(),
            tag: tag.map(|(k, v)| (k.to_owned(), v.to_owned())),
        },
    )
}

/// Takes the group `pgid` off the record: its owner ended it and verified it.
pub fn release_group(journal: &Path, what: &str, pgid: i32) {
    let path = path_beside(journal);
    let entry = GroupEntry {
        event: GroupEvent::Ended,
        pgid,
        start_ticks: None,
        dir: None,
        what: what.to_owned(),
        tag: None,
    };
    if let Err(e) = append(&path, &entry) {
        eprintln!(
            "testkit: could not record the end of {what} (group {pgid}) in {}: {e}",
            path.display()
        );
    }
}

/// The reaper's part: ends every group the journal `journal` holds that was
/// not released, and verifies it gone. Returns how many survived SIGKILL.
pub async fn reap_groups(journal: &Path) -> usize {
    let path = path_beside(journal);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return 0;
    };
    let mut open: Vec<GroupEntry> = Vec::new();
    for entry in text
        .lines()
        .filter_map(|l| serde_json::from_str::<GroupEntry>(l).ok())
    {
        match entry.event {
            GroupEvent::Started => open.push(entry),
            GroupEvent::Ended => open.retain(|o| o.pgid != entry.pgid),
        }
    }
    let mut survivors = 0;
    for group in open {
        let GroupEntry {
            pgid,
            start_ticks,
            dir,
            what,
            tag,
            ..
        } = group;
        let strays = tag
            .as_ref()
            .map(|(k, v)| crate::process::with_env(k, v))
            .unwrap_or_default();
        let ended = match crate::process::terminate_group(pgid, start_ticks, REAP_GRACE).await {
            // What left the group goes too (the group's own pid is not
            // signalled again: terminate_group saw to it, or it is not ours).
            Ok(ended) => crate::process::kill_tree(0, &strays, REAP_GRACE * 5)
                .await
                .map(|()| (ended, strays.len()))
                .map_err(|left| {
                    left.into_iter()
                        .map(|p| (p, crate::process::command_of(p)))
                        .collect()
                }),
            Err(left) => Err(left),
        };
        match ended {
            Ok((ended, strays)) => {
                eprintln!(
                    "testkit reaper: ended {what} (process group {pgid}, {} process(es), {} killed; {strays} outside the group)",
                    ended.processes,
                    ended.killed.len()
                );
                if let Some(dir) = &dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                let _ = append(
                    &path,
                    &GroupEntry {
                        event: GroupEvent::Ended,
                        pgid,
                        start_ticks: None,
                        dir: None,
                        what,
                        tag: None,
                    },
                );
            }
            Err(left) => {
                survivors += left.len();
                eprintln!(
                    "testkit reaper: {what} (process group {pgid}) survived SIGKILL: {left:?}"
                );
            }
        }
    }
    survivors
}
