//! `#[testkit::test(exclusive)]`: the exclusive fixture's two exclusive and
//! four shared tests, run as nextest's separate processes and as
//! `cargo test`'s threads. Their records say when each held the pod lock:
//! no exclusive test's hold may overlap any other test's, and shared tests
//! must overlap each other, so that neither a lock that excludes nothing nor
//! one that serializes everything passes. Tests skipped before they run
//! take no lock.

use std::time::Duration;

use testkit_engine::report::{read_records, LockMode, LockRecord, Summary, TestRecord};

use crate::fixture::{self, fixture, results_dir};
use crate::{check_records, require_nextest};

/// Runs the fixture with `args` (its lock files in a folder of the test's
/// own), checks every test passed, and returns its records.
fn run_fixture(tag: &str, args: &[&str]) -> Vec<TestRecord> {
    let fx = fixture("exclusive");
    let (results, run_id) = results_dir(tag);
    let secrets = tempfile::tempdir().unwrap();
    let mut cmd = fx.cargo(args);
    cmd.env("TESTKIT_RESULTS_DIR", results.path())
        .env("TESTKIT_RUN_ID", &run_id)
        .env("TESTKIT_SECRETS_DIR", secrets.path());
    let out = fixture::run_bounded(cmd, Duration::from_secs(20 * 60));
    let exit = &fx.expected.binaries["exclusive"];
    let want = if args[0] == "test" {
        exit.cargo_test_exit
    } else {
        exit.nextest_exit
    };
    assert_eq!(out.code, want, "cargo {args:?}: {}", out.describe());
    check_records(results.path(), &run_id, &fx.expected, &["exclusive"]);
    // The lock files were in the secrets dir, not the results folder.
    assert!(secrets.path().join("pod.lock").is_file());
    assert!(!results.path().join("pod.lock").exists());
    read_records(results.path()).unwrap()
}

fn lock_of(record: &TestRecord) -> LockRecord {
    record
        .lock
        .unwrap_or_else(|| panic!("{} has no lock: {record:#?}", record.name))
}

/// Strictly: holds that only touch (one let go in the millisecond the other
/// took it) do not overlap.
fn overlap(a: &LockRecord, b: &LockRecord) -> bool {
    a.acquired_at_ms < b.released_at_ms && b.acquired_at_ms < a.released_at_ms
}

/// The holds of `records`: exclusive ones alone, shared ones together; a
/// test skipped before it ran held none.
fn check_holds(how: &str, records: &[TestRecord]) {
    let (skipped, records): (Vec<TestRecord>, Vec<TestRecord>) = records
        .iter()
        .cloned()
        .partition(|r| r.name.contains("skipped"));
    assert_eq!(skipped.len(), 2, "{how}: {skipped:#?}");
    for r in &skipped {
        assert_eq!(r.lock, None, "{how}: {} took the lock: {r:#?}", r.name);
    }
    let records = &records[..];
    let timeline: Vec<String> = records
        .iter()
        .map(|r| {
            let l = lock_of(r);
            let mode = l.mode.as_str();
            let (from, to, wait) = (l.acquired_at_ms, l.released_at_ms, l.wait_ms);
            format!("{}: {mode} {from}..{to} (waited {wait} ms)", r.name)
        })
        .collect();
    let timeline = timeline.join("\n");
    for r in records {
        let want = if r.name.contains("faults") {
            LockMode::Exclusive
        } else {
            LockMode::Shared
        };
        assert_eq!(lock_of(r).mode, want, "{how}: {}\n{timeline}", r.name);
    }
    let (exclusive, shared): (Vec<&TestRecord>, Vec<&TestRecord>) = records
        .iter()
        .partition(|r| lock_of(r).mode == LockMode::Exclusive);
    assert_eq!((exclusive.len(), shared.len()), (2, 4), "{how}");
    for e in &exclusive {
        for other in records.iter().filter(|o| o.name != e.name) {
            assert!(
                !overlap(&lock_of(e), &lock_of(other)),
                "{how}: {} held the pod while {} did:\n{timeline}",
                e.name,
                other.name
            );
        }
    }
    let together = shared.iter().enumerate().any(|(i, a)| {
        shared[i + 1..]
            .iter()
            .any(|b| overlap(&lock_of(a), &lock_of(b)))
    });
    assert!(
        together,
        "{how}: no two shared tests held the pod at once: the lock serialized them\n{timeline}"
    );
    // One exclusive test waited for the other, longer than its timeout
    // allows its body, and passed: the wait counted against no timeout.
    let longest = exclusive.iter().map(|r| lock_of(r).wait_ms).max().unwrap();
    assert!(
        longest >= 500,
        "{how}: no exclusive test waited\n{timeline}"
    );
    let waited = exclusive
        .iter()
        .find(|r| lock_of(r).wait_ms == longest)
        .unwrap();
    assert!(
        waited
            .output
            .contains("waiting for the pod's exclusive lock")
            && waited
                .output
                .contains("took the pod's exclusive lock after"),
        "{how}: the wait is not in the log of {}:\n{}",
        waited.name,
        waited.output
    );
    // Body and cleanup lie inside the hold, the wait before it.
    for r in records {
        let l = lock_of(r);
        assert!(
            r.started_at_ms <= l.acquired_at_ms
                && l.released_at_ms <= r.started_at_ms + r.duration_ms + 1,
            "{how}: {} held the lock outside its own run: {r:#?}",
            r.name
        );
    }
    let summary = Summary::from_records(records, None);
    assert_eq!(summary.exclusive_tests, 2, "{how}");
    assert!(summary.exclusive_held_ms >= 1_200, "{how}: {summary}");
    assert!(
        summary
            .to_string()
            .contains("exclusive: 2 tests held the pod to themselves for "),
        "{how}: {summary}"
    );
}

#[test]
fn exclusive_tests_have_the_pod_to_themselves_across_nextest_processes() {
    require_nextest();
    let records = run_fixture(
        "exclnext",
        &["nextest", "run", "--no-fail-fast", "--test-threads", "6"],
    );
    check_holds("cargo nextest run --test-threads 6", &records);
}

#[test]
fn exclusive_tests_have_the_pod_to_themselves_across_cargo_test_threads() {
    let records = run_fixture("excltest", &["test", "--", "--test-threads", "4"]);
    check_holds("cargo test -- --test-threads 4", &records);
}
