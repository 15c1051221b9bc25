//! Resources against a real `sandboxd`: whatever ends a test (panic, timeout,
//! transient and permanent delete failures, slow deletes with a lagging list,
//! SIGKILL, SIGTERM, SIGINT, a second signal during cleanup), the pod ends up
//! listing nothing of the run; budgets hold across test processes;
//! `TESTKIT_KEEP` keeps what it says; no process of a run is left behind.
//!
//! Each test starts its own pod (faults differ) and runs part of the fixture
//! suite `tests/fixtures/resources-suite` with its own run id.

#[path = "resources/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use support::{listed, wait_for, Run, Sandboxd, PREFIX};
use testkit_engine::resource::{Event, JanitorTarget, JournalEntry, Kinds};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Polls the pod's list (bounded) until it shows nothing of the run, and
/// asks for every journaled name by name.
fn assert_pod_clean(pod: &Sandboxd, run: &Run, limit: Duration) {
    let rt = rt();
    let client = rt.block_on(pod.connect());
    let mut last = Default::default();
    wait_for("the pod to list nothing of the run", limit, || {
        last = rt.block_on(listed(&client, &run.id));
        last.is_empty()
    });
    for name in run.journaled_names() {
        assert!(
            !rt.block_on(support::exists(&client, &name)),
            "{name} still exists"
        );
    }
}

fn events_of(run: &Run, event: Event) -> Vec<String> {
    run.journal()
        .into_iter()
        .filter(|e| e.event == event)
        .map(|e| e.name)
        .collect()
}

