//! A test's trace: begun with the test, ended after its cleanup, kept by
//! `TESTKIT_TRACE` (see `testkit_engine::trace` for what is recorded).

use std::path::Path;
use std::time::Instant;

use crate::engine::report::TestRecord;
use crate::engine::settings::TracePolicy;
use crate::engine::trace::{active, EntryKind, Recorder, FILE_NAME};

/// Starts recording the test `name` on this thread; `None` when traces are
/// off.
pub(crate) fn begin(name: &str, policy: TracePolicy) -> Option<Recorder> {
    if policy == TracePolicy::Off {
        return None;
    }
    let recorder = Recorder::start(name);
    active::enter(&recorder);
    Some(recorder)
}

/// Ends the recording: the failure (when the test failed) is its last
/// entry, and the trace is written to the test's artifacts folder and named
/// in its record when the policy keeps it.
pub(crate) fn finish(
    recorder: Option<Recorder>,
    policy: TracePolicy,
    artifacts: &Path,
    record: &mut TestRecord,
) {
    let Some(recorder) = recorder else { return };
    let failed = record.outcome.fails();
    if failed {
        let message = record.message.clone().unwrap_or_default();
        let first = message.lines().next().unwrap_or("failed").to_owned();
        recorder.add(
            EntryKind::Failure,
            Instant::now(),
            std::time::Duration::ZERO,
            first,
            false,
            crate::engine::trace::cap(&message),
            None,
        );
    }
    active::leave();
    let keep = match policy {
        TracePolicy::Off => false,
        TracePolicy::RetainOnFailure => failed,
        TracePolicy::On => true,
    };
    if !keep {
        remove_frames(artifacts);
        return;
    }
    // Answers the test let go of unread are still being read for it.
    recorder.settle(std::time::Duration::from_secs(3));
    let path = artifacts.join(FILE_NAME);
    match recorder.snapshot().write(&path) {
        Ok(()) => record.trace = Some(path.display().to_string()),
        Err(e) => eprintln!(
            "testkit: {}: the trace could not be written to {}: {e}",
            record.name,
            path.display()
        ),
    }
}

/// Removes the film frames of a trace that is not kept: without it they
/// are only clutter in the artifacts folder.
fn remove_frames(artifacts: &Path) {
    let Ok(files) = std::fs::read_dir(artifacts) else {
        return;
    };
    for f in files.filter_map(|f| f.ok()) {
        let name = f.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("trace-frame-") && name.ends_with(".jpg") {
            let _ = std::fs::remove_file(f.path());
        }
    }
}

/// A `cx.create` of `kind` `name` that began at `started`: journaled, then
/// its request, with how it ended.
pub(crate) fn created<T>(kind: &str, name: &str, started: Instant, result: &crate::Result<T>) {
    let (ok, detail) = match result {
        Ok(_) => (true, String::new()),
        Err(e) => (false, format!("{e:#}")),
    };
    let verdict = if ok { "created" } else { "failed" };
    crate::engine::trace::step::record(
        EntryKind::Resource,
        started,
        format!("create {kind} {name}: {verdict}"),
        ok,
        detail,
    );
}

/// The test's cleanup, from `started` to now: its resources' fates.
pub(crate) fn cleaned_up(started: Instant, cleanup: &crate::tracker::CleanupSummary) {
    let fates: Vec<String> = cleanup
        .resources
        .iter()
        .map(|r| format!("{}/{}: {:?}", r.kind, r.name, r.state))
        .collect();
    let ok = !matches!(cleanup.state, crate::engine::report::CleanupState::Failed);
    crate::engine::trace::step::record(
        EntryKind::Resource,
        started,
        format!("cleanup: {:?}", cleanup.state).to_lowercase(),
        ok,
        fates.join("\n"),
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_frames_of_a_trace_not_kept_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "trace-frame-001.jpg",
            "trace-frame-002.jpg",
            "page.png",
            "frame.jpg",
        ] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        super::remove_frames(dir.path());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["frame.jpg", "page.png"]);
    }
}
