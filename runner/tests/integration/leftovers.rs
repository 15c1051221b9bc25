//! Processes a test leaves behind are not a green run: each is named in
//! the test's record and in the summary, and ended, under either engine.

use std::path::Path;

use testkit_engine::report::{read_records, FailureKind, Outcome};

use crate::truth::{add_test_binary, only};
use crate::{fixture, runner, Ran};

/// Three ways to leave a process behind: a plain child of the test process,
/// `setsid` (a session of its own), `nohup` (orphaned to init). Each test
/// logs the pid it left, so that this test can end it if testkit did not.
const LEAVES: &str = r#"
use std::process::{Command, Stdio};
use testkit::prelude::*;

/// `sh` starts `script` in the background, prints its pid and exits.
fn leave(cx: &mut Cx, script: &str) -> testkit::Result {
    let out = Command::new("sh").args(["-c", script]).stdin(Stdio::null()).output()?;
    ensure!(out.status.success(), "sh failed: {out:?}");
    cx.log(format!("left pid {}", String::from_utf8_lossy(&out.stdout).trim()));
    Ok(())
}

/// Leaves a plain child of its process running.
#[testkit::test]
async fn a_plain_child(cx: &mut Cx) -> testkit::Result {
    let child = Command::new("sleep").arg("301").stdin(Stdio::null()).spawn()?;
    cx.log(format!("left pid {}", child.id()));
    Ok(())
}

/// Leaves `setsid sleep &` running, in a session of its own.
#[testkit::test]
async fn a_setsid_sleep(cx: &mut Cx) -> testkit::Result {
    leave(cx, "setsid sleep 302 >/dev/null 2>&1 & echo $!")
}

/// Leaves `nohup sleep &` running, orphaned.
#[testkit::test]
async fn a_nohup_sleep(cx: &mut Cx) -> testkit::Result {
    leave(cx, "nohup sleep 303 >/dev/null 2>&1 & echo $!")
}

testkit::main!();
"#;

/// The three tests, with the command each leaves running.
const LEFT: [(&str, &str); 3] = [
    ("leaves::a_plain_child", "sleep 301"),
    ("leaves::a_setsid_sleep", "sleep 302"),
    ("leaves::a_nohup_sleep", "sleep 303"),
];

fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // A zombie (an unreaped plain child) is gone for this test's purpose.
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    (state != 'Z').then(|| {
        raw.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The pids the tests of `results` say they left, with their commands.
fn left_pids(results: &Path) -> Vec<(i32, &'static str)> {
    let records = read_records(results).unwrap();
    let mut pids = Vec::new();
    for (name, command) in LEFT {
        for r in records.iter().filter(|r| r.name == name) {
            for line in r.output.lines() {
                if let Some(pid) = line.split("left pid ").nth(1) {
                    if let Ok(pid) = pid.trim().parse::<i32>() {
                        pids.push((pid, command));
                    }
                }
            }
        }
    }
    pids
}

/// Ends what the tests left, should testkit not have: by pid, and only when
/// the pid still runs the very command its test left.
struct EndLeft(Vec<(i32, &'static str)>);

impl Drop for EndLeft {
    fn drop(&mut self) {
        for &(pid, command) in &self.0 {
            // `setsid sleep 302` until it becomes the sleep: the same process.
            if cmdline(pid).is_some_and(|c| c.ends_with(command)) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// A plain child, `setsid sleep &` and `nohup sleep &` left running fail
/// their tests (`cleanup`), are named in the records and the summary, and
/// are ended: under nextest, under cargo test one test at a time (each
/// charged to its own test), and under cargo test with the three at once,
/// where a process that started while several ran is charged to the last
/// of them to end, which names the others.
#[test]
fn processes_a_test_leaves_behind_fail_it_are_named_and_ended() {
    for (engine, threads) in [
        ("nextest", None),
        ("cargo-test", Some("1")),
        ("cargo-test", None),
    ] {
        let how = format!("{engine}, test threads {threads:?}");
        let suite = fixture("suite");
        add_test_binary(suite.path(), "leaves", LEAVES);
        let mut cmd = runner();
        cmd.arg("run")
            .arg(suite.path())
            .args(["--runner", engine])
            .args(only("leaves", engine));
        if let Some(n) = threads {
            cmd.env("TESTKIT_TEST_THREADS", n);
        }
        let ran = Ran::from(cmd.output().unwrap());
        let pids = left_pids(&ran.results());
        let _end = EndLeft(pids.clone());
        assert_eq!(pids.len(), 3, "{how}: each test logs its pid: {pids:?}");
        for &(pid, command) in &pids {
            assert_eq!(
                cmdline(pid),
                None,
                "{how}: {command} (pid {pid}) outlived its run"
            );
        }
        assert_eq!(ran.code, 1, "{how}: {}", ran.stdout);
        let records = read_records(&ran.results()).unwrap();
        let raw = raw_records(&ran.results());
        let exact = engine == "nextest" || threads.is_some();
        // Each test's end ends what it left: the runner's net after the
        // tests (which would end them all the same) has nothing to end.
        let net = "still running after every test process ended";
        assert!(
            !exact || !ran.stdout.contains(net),
            "{how}: the runner ended what the tests' ends should have: {}",
            ran.stdout
        );
        for (name, command) in LEFT {
            // Caught before `setsid` became the sleep, the command is still
            // `setsid sleep 302`: the same process, named as it was.
            let in_summary = ran
                .stdout
                .lines()
                .any(|l| l.contains("LEFT RUNNING") && l.contains(&format!("{command}`): ended")));
            // Tests that share a process judge what they started together:
            // one that none of them could claim is ended by the runner once
            // every test process is done, and the tests phase names it.
            let by_the_runner = ran.stdout.lines().any(|l| {
                l.contains("FAIL tests") && l.contains(net) && l.contains(&format!("{command}`"))
            });
            assert!(
                in_summary || by_the_runner,
                "{how}: the summary does not name {command}: {}",
                ran.stdout
            );
            // A record that says ended, of a process the runner found running.
            assert!(
                !(in_summary && by_the_runner),
                "{how}: {command} is said ended by its test, and the runner found it running: {}",
                ran.stdout
            );
            if by_the_runner && !in_summary {
                continue;
            }
            // The record that names it: its own test's, when the test ran alone.
            let charged: Vec<&String> = raw
                .iter()
                .filter(|(_, v)| {
                    v["leftover_processes"].as_array().is_some_and(|l| {
                        l.iter().any(|p| {
                            p["command"].as_str().is_some_and(|c| c.ends_with(command))
                                && p["fate"] == "ended"
                        })
                    })
                })
                .map(|(n, _)| n)
                .collect();
            assert_eq!(
                charged.len(),
                1,
                "{how}: {command} is charged to {charged:?}"
            );
            if exact {
                assert_eq!(charged[0], name, "{how}: {command}");
            }
            let page = std::fs::read_to_string(ran.results().join("report.html")).unwrap();
            assert!(
                page.contains(&format!(
                    "{command}</code>, left running by <code>{}</code>: ended",
                    charged[0]
                )),
                "{how}: report.html's leaks do not name {command}"
            );
            let r = records.iter().find(|r| &r.name == charged[0]).unwrap();
            assert_eq!(r.outcome, Outcome::Failed, "{how}: {r:#?}");
            assert_eq!(r.failure_kind, Some(FailureKind::Cleanup), "{how}: {r:#?}");
            let message = r.message.as_deref().unwrap_or("");
            assert!(message.contains(command), "{how}: {message}");
        }
    }
}

/// `TESTKIT_KEEP_PROCESSES=always` keeps what a test left running, and
/// says so: the test still fails.
#[test]
fn keep_processes_keeps_them_and_says_so() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "leaves", LEAVES);
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(leaves) & test(nohup)"])
            .env("TESTKIT_KEEP_PROCESSES", "always")
            .output()
            .unwrap(),
    );
    let pids = left_pids(&ran.results());
    let _end = EndLeft(pids.clone());
    assert_eq!(pids.len(), 1, "{pids:?}");
    let (pid, command) = pids[0];
    assert!(
        cmdline(pid).is_some_and(|c| c.ends_with(command)),
        "it was not kept"
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let raw = raw_records(&ran.results());
    let left = &raw["leaves::a_nohup_sleep"]["leftover_processes"];
    assert!(
        left.as_array()
            .is_some_and(|l| l.iter().any(|p| p["pid"] == pid && p["fate"] == "kept")),
        "{left}"
    );
}

/// Every record of `results` as JSON, by test name.
fn raw_records(results: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![results.join("records")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    out.insert(v["name"].as_str().unwrap().to_owned(), v);
                }
            }
        }
    }
    out
}

/// Leaves `setsid sleep 304 &` running, writes its pid to the file
/// `LEFT_PROBE` names, and kills its own process: no test end ever judges
/// what it left.
const DIES: &str = r#"
use std::process::{Command, Stdio};
use testkit::prelude::*;

/// Leaves a sleep running and dies before it ends.
#[testkit::test]
async fn dies_leaving_a_sleep(_cx: &mut Cx) -> testkit::Result {
    let out = Command::new("sh")
        .args(["-c", "setsid sleep 304 >/dev/null 2>&1 & echo $!"])
        .stdin(Stdio::null())
        .output()?;
    std::fs::write(std::env::var("LEFT_PROBE")?, &out.stdout)?;
    std::process::abort()
}

testkit::main!();
"#;

/// A test process killed before its test ended (a crash, a timeout) never
/// judged what the test left running: the runner finds it by the run's
/// tag once the tests ended, ends it, and fails the tests phase naming it.
#[test]
fn what_a_killed_test_process_left_running_is_ended_by_the_runner() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "dies", DIES);
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = probe_dir.path().join("pid");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(only("dies", "nextest"))
            .env("LEFT_PROBE", &probe)
            .output()
            .unwrap(),
    );
    let pid: i32 = std::fs::read_to_string(&probe)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _end = EndLeft(vec![(pid, "sleep 304")]);
    assert_eq!(cmdline(pid), None, "sleep 304 (pid {pid}) outlived the run");
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(
        evidence.contains(&format!("pid {pid} `sleep 304`")) && evidence.contains("ended"),
        "{evidence}"
    );
}