#[test]
fn a_panic_holding_five_sandboxes_deletes_all_five_newest_first() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("panicfive");
    let (status, out) = run.exact(&pod, "panics_holding_five");
    assert!(!status.success(), "{out}");
    let record = run.record("panics_holding_five");
    assert_eq!(record["failure_kind"], "panic", "{record:#}");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    let resources = record["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 5);
    assert!(
        resources.iter().all(|r| r["state"] == "deleted"),
        "{record:#}"
    );
    let created = events_of(&run, Event::Created);
    let mut verified = events_of(&run, Event::Verified);
    verified.reverse();
    assert_eq!(created, verified, "cleanup is not LIFO");
    for name in &created {
        assert!(
            testkit_engine::resource::carries_run_id(name, PREFIX, &run.id) && name.len() <= 63,
            "{name}"
        );
    }
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

#[test]
fn a_timed_out_test_is_cleaned_up() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("timeout");
    let (status, out) = run.exact(&pod, "times_out");
    assert!(!status.success(), "{out}");
    let record = run.record("times_out");
    assert_eq!(record["failure_kind"], "timeout", "{record:#}");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    assert_eq!(events_of(&run, Event::Verified).len(), 1);
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// Runs `creates_two_and_passes` against sandboxd with `fault`: it passes,
/// its cleanup verified and the pod clean after; its log.
fn passes_and_cleans_up_under(fault: &str, tag: &str) -> (Run, String) {
    let pod = Sandboxd::start(&[fault]);
    let run = Run::new(tag);
    let (status, out) = run.exact(&pod, "creates_two_and_passes");
    assert!(status.success(), "{out}");
    let record = run.record("creates_two_and_passes");
    assert_eq!(record["outcome"], "passed", "{record:#}");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
    let log = record["output"].as_str().unwrap().to_owned();
    (run, log)
}

#[test]
fn transient_delete_failures_are_retried() {
    let (_, log) = passes_and_cleans_up_under("delete-fail=3", "deletefail");
    assert_eq!(log.matches("retrying in").count(), 3, "{log}");
}

#[test]
fn a_delete_that_answers_gone_for_a_resource_still_there_is_sent_again() {
    // The first delete answers 404 and deletes nothing: the resource is
    // neither "deleted by something else" nor leaked; one more delete
    // removes it, and the cleanup is verified.
    let (run, log) = passes_and_cleans_up_under("delete-miss=1", "deletemiss");
    let again = "its delete answered that it is gone, but it is still there";
    assert_eq!(log.matches(again).count(), 1, "{log}");
    assert!(!log.contains("something else deleted it"), "{log}");
    assert_eq!(events_of(&run, Event::Verified).len(), 2);
}

#[test]
fn slow_deletes_and_a_lagging_list_are_waited_out() {
    let pod = Sandboxd::start(&["delete-delay=1s", "list-lag=2s"]);
    let run = Run::new("slowlag");
    let (status, out) = run.exact(&pod, "creates_two_and_passes");
    assert!(status.success(), "{out}");
    let record = run.record("creates_two_and_passes");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    // The list lags: it may show deleted names for a while, never forever.
    assert_pod_clean(&pod, &run, Duration::from_secs(15));
}

#[test]
fn a_delete_that_always_fails_is_reported_as_a_leak_by_name_and_the_janitor_cleans_up() {
    let mut pod = Sandboxd::start(&["delete-fail=1000"]);
    let run = Run::new("leak");
    let (status, out) = run.exact(&pod, "creates_two_and_passes");
    assert!(!status.success(), "{out}");
    let record = run.record("creates_two_and_passes");
    assert_eq!(record["failure_kind"], "cleanup", "{record:#}");
    assert_eq!(record["cleanup"], "failed", "{record:#}");
    let message = record["message"].as_str().unwrap();
    let names = run.journaled_names();
    assert_eq!(names.len(), 2);
    for name in &names {
        assert!(
            message.contains(&format!("leaked sandbox `{name}`")),
            "{message}"
        );
    }
    assert!(message.contains("503"), "{message}");
    assert_eq!(events_of(&run, Event::Leaked).len(), 2);

    // The same pod without the fault: the janitor deletes by exact name.
    let home = pod.home.clone();
    pod.stop();
    let pod = Sandboxd::start_in(&home, &[]);
    let rt = rt();
    let client = rt.block_on(pod.connect());
    assert_eq!(rt.block_on(listed(&client, &run.id)), names);
    let config = testkit_engine::config::SuiteConfig::load(&support::suite_dir()).unwrap();
    let kinds = Kinds::from_config(&config, &support::suite_dir().join("testkit.toml")).unwrap();
    let target = JanitorTarget::Run {
        run_id: run.id.clone(),
        results_dir: Some(run.results.clone()),
    };
    let report = rt.block_on(testkit_engine::resource::janitor(
        &client, &kinds, PREFIX, &target,
    ));
    assert!(report.is_clean(), "{report:?}");
    let deleted: std::collections::BTreeSet<String> =
        report.deleted.iter().map(|l| l.name.clone()).collect();
    assert_eq!(deleted, names);
    assert!(testkit_engine::resource::outstanding(&run.journal()).is_empty());
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// Starts `waits_to_be_killed` and returns the fixture's process and the
/// test binary's pid once the journal shows its three sandboxes created.
fn start_waiting_test(pod: &Sandboxd, run: &Run) -> (std::process::Child, i32) {
    start_waiting_test_with(pod, run, &[])
}

/// [`start_waiting_test`] with `env` set for the test process.
fn start_waiting_test_with(
    pod: &Sandboxd,
    run: &Run,
    env: &[(&str, &str)],
) -> (std::process::Child, i32) {
    let child = run
        .command(
            pod,
            false,
            &[
                "--test",
                "resources",
                "--",
                "--exact",
                "resources::waits_to_be_killed",
            ],
        )
        .envs(env.iter().copied())
        .spawn()
        .unwrap();
    wait_for(
        "three created sandboxes in the journal",
        Duration::from_secs(120),
        || events_of(run, Event::Created).len() == 3,
    );
    let pid = run.journal()[0].pid as i32;
    (child, pid)
}

#[test]
fn a_test_process_killed_with_sigkill_is_reaped() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("sigkill");
    let (child, pid) = start_waiting_test(&pod, &run);
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    // The reaper, in its own session, deletes what the journal holds.
    assert_pod_clean(&pod, &run, Duration::from_secs(10));
    let pgid = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    run.assert_no_strays(Some(pgid));
    let reaped = events_of(&run, Event::Reaped);
    assert_eq!(reaped.len(), 3, "{:#?}", run.journal());
    assert!(run
        .journal()
        .iter()
        .filter(|e| e.event == Event::Reaped)
        .all(|e| e.pid as i32 != pid));
}

#[test]
fn sigterm_cleans_up_within_the_grace_period() {
    let pod = Sandboxd::start(&["delete-delay=300ms"]);
    let run = Run::new("sigterm");
    let (child, pid) = start_waiting_test_with(&pod, &run, &[("TESTKIT_GRACE", "30s")]);
    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    let pgid = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    // testkit's handler ran, with the grace the setting gave it, and
    // finished within it: nothing was left to the reaper.
    assert!(
        text.contains("SIGTERM received: deleting this process's resources (grace 30"),
        "{text}"
    );
    assert!(!text.contains("the reaper takes over"), "{text}");
    run.assert_no_strays(Some(pgid));
    // The test process itself verified all three gone: nothing for the reaper.
    let verified: Vec<u32> = run
        .journal()
        .iter()
        .filter(|e| e.event == Event::Verified)
        .map(|e| e.pid)
        .collect();
    assert_eq!(verified, [pid as u32; 3], "{:#?}", run.journal());
    assert!(events_of(&run, Event::Reaped).is_empty());
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// The exit code cargo reports for the test binary it ran: `Some(code)`
/// for an exit, `None` when it died of a signal or cargo said nothing.
fn test_binary_exit_code(cargo_stderr: &str) -> Option<i32> {
    cargo_stderr
        .split("(exit status: ")
        .nth(1)?
        .split(')')
        .next()?
        .parse()
        .ok()
}

/// Ctrl-C to a test process mid-test is SIGTERM's twin: the process itself
/// deletes and verifies every resource within the grace, and exits 130.
#[test]
fn sigint_cleans_up_within_the_grace_period() {
    let pod = Sandboxd::start(&["delete-delay=300ms"]);
    let run = Run::new("sigint");
    let (child, pid) = start_waiting_test_with(&pod, &run, &[("TESTKIT_GRACE", "30s")]);
    kill(Pid::from_raw(pid), Signal::SIGINT).unwrap();
    let pgid = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("SIGINT received: deleting this process's resources (grace 30"),
        "{text}"
    );
    assert!(!text.contains("the reaper takes over"), "{text}");
    assert_eq!(test_binary_exit_code(&text), Some(130), "{text}");
    run.assert_no_strays(Some(pgid));
    let verified: Vec<u32> = run
        .journal()
        .iter()
        .filter(|e| e.event == Event::Verified)
        .map(|e| e.pid)
        .collect();
    assert_eq!(verified, [pid as u32; 3], "{:#?}", run.journal());
    assert!(events_of(&run, Event::Reaped).is_empty());
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// A second Ctrl-C or SIGTERM while the first one's cleanup runs exits at
/// once, with the code of the first (128 + its number), saying how many
/// resources it leaves; the reaper deletes and verifies those.
#[test]
fn a_second_signal_during_cleanup_exits_at_once_and_the_reaper_finishes() {
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        // Each delete takes 4 s to finish, and cleanup verifies one before
        // it deletes the next: the grace is long enough for all three, so
        // only the second signal can cut the cleanup short.
        let pod = Sandboxd::start(&["delete-delay=4s"]);
        let run = Run::new(&format!("second{}", signal as i32));
        let (child, pid) = start_waiting_test_with(&pod, &run, &[("TESTKIT_GRACE", "60s")]);
        kill(Pid::from_raw(pid), signal).unwrap();
        wait_for(
            "the handler's first delete in the journal",
            Duration::from_secs(30),
            || !events_of(&run, Event::Deleted).is_empty(),
        );
        kill(Pid::from_raw(pid), signal).unwrap();
        let pgid = child.id() as i32;
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        let name = signal.as_str();
        assert!(text.contains(&format!("{name} received")), "{text}");
        assert!(
            text.contains(&format!(
                "not verified gone after {name}; the reaper takes over"
            )),
            "{text}"
        );
        assert_eq!(test_binary_exit_code(&text), Some(code), "{text}");
        // The process left before it verified all three itself...
        let by_test = run
            .journal()
            .into_iter()
            .filter(|e| e.event == Event::Verified && e.pid == pid as u32)
            .count();
        assert!(by_test < 3, "{:#?}", run.journal());
        // ...and its reaper verified the rest.
        wait_for(
            "the reaper to verify what the test process left",
            Duration::from_secs(60),
            || by_test + events_of(&run, Event::Reaped).len() == 3,
        );
        run.assert_no_strays(Some(pgid));
        assert_pod_clean(&pod, &run, Duration::from_secs(10));
    }
}

/// Cleanup after SIGTERM is bounded by `TESTKIT_GRACE`: deletes that take
/// longer are left to the reaper, which verifies them gone.
#[test]
fn sigterm_cleanup_is_bounded_by_the_grace_then_the_reaper_finishes() {
    let pod = Sandboxd::start(&["delete-delay=4s"]);
    let run = Run::new("grace");
    let (child, pid) = start_waiting_test_with(&pod, &run, &[("TESTKIT_GRACE", "1s")]);
    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("(grace 1.0"), "{text}");
    assert!(
        text.contains("not verified gone after SIGTERM; the reaper takes over"),
        "{text}"
    );
    // The test process verified none of them within its grace; its reaper
    // did, after it.
    let by_test: Vec<JournalEntry> = run
        .journal()
        .into_iter()
        .filter(|e| e.event == Event::Verified && e.pid == pid as u32)
        .collect();
    assert!(by_test.is_empty(), "{by_test:#?}");
    wait_for(
        "the reaper to verify the three sandboxes gone",
        Duration::from_secs(60),
        || events_of(&run, Event::Reaped).len() == 3,
    );
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

#[test]
fn a_budget_of_two_holds_across_ten_concurrent_test_processes() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("budget");
    let (status, out) = run.run(
        &pod,
        true,
        &[
            "--test",
            "resources",
            "--test-threads",
            "10",
            "--no-fail-fast",
            "budgeted_",
        ],
    );
    assert!(status.success(), "{out}");
    // Under nextest every test is its own process.
    let journal = run.journal();
    let pids: std::collections::BTreeSet<u32> = journal
        .iter()
        .filter(|e| e.event == Event::Pending)
        .map(|e| e.pid)
        .collect();
    assert_eq!(pids.len(), 10, "{journal:#?}");
    // From `pending` (slot taken) to `verified` (slot freed), at most two at once.
    let mut changes: Vec<(u64, i32)> = Vec::new();
    let mut starts = BTreeMap::new();
    for e in &journal {
        match e.event {
            Event::Pending => {
                starts.insert(e.name.clone(), e.time);
            }
            Event::Verified => changes.push((e.time, -1)),
            _ => {}
        }
    }
    changes.extend(starts.values().map(|&t| (t, 1)));
    assert_eq!(changes.len(), 20, "{journal:#?}");
    // At the same millisecond a release sorts before a take.
    changes.sort();
    let mut live = 0;
    for (_, delta) in changes {
        live += delta;
        assert!(live <= 2, "{live} budgeted sandboxes at once: {journal:#?}");
    }
    for i in 0..10 {
        let record = run.record(&format!("budgeted_{i}"));
        let log = record["output"].as_str().unwrap();
        let count: usize = log
            .split("live sandboxes of the run: ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=2).contains(&count), "{log}");
    }
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// `TESTKIT_KEEP=on-failure` keeps what a failing test created (there at
/// the pod, `kept` in its record, named on stderr) and deletes what a
/// passing test created.
#[test]
fn keep_on_failure_keeps_a_failing_tests_resources_and_deletes_a_passing_ones() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("keeponfail");
    let rt = rt();
    let client = rt.block_on(pod.connect());

    let mut failing = run.command(
        &pod,
        false,
        &[
            "--test",
            "resources",
            "--",
            "--exact",
            "resources::panics_holding_five",
        ],
    );
    failing.env("TESTKIT_KEEP", "on-failure");
    let (status, out) = run.finish(failing);
    assert!(!status.success(), "{out}");
    let record = run.record("panics_holding_five");
    assert_eq!(record["cleanup"], "kept", "{record:#}");
    let resources = record["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 5, "{record:#}");
    assert!(resources.iter().all(|r| r["state"] == "kept"), "{record:#}");
    let kept = run.journaled_names();
    assert_eq!(events_of(&run, Event::Kept).len(), 5);
    for name in &kept {
        assert!(out.contains(&format!("sandbox `{name}`")), "{out}");
        assert!(
            rt.block_on(support::exists(&client, name)),
            "{name} is gone"
        );
    }
    assert_eq!(rt.block_on(listed(&client, &run.id)), kept);

    let mut passing = run.command(
        &pod,
        false,
        &[
            "--test",
            "resources",
            "--",
            "--exact",
            "resources::creates_two_and_passes",
        ],
    );
    passing.env("TESTKIT_KEEP", "on-failure");
    let (status, out) = run.finish(passing);
    assert!(status.success(), "{out}");
    let record = run.record("creates_two_and_passes");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    let deleted: std::collections::BTreeSet<String> =
        run.journaled_names().difference(&kept).cloned().collect();
    assert_eq!(deleted.len(), 2, "{:#?}", run.journal());
    for name in &deleted {
        assert!(!rt.block_on(support::exists(&client, name)), "{name} kept");
    }
    assert_eq!(rt.block_on(listed(&client, &run.id)), kept);

    // What was kept is the run's residue, and a sweep removes it.
    let config = testkit_engine::config::SuiteConfig::load(&support::suite_dir()).unwrap();
    let kinds = Kinds::from_config(&config, &support::suite_dir().join("testkit.toml")).unwrap();
    let report = rt.block_on(testkit_engine::resource::sweep(
        &client, &kinds, PREFIX, &run.id,
    ));
    assert!(report.is_clean(), "{report:?}");
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// Kinds whose ids the pod assigns: the id answered at creation is
/// journaled, and cleanup deletes and checks each record by it, filled into
/// the path (`record`) or into a JSON body the pod reads (`record_by_body`).
#[test]
fn kinds_with_server_ids_are_deleted_and_checked_by_id_in_the_path_or_a_body() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("serverids");
    let (status, out) = run.exact(&pod, "creates_records_and_passes");
    assert!(status.success(), "{out}");
    let record = run.record("creates_records_and_passes");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    let resources = record["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2, "{record:#}");
    assert!(
        resources.iter().all(|r| r["state"] == "deleted"),
        "{record:#}"
    );
    let id_of = |kind: &str| {
        run.journal()
            .into_iter()
            .find(|e| e.event == Event::Created && e.kind == kind)
            .and_then(|e| e.id)
            .unwrap_or_else(|| panic!("no id journaled for the {kind}: {:#?}", run.journal()))
    };
    let (in_path, in_body) = (id_of("record"), id_of("record_by_body"));
    assert_ne!(in_path, in_body);
    let log = pod.log_text();
    for request in [
        format!("DELETE /api/records/{in_path} 204"),
        format!("GET /api/records/{in_path} 404"),
        // The pod refuses these without the id in the body (400, 415).
        "POST /api/records/delete 204".to_owned(),
        "POST /api/records/lookup 404".to_owned(),
    ] {
        assert!(
            log.contains(&request),
            "the pod was not sent {request}: {log}"
        );
    }
    let rt = rt();
    let client = rt.block_on(pod.connect());
    let left = rt.block_on(support::listed_records(&client, &run.id));
    assert!(left.is_empty(), "{left:?}");
}

/// A creation that reached the pod but whose answer was lost leaves a
/// record whose id the test never learnt: cleanup lists the kind, finds the
/// journaled name, and deletes and verifies it by the id listed beside it.
#[test]
fn a_record_whose_creation_was_never_answered_is_found_by_name_and_deleted() {
    let pod = Sandboxd::start(&["drop-record-answer=1"]);
    let run = Run::new("lostanswer");
    let (status, out) = run.exact(&pod, "creates_a_record_whose_answer_is_lost");
    assert!(!status.success(), "{out}");
    let record = run.record("creates_a_record_whose_answer_is_lost");
    assert_eq!(record["failure_kind"], "error", "{record:#}");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    let journal = run.journal();
    let names: Vec<String> = run.journaled_names().into_iter().collect();
    let [name] = &names[..] else {
        panic!("not one record journaled: {journal:#?}")
    };
    assert!(
        journal
            .iter()
            .any(|e| e.event == Event::Failed && &e.name == name && e.id.is_none()),
        "{journal:#?}"
    );
    assert!(
        !journal.iter().any(|e| e.event == Event::Created),
        "{journal:#?}"
    );
    // The pod made it, and says which id it gave it.
    let log = pod.log_text();
    let made = format!("created record {name:?} (id ");
    let id = log
        .split(&made)
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("the pod did not make {name}: {log}"));
    assert!(
        log.contains(&format!("DELETE /api/records/{id} 204")),
        "cleanup did not delete {name} by its id {id}: {log}"
    );
    let rt = rt();
    let client = rt.block_on(pod.connect());
    let left = rt.block_on(support::listed_records(&client, &run.id));
    assert!(left.is_empty(), "{left:?}");
}

/// The fixture test that creates two sandboxes, run with `TESTKIT_KEEP=always`.
fn keep_two(pod: &Sandboxd, run: &Run) -> std::process::Command {
    let mut command = run.command(
        pod,
        false,
        &[
            "--test",
            "resources",
            "--",
            "--exact",
            "resources::creates_two_and_passes",
        ],
    );
    command.env("TESTKIT_KEEP", "always");
    command
}

#[test]
fn testkit_keep_keeps_and_says_how_to_remove_then_a_sweep_removes() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("keep");
    let mut command = keep_two(&pod, &run);
    let child = command.spawn().unwrap();
    let pgid = child.id() as i32;
    let out = child.wait_with_output().unwrap();
    run.assert_no_strays(Some(pgid));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let record = run.record("creates_two_and_passes");
    assert_eq!(record["cleanup"], "kept", "{record:#}");
    let names = run.journaled_names();
    for name in &names {
        assert!(stderr.contains(&format!("sandbox `{name}`")), "{stderr}");
    }
    assert!(
        stderr.contains(&format!("testkit-runner janitor --run {}", run.id)),
        "{stderr}"
    );

    let rt = rt();
    let client = rt.block_on(pod.connect());
    assert_eq!(rt.block_on(listed(&client, &run.id)), names);
    let config = testkit_engine::config::SuiteConfig::load(&support::suite_dir()).unwrap();
    let kinds = Kinds::from_config(&config, &support::suite_dir().join("testkit.toml")).unwrap();
    let report = rt.block_on(testkit_engine::resource::sweep(
        &client, &kinds, PREFIX, &run.id,
    ));
    assert!(report.is_clean() && report.refused.is_empty(), "{report:?}");
    let found: std::collections::BTreeSet<String> =
        report.found.iter().map(|l| l.name.clone()).collect();
    assert_eq!(found, names);
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}

/// A test binary started as the runner's sweeper prints its report on
/// stdout even though connecting to the pod routed stdout through redaction.
#[test]
fn a_test_binary_started_as_sweeper_prints_its_report() {
    let pod = Sandboxd::start(&[]);
    let run = Run::new("sweeper");
    let mut command = keep_two(&pod, &run);
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = run.journaled_names();
    assert_eq!(names.len(), 2, "{names:?}");

    let mut command = run.command(&pod, false, &["--test", "resources"]);
    command
        .env("TESTKIT_RUN_AS", "sweeper")
        .env("TESTKIT_SWEEP_KINDS", "sandbox");
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<testkit_engine::resource::SweepReport>(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no sweep report on stdout ({}): {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(out.status.success(), "{report:?}");
    assert_eq!(report.swept, ["sandbox"], "{report:?}");
    let deleted: std::collections::BTreeSet<String> =
        report.deleted.iter().map(|r| r.name.clone()).collect();
    assert_eq!(deleted, names, "{report:?}");
    assert_pod_clean(&pod, &run, Duration::from_secs(5));
}
