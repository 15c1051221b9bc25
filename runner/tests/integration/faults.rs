//! A run under faults: a runner killed with SIGKILL, a pod that crashes
//! mid-run. Real processes, real signals, `sandboxd`'s `--fault` switches.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, runner, wait_for, Ran};

/// `pid` is a live process (not a zombie waiting for a reaper).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// Starts `run` on the fixture suite in slow mode with its own pods dir,
/// and waits until a test is running.
fn slow_run(suite: &Path, pods: &Path) -> Running {
    slow_run_with(suite, pods, |_| {})
}

/// [`slow_run`], with `adjust` applied to the runner's command last.
fn slow_run_with(
    suite: &Path,
    pods: &Path,
    adjust: impl FnOnce(&mut std::process::Command),
) -> Running {
    run_in_mode(suite, pods, "slow", adjust)
}

/// Starts `run` on the fixture suite in `mode` (`slow`, `hold`) with its own
/// pods dir, `adjust` applied to the command last, and waits until the
/// test of that mode is running (its flag, `<suite>/running.flag`, exists).
fn run_in_mode(
    suite: &Path,
    pods: &Path,
    mode: &str,
    adjust: impl FnOnce(&mut std::process::Command),
) -> Running {
    let flag = suite.join("running.flag");
    let mut command = runner();
    command
        .env("TESTKIT_PODS_DIR", pods)
        .env("FIXTURE_MODE", mode)
        .env("FIXTURE_FLAG", &flag)
        .arg("run")
        .arg(suite)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    adjust(&mut command);
    let mut child = command.spawn().unwrap();
    let started = wait_for(Duration::from_secs(240), || flag.exists());
    if !started {
        let _ = child.kill();
    }
    assert!(started, "the slow test started");
    Running(Some(child))
}

/// Every live descendant of `pid`, with its start time (against pid reuse),
/// read from /proc.
fn descendants(pid: i32) -> Vec<(i32, u64)> {
    // (pid, ppid, start time) of every process.
    let procs: Vec<(i32, i32, u64)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // Fields after the command, which may hold spaces: state is 3rd.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some((
                p,
                fields.get(1)?.parse().ok()?,
                fields.get(19)?.parse().ok()?,
            ))
        })
        .collect();
    let mut tree = vec![pid];
    loop {
        let before = tree.len();
        for (p, parent, _) in &procs {
            if tree.contains(parent) && !tree.contains(p) {
                tree.push(*p);
            }
        }
        if tree.len() == before {
            break;
        }
    }
    procs
        .iter()
        .filter(|(p, _, _)| tree.contains(p))
        .map(|(p, _, ticks)| (*p, *ticks))
        .collect()
}

/// The one pod under `pods`: (name, its `pod.json`).
fn the_pod(pods: &Path) -> (String, serde_json::Value, PathBuf) {
    let dirs: Vec<PathBuf> = std::fs::read_dir(pods)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pod.json").is_file())
        .collect();
    assert_eq!(dirs.len(), 1, "one pod recorded: {dirs:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dirs[0].join("pod.json")).unwrap()).unwrap();
    let name = record["name"].as_str().unwrap().to_owned();
    (name, record, dirs[0].clone())
}

/// A SIGKILLed runner leaves no pod behind: until it dies the pod is listed
/// by `pod ls`; within seconds of its death the pod's processes are gone,
/// its private dir (token inside) deleted, its record removed, and the
/// run's secrets dir (handle and session) with them.
#[test]
fn a_sigkilled_runner_does_not_orphan_its_pod() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let secrets = scratch.path().join("secrets");
    let child = slow_run_with(suite.path(), pods.path(), |c| {
        c.env("TESTKIT_SECRETS_DIR", &secrets);
    });
    let (name, record, record_dir) = the_pod(pods.path());
    let ls = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "ls"])
            .output()
            .unwrap(),
    );
    assert_eq!(ls.code, 0);
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("alive")),
        "{}",
        ls.stdout
    );
    let pid = record["pid"].as_i64().unwrap() as i32;
    let private = PathBuf::from(record["private_dir"].as_str().unwrap());
    assert!(running(pid) && private.is_dir());
    assert!(secrets.join("handle.json").is_file());
    // What holds the token (the pod's raw stdout, its handle, the session)
    // is for the owner alone: 0600 files in 0700 dirs.
    assert!(private.join("stdout.raw").is_file());
    for dir in [&private, &secrets] {
        assert_private(dir);
    }
    // Every process the runner started: the pod's group and the test
    // engine's (cargo, nextest, the test processes), not the leader alone.
    let started = descendants(child.pid().as_raw());
    assert!(
        started.len() >= 3,
        "the runner, its pod and its engine have processes: {started:?}"
    );
    kill(child.pid(), Signal::SIGKILL).unwrap();
    child.finish_within(Duration::from_secs(10));
    let left = || {
        started
            .iter()
            .filter(|(p, ticks)| testkit_engine::process::is_running(*p, *ticks))
            .copied()
            .collect::<Vec<_>>()
    };
    let gone = wait_for(Duration::from_secs(20), || {
        left().is_empty() && !private.exists() && !record_dir.exists() && !secrets.exists()
    });
    // What the watchdog left is judged before it is ended here.
    let still = left();
    for (p, _) in &still {
        let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
    }
    assert!(still.is_empty(), "left running: {still:?}");
    if running(pid) {
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(
        gone,
        "pod {name}: running {}, private dir left {}, record left {}, secrets left {}",
        running(pid),
        private.exists(),
        record_dir.exists(),
        secrets.exists()
    );
}

/// `dir` is mode 0700 and every file directly in it 0600.
fn assert_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_eq!(mode(&path), 0o600, "{}: {:o}", path.display(), mode(&path));
        }
    }
}

/// While a run goes on, `pod down NAME` takes its pod down by the name
/// `pod ls` shows; the run then ends without leaving anything running.
#[test]
fn pod_down_takes_a_runs_pod_down_by_name() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let child = slow_run(suite.path(), pods.path());
    let (name, record, record_dir) = the_pod(pods.path());
    let down = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "down", &name])
            .output()
            .unwrap(),
    );
    let pid = record["pid"].as_i64().unwrap() as i32;
    kill(child.pid(), Signal::SIGINT).unwrap();
    let ran = child
        .finish_within(Duration::from_secs(120))
        .expect("the run ended");
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(down.stdout.contains(&format!("pod {name} is down")));
    assert!(!running(pid) && !record_dir.exists());
    assert_ne!(ran.code, 0);
}

/// A pod that crashes mid-run (`--fault crash-after=N`) is named by a
/// verdict of its own (how it ended, when, its last lines), the run exits 2,
/// and teardown ends the sandbox process that outlived the pod.
#[test]
fn a_pod_that_crashes_mid_run_is_named_and_its_processes_end() {
    let suite = fixture("suite");
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(
        "\n[pod]\ncommand = [\"sandboxd\", \"serve\", \"--fault\", \"crash-after=25\"]\n",
    );
    std::fs::write(&toml, text).unwrap();
    let flag = suite.path().join("pid.flag");
    let pods = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .env("FIXTURE_MODE", "crash")
            .env("FIXTURE_FLAG", &flag)
            .arg("run")
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    let sleeper: i32 = std::fs::read_to_string(&flag)
        .expect("the test started a process in a sandbox")
        .trim()
        .parse()
        .unwrap();
    let left = running(sleeper);
    if left {
        let _ = kill(Pid::from_raw(sleeper), Signal::SIGKILL);
    }
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains("crashed mid-run") && evidence.contains("after it was up"),
        "{evidence}"
    );
    assert!(
        evidence.contains("killed by SIGABRT") || evidence.contains("exit status"),
        "{evidence}"
    );
    assert!(ran.stdout.contains("crashed mid-run"), "{}", ran.stdout);
    // The sandboxes the test created are named, not "leaks: none".
    let (_, residue) = ran.verdict("residue");
    assert!(residue.contains("the journal names 2 left"), "{residue}");
    assert!(!ran.stdout.contains("leaks: none"), "{}", ran.stdout);
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(why.contains("outlived it: ended"), "{why}");
    assert!(!left, "the sandbox's process {sleeper} outlived teardown");
    assert!(std::fs::read_dir(pods.path()).unwrap().next().is_none());
}

/// A runner started by a test, killed if the test fails before it ends.
struct Running(Option<Child>);

impl Running {
    /// Waits for it at most `limit` (killing it then), with its output.
    fn finish_within(mut self, limit: Duration) -> Option<Ran> {
        let mut child = self.0.take().unwrap();
        let ended = wait_for(limit, || child.try_wait().unwrap().is_some());
        if !ended {
            let _ = child.kill();
        }
        let ran = Ran::from(child.wait_with_output().unwrap());
        ended.then_some(ran)
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.0.as_ref().unwrap().id() as i32)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGINT);
            if !wait_for(Duration::from_secs(60), || c.try_wait().unwrap().is_some()) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A run id no earlier run of this test used (its results folder is new).
fn fresh_run_id(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{what}{}{nanos:x}", std::process::id() % 1000)
        .chars()
        .take(16)
        .collect()
}

/// The text of every `.jsonl` file under `dir`.
fn jsonl_under(dir: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            texts.extend(jsonl_under(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            texts.push(std::fs::read_to_string(&path).unwrap());
        }
    }
    texts
}

/// A caller's pod whose deletes all fail, with `n` sandboxes of run `run_id`
/// planted behind the framework's back.
fn pod_with_leaks(run_id: &str, n: usize, faults: &[&str]) -> (crate::CallerPod, Vec<String>) {
    let mut args = vec!["--fault", "delete-fail=1000000"];
    for f in faults {
        args.extend(["--fault", f]);
    }
    let pod = crate::CallerPod::start_with(&args);
    let token = pod.handle["token"].as_str().unwrap().to_owned();
    let names: Vec<String> = (0..n)
        .map(|i| format!("ct-{run_id}-plant0-{i:02}"))
        .collect();
    for name in &names {
        let (status, body) = crate::http(
            "POST",
            &pod.url("/api/sandboxes"),
            Some(&token),
            Some(&serde_json::json!({ "name": name }).to_string()),
        );
        assert!(status < 300, "{status} {body}");
    }
    (pod, names)
}

/// A run of one quick test against `pod`, whose sweep has `deadline`.
fn sweep_of(
    suite: &Path,
    run_id: &str,
    pod: &crate::CallerPod,
    deadline: &str,
) -> std::process::Command {
    let mut cmd = runner();
    cmd.env("TESTKIT_SWEEP_DEADLINE", deadline)
        .arg("run")
        .arg(suite)
        .args(["--run-id", run_id, "-E", "test(capabilities)"])
        .arg("--handle-json")
        .arg(&pod.handle_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// With every delete failing, 40 leaks are swept concurrently under one
/// deadline: the sweep ends when it passes, names every leak as not deleted
/// and fails the run (one at a time, the sweep would take 400 s and more).
#[test]
fn the_residue_sweep_is_concurrent_and_ends_at_its_deadline() {
    let suite = fixture("suite");
    let run_id = &fresh_run_id("dl");
    let (pod, names) = pod_with_leaks(run_id, 40, &[]);
    let child = sweep_of(suite.path(), run_id, &pod, "4s").spawn().unwrap();
    let ran = Running(Some(child))
        .finish_within(Duration::from_secs(240))
        .expect("the run ended: the sweep is bounded");
    assert_eq!(ran.code, 1);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail");
    assert!(evidence.contains("deadline (4s) passed"), "{evidence}");
    for name in &names {
        assert!(
            evidence.contains(&format!("`{name}`")),
            "{name}: {evidence}"
        );
    }
    assert!(!ran.stdout.contains("leaks: none"), "{}", ran.stdout);
    // Concurrent, counted at the pod: its failing deletes are numbered, and
    // the next one says how many the sweep made in its 4 s. One resource at
    // a time, with backoff, makes fewer than ten in that time.
    let token = pod.handle["token"].as_str().unwrap();
    let (status, body) = crate::http(
        "DELETE",
        &pod.url(&format!("/api/sandboxes/{}", names[0])),
        Some(token),
        None,
    );
    assert_eq!(status, 503, "{body}");
    let made: usize = body
        .split("failure ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .map(|next| next - 1)
        .unwrap_or_else(|| panic!("no failure count in {body}"));
    assert!(
        made >= 20,
        "the sweep made {made} delete attempts in 4 s: it does not delete concurrently"
    );
}

/// SIGTERM during the residue sweep cuts it short: the run ends at once,
/// exit 130, and the sweep's verdict says what is left.
#[test]
fn sigterm_cuts_the_residue_sweep_short_and_says_what_is_left() {
    let suite = fixture("suite");
    let run_id = &fresh_run_id("term");
    let (pod, names) = pod_with_leaks(run_id, 40, &[]);
    let results = tempfile::tempdir().unwrap();
    let child = sweep_of(suite.path(), run_id, &pod, "30m")
        .arg("--results")
        .arg(results.path())
        .spawn()
        .unwrap();
    let running = Running(Some(child));
    let verdicts = results.path().join("verdict.jsonl");
    let sweeping = wait_for(Duration::from_secs(240), || {
        std::fs::read_to_string(&verdicts).is_ok_and(|t| t.contains("\"phase\":\"tests\""))
    });
    assert!(sweeping, "the run reached the residue sweep");
    // The planted sandboxes are being deleted (each try answers 503).
    std::thread::sleep(Duration::from_secs(1));
    kill(running.pid(), Signal::SIGTERM).unwrap();
    let ran = running
        .finish_within(Duration::from_secs(60))
        .expect("SIGTERM ended the sweep");
    assert_eq!(ran.code, 130);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail");
    assert!(evidence.contains("cut short (interrupted"), "{evidence}");
    for name in &names {
        assert!(
            evidence.contains(&format!("`{name}`")),
            "{name}: {evidence}"
        );
    }
}

/// With a listing 60 s behind and deletes failing, what the tests' records
/// say leaked is named by the residue sweep (from the journal) and in the
/// summary: a lagging listing cannot make it say "nothing left".
#[test]
fn a_lagging_listing_cannot_hide_what_the_records_say_leaked() {
    let suite = fixture("suite");
    let run_id = &fresh_run_id("lag");
    let (pod, _) = pod_with_leaks(run_id, 0, &["list-lag=60s"]);
    let child = runner()
        .env("TESTKIT_SWEEP_DEADLINE", "5s")
        .arg("run")
        .arg(suite.path())
        .args(["--run-id", run_id, "--handle-json"])
        .arg(&pod.handle_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ran = Running(Some(child))
        .finish_within(Duration::from_secs(300))
        .expect("the run ended");
    let mut leaked = Vec::new();
    for text in jsonl_under(&ran.results().join("records")) {
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            for r in record["resources"].as_array().into_iter().flatten() {
                if r["state"] == "leaked" {
                    leaked.push(r["name"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    assert!(!leaked.is_empty(), "the tests' records name leaks");
    assert_eq!(ran.code, 1);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(!ran.stdout.contains("leaks: none"), "{}", ran.stdout);
    for name in &leaked {
        assert!(
            evidence.contains(&format!("`{name}`")),
            "{name}: {evidence}"
        );
        assert!(ran.stdout.contains(name.as_str()), "summary names {name}");
    }
}

/// After Ctrl-C, a test that was running is reported as interrupted (not as
/// a crash), with what the journal knows of its resources: its two
/// sandboxes created, deleted and verified gone.
#[test]
fn an_interrupted_test_is_reported_interrupted_with_its_journaled_resources() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let child = slow_run(suite.path(), pods.path());
    kill(child.pid(), Signal::SIGINT).unwrap();
    let ran = child
        .finish_within(Duration::from_secs(120))
        .expect("the interrupted run ended");
    assert_eq!(ran.code, 130);
    let record = jsonl_under(&ran.results().join("records"))
        .iter()
        .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
        .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap())
        .find(|r| r["name"] == "sandboxes::create_two")
        .expect("a record of the interrupted test");
    let message = record["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("interrupted"), "{record:#}");
    assert!(!message.contains("crashed or was killed"), "{record:#}");
    let resources = record["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2, "{record:#}");
    for r in resources {
        assert_eq!(r["state"], "deleted", "{record:#}");
    }
    assert_eq!(record["cleanup"], "verified", "{record:#}");
    assert!(!ran.stdout.contains("crashed or killed"), "{}", ran.stdout);
}

/// Every byte a run writes (its output, every file of its results folder,
/// the pod's logs among them, failing tests' logs included) is free of the
/// pod's token and of the session cookie. The pod is kept (`--keep`) so that
/// the run's secrets dir, outside the results folder, is still there to tell
/// this test what the secrets are; then the pod is taken down.
#[test]
fn no_byte_a_run_writes_holds_the_token_or_the_session() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .env("FIXTURE_MODE", "fail")
            .arg("run")
            .arg(suite.path())
            .arg("--keep")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "a failing test, so that its log is printed");
    let results = ran.results();
    let secrets = testkit_engine::run::secrets_dir(
        &testkit_engine::settings::Settings::from_env().unwrap(),
        &ran.run_id(),
    );
    let handle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(secrets.join("handle.json")).unwrap()).unwrap();
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(secrets.join("session.json")).unwrap()).unwrap();
    let name = handle["name"].as_str().unwrap().to_owned();
    let down = Ran::from(runner().args(["pod", "down", &name]).output().unwrap());
    assert_eq!(down.code, 0, "{}", down.stderr);
    std::fs::remove_dir_all(&secrets).unwrap();
    let token = handle["token"].as_str().unwrap().to_owned();
    let cookie = session["credential"]["value"].as_str().unwrap();
    let cookie = cookie.split_once('=').map_or(cookie, |(_, v)| v).to_owned();
    assert!(token.len() >= 16 && cookie.len() >= 16, "real secrets");
    let mut files = Vec::new();
    all_files(&results, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("pod/logs/pod.stderr.log")),
        "{files:?}"
    );
    let mut scanned = 0;
    for file in &files {
        let rel = file.strip_prefix(&results).unwrap();
        let bytes = std::fs::read(file).unwrap();
        for (what, secret) in [("token", &token), ("session", &cookie)] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the {what}",
                rel.display()
            );
        }
        scanned += 1;
    }
    assert!(scanned > 10, "{files:?}");
    for (what, secret) in [("token", &token), ("session", &cookie)] {
        assert!(
            !ran.stdout.contains(secret.as_str()) && !ran.stderr.contains(secret.as_str()),
            "the runner's output holds the {what}"
        );
    }
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// A runner whose stderr nobody reads any more (the shell or CI step that
/// started it went away, so writing there fails with EPIPE) still hears
/// Ctrl-C: saying so on stderr must not decide whether the interrupt counts.
#[test]
fn ctrl_c_reaches_a_runner_whose_stderr_is_gone() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let child = slow_run_with(suite.path(), pods.path(), |cmd| {
        cmd.stderr(Stdio::from(write));
    });
    kill(child.pid(), Signal::SIGINT).unwrap();
    let ran = child
        .finish_within(Duration::from_secs(120))
        .expect("the interrupted run ended (the slow test waits 300 s otherwise)");
    assert_eq!(ran.code, 130, "{}", ran.stdout);
}

/// Lets the test of a `hold` run end: it waits for `<flag>.go`.
fn release(suite: &Path) {
    std::fs::write(suite.join("running.flag.go"), "go").unwrap();
}

/// The names of the sandboxes of run `run_id` on `pod`.
fn sandboxes_of(pod: &crate::CallerPod, run_id: &str) -> Vec<String> {
    let (status, body) = pod.get(&format!("/api/sandboxes?prefix=ct-{run_id}-&limit=1000"));
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// The record of the test `name` in the results of `ran`.
fn record_of(ran: &Ran, name: &str) -> serde_json::Value {
    jsonl_under(&ran.results().join("records"))
        .iter()
        .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
        .map(|l| serde_json::from_str::<serde_json::Value>(&l).unwrap())
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no record of {name}"))
}

/// `janitor --older-than` run while a test holds its sandboxes, journaled
/// longer ago than that age, leaves the live run alone and says so; the
/// test's own cleanup deletes them afterwards, and verifies that.
#[test]
fn the_janitor_leaves_a_live_runs_sandboxes_alone() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let pod = crate::CallerPod::start();
    let root = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("live");
    let results = root.path().join(&run_id);
    let running = run_in_mode(suite.path(), pods.path(), "hold", |c| {
        c.args([
            "--run-id",
            &run_id,
            "-E",
            "test(create_two)",
            "--handle-json",
        ])
        .arg(&pod.handle_file)
        .arg("--results")
        .arg(&results);
    });
    let runner_pid = running.0.as_ref().unwrap().id();
    let held = sandboxes_of(&pod, &run_id);
    // The runner names itself in the results folder, for every janitor.
    let runner_file = results.join("runners").join(format!("{run_id}.json"));
    let named: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&runner_file).unwrap()).unwrap();
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&runner_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    // The journal's last entry must be older than the janitor's age (1 s).
    std::thread::sleep(Duration::from_millis(1500));
    let janitor = Ran::from(
        runner()
            .arg("janitor")
            .arg("--suite")
            .arg(suite.path())
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .args(["--older-than", "1s", "--results-root"])
            .arg(root.path())
            .output()
            .unwrap(),
    );
    let after = sandboxes_of(&pod, &run_id);
    release(suite.path());
    let ran = running
        .finish_within(Duration::from_secs(120))
        .expect("the run ended");
    assert_eq!(held.len(), 2, "the test holds two sandboxes: {held:?}");
    assert_eq!(after, held, "the janitor deleted a live run's sandboxes");
    assert_eq!(named["run_id"], run_id.as_str(), "{named}");
    assert_eq!(named["pid"], runner_pid, "{named}");
    assert!(named["start_ticks"].is_u64(), "{named}");
    assert_eq!(mode, 0o644, "{}", runner_file.display());
    assert_eq!(janitor.code, 0, "{}", janitor.stderr);
    assert!(
        janitor
            .stdout
            .contains(&format!("skipped run {run_id}: it is live")),
        "{}",
        janitor.stdout
    );
    assert_eq!(ran.code, 0);
    let record = record_of(&ran, "sandboxes::create_two");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
}

/// Between two tests a live run has no live journal writer, and its
/// runner's claim is where the runner's `XDG_RUNTIME_DIR` put it: a janitor
/// run by cron, with another `XDG_RUNTIME_DIR`, `TMPDIR` and `HOME`, must
/// know it live from the results folder alone. A run is planted as such a
/// moment: its `runners/<run id>.json` names a live process (a `sleep`), its journal
/// two sandboxes on the pod, written by a process that has ended. Neither
/// `--run ID` nor `--older-than` touches them while the runner lives; once
/// it has ended, the janitor removes them.
#[test]
fn the_janitor_leaves_a_run_alone_between_its_tests_whatever_its_environment() {
    let suite = fixture("suite");
    let pod = crate::CallerPod::start();
    let token = pod.handle["token"].as_str().unwrap().to_owned();
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("between");
    let results = root.path().join(&run_id);
    let names: Vec<String> = (0..2).map(|i| format!("ct-{run_id}-held-{i:02}")).collect();
    // The test process that created them, gone.
    let mut writer = std::process::Command::new("true").spawn().unwrap();
    let writer_pid = writer.id();
    writer.wait().unwrap();
    let old = testkit_engine::resource::journal::now_ms() - 60_000;
    let mut journal = String::new();
    for name in &names {
        let (status, body) = crate::http(
            "POST",
            &pod.url("/api/sandboxes"),
            Some(&token),
            Some(&serde_json::json!({ "name": name }).to_string()),
        );
        assert!(status < 300, "{status} {body}");
        let entry = serde_json::json!({
            "event": "created", "kind": "sandbox", "name": name, "run": run_id,
            "test": "sandboxes::create_two", "pid": writer_pid, "start_ticks": 1, "time": old,
        });
        journal.push_str(&format!("{entry}\n"));
    }
    std::fs::create_dir_all(results.join("journal")).unwrap();
    std::fs::write(
        results
            .join("journal")
            .join(format!("tests-{writer_pid}.jsonl")),
        journal,
    )
    .unwrap();
    let mut runner_proc = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let runner_pid = runner_proc.id();
    let named = serde_json::json!({
        "pid": runner_pid,
        "start_ticks": testkit_engine::process::start_ticks(runner_pid as i32).unwrap(),
        "run_id": run_id,
        "results_dir": results,
    });
    std::fs::create_dir_all(results.join("runners")).unwrap();
    std::fs::write(
        results.join("runners").join(format!("{run_id}.json")),
        named.to_string(),
    )
    .unwrap();
    let janitor = |args: &[&str]| {
        Ran::from(
            runner()
                .env("XDG_RUNTIME_DIR", elsewhere.path())
                .env("TMPDIR", elsewhere.path())
                .env("HOME", elsewhere.path())
                .env_remove("TESTKIT_SECRETS_DIR")
                .arg("janitor")
                .arg("--suite")
                .arg(suite.path())
                .arg("--handle-json")
                .arg(&pod.handle_file)
                .args(args)
                .arg("--results-root")
                .arg(root.path())
                .output()
                .unwrap(),
        )
    };
    let by_name = janitor(&["--run", &run_id]);
    let by_name_left = sandboxes_of(&pod, &run_id);
    let by_age = janitor(&["--older-than", "0s"]);
    let by_age_left = sandboxes_of(&pod, &run_id);
    let _ = runner_proc.kill();
    runner_proc.wait().unwrap();
    let after = janitor(&["--older-than", "0s"]);
    let gone = sandboxes_of(&pod, &run_id);
    assert_eq!(
        by_name_left, names,
        "`--run` deleted a live run's sandboxes"
    );
    assert_eq!(
        by_age_left, names,
        "`--older-than` deleted a live run's sandboxes"
    );
    let skipped = format!(
        "skipped run {run_id}: it is live (testkit-runner pid {runner_pid} runs it, as runners/{run_id}.json says)"
    );
    for (ran, code) in [(&by_name, 1), (&by_age, 0)] {
        assert!(
            ran.stdout.contains(&skipped),
            "{}{}",
            ran.stdout,
            ran.stderr
        );
        assert_eq!(ran.code, code, "{}{}", ran.stdout, ran.stderr);
    }
    assert_eq!(
        gone,
        Vec::<String>::new(),
        "{}{}",
        after.stdout,
        after.stderr
    );
    assert_eq!(after.code, 0, "{}{}", after.stdout, after.stderr);
    for name in &names {
        assert!(
            after
                .stdout
                .contains(&format!("deleted sandbox `{name}` (verified gone)")),
            "{}",
            after.stdout
        );
    }
}

/// Sandboxes someone else deleted while their test held them are not
/// "deleted and verified" by the test's cleanup, whose first delete found
/// them gone: the record says `gone_before_delete`, and so does the summary.
#[test]
fn sandboxes_deleted_by_someone_else_are_not_reported_as_verified() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let pod = crate::CallerPod::start();
    let run_id = fresh_run_id("gone");
    let running = run_in_mode(suite.path(), pods.path(), "hold", |c| {
        c.args([
            "--run-id",
            &run_id,
            "-E",
            "test(create_two)",
            "--handle-json",
        ])
        .arg(&pod.handle_file);
    });
    let token = pod.handle["token"].as_str().unwrap().to_owned();
    let held = sandboxes_of(&pod, &run_id);
    for name in &held {
        let path = format!("/api/sandboxes/{name}");
        let (status, body) = crate::http("DELETE", &pod.url(&path), Some(&token), None);
        assert!(status < 300, "{status} {body}");
    }
    let gone = wait_for(Duration::from_secs(30), || {
        held.iter()
            .all(|n| pod.get(&format!("/api/sandboxes/{n}")).0 == 404)
    });
    release(suite.path());
    let ran = running
        .finish_within(Duration::from_secs(120))
        .expect("the run ended");
    assert!(gone, "the pod deleted {held:?}");
    assert_eq!(held.len(), 2, "{held:?}");
    let record = record_of(&ran, "sandboxes::create_two");
    for r in record["resources"].as_array().unwrap() {
        assert_eq!(r["state"], "gone_before_delete", "{record:#}");
    }
    assert_eq!(record["cleanup"], "gone_before_delete", "{record:#}");
    assert!(
        ran.stdout.contains("gone before") && ran.stdout.contains("sandboxes::create_two"),
        "{}",
        ran.stdout
    );
}

/// A second `run --run-id X` while a runner with run id X is live is
/// refused before it starts anything (exit 64), naming the id, the live
/// runner's pid and what to do; the first run goes on undisturbed.
#[test]
fn a_run_id_in_use_by_a_live_runner_is_refused() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let pod = crate::CallerPod::start();
    let run_id = fresh_run_id("dup");
    let results = tempfile::tempdir().unwrap();
    let running = run_in_mode(suite.path(), pods.path(), "hold", |c| {
        c.args([
            "--run-id",
            &run_id,
            "-E",
            "test(create_two)",
            "--handle-json",
        ])
        .arg(&pod.handle_file)
        .arg("--results")
        .arg(results.path());
    });
    let first = running.pid().as_raw();
    let second_results = tempfile::tempdir().unwrap();
    let second = runner()
        .env("TESTKIT_PODS_DIR", pods.path())
        .arg("run")
        .arg(suite.path())
        .args(["--run-id", &run_id, "-E", "test(capabilities_answer)"])
        .arg("--handle-json")
        .arg(&pod.handle_file)
        .arg("--results")
        .arg(second_results.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let second = Running(Some(second))
        .finish_within(Duration::from_secs(240))
        .expect("the second run ended");
    release(suite.path());
    let ran = running
        .finish_within(Duration::from_secs(120))
        .expect("the first run ended");
    assert_eq!(second.code, 64, "{}", second.stderr);
    for what in [
        format!("--run-id {run_id}"),
        format!("pid {first}"),
        "pick another run id".to_owned(),
    ] {
        assert!(second.stderr.contains(&what), "{what}: {}", second.stderr);
    }
    assert!(
        !second_results.path().join("verdict.jsonl").exists(),
        "the refused run started nothing"
    );
    assert_eq!(ran.code, 0, "the first run is undisturbed");
    let record = record_of(&ran, "sandboxes::create_two");
    assert_eq!(record["cleanup"], "verified", "{record:#}");
}

/// The secrets dir of a runner that is gone is taken over, saying so: its
/// claim names a pid that belongs to another process now (this test's, which
/// started at another time).
#[test]
fn the_run_id_of_a_dead_runner_is_taken_over_saying_so() {
    let suite = fixture("suite");
    let pod = crate::CallerPod::start();
    let run_id = fresh_run_id("stale");
    let scratch = tempfile::tempdir().unwrap();
    let secrets = scratch.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let claim =
        serde_json::json!({ "pid": std::process::id(), "start_ticks": 1, "run_id": run_id });
    std::fs::write(secrets.join("runner.json"), claim.to_string()).unwrap();
    let ran = Ran::from(
        runner()
            .env("TESTKIT_SECRETS_DIR", &secrets)
            .arg("run")
            .arg(suite.path())
            .args(["--run-id", &run_id, "-E", "test(capabilities_answer)"])
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.contains(&format!(
            "taking over the secrets dir of run {run_id} from testkit-runner pid {}, which is gone",
            std::process::id()
        )),
        "{}",
        ran.stdout
    );
}

/// `pod down` of a pod a run is using says which run it interrupts (the
/// run id and its runner's pid); the run names the stop as a stop by `pod
/// down` and its pid, never as a crash.
#[test]
fn pod_down_mid_run_is_named_as_a_stop_and_names_the_run_it_interrupts() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("down");
    let running = run_in_mode(suite.path(), pods.path(), "hold", |c| {
        c.args(["--run-id", &run_id, "-E", "test(create_two)"]);
    });
    let runner_pid = running.pid().as_raw();
    let (name, _, _) = the_pod(pods.path());
    let down = runner()
        .env("TESTKIT_PODS_DIR", pods.path())
        .args(["pod", "down", &name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let down_pid = down.id();
    let down = Ran::from(down.wait_with_output().unwrap());
    release(suite.path());
    let ran = running
        .finish_within(Duration::from_secs(120))
        .expect("the run ended");
    assert_eq!(down.code, 0, "{}", down.stderr);
    let said = format!("{}{}", down.stdout, down.stderr);
    assert!(
        said.contains(&format!("run {run_id}")) && said.contains(&format!("pid {runner_pid}")),
        "{said}"
    );
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains(&format!(
            "the pod was stopped by `pod down` (pid {down_pid}) mid-run"
        )),
        "{evidence}"
    );
    assert!(!evidence.contains("crash"), "{evidence}");
    assert!(!ran.stdout.contains("the pod crashed"), "{}", ran.stdout);
}

/// A pod that takes two minutes to boot: a shell that sleeps, then becomes
/// `sandboxd`.
const SLOW_BOOT: &str = r#"
[pod]
command = ["sh", "-c", "sleep 120; exec sandboxd serve \"$@\"", "sh"]
"#;

/// SIGKILL, SIGINT or SIGTERM 1 s into a two-minute boot: nothing the boot
/// started outlives the runner by more than the bound, and the pod's
/// private dir (under the runner's TMPDIR) and the run's secrets dir are
/// gone with it. SIGINT and SIGTERM are acted on at once, not once the pod
/// is up: the run ends well before the boot would have.
#[test]
fn a_runner_killed_or_interrupted_mid_boot_leaves_nothing() {
    for signal in [Signal::SIGKILL, Signal::SIGINT, Signal::SIGTERM] {
        let suite = fixture("suite");
        let config = suite.path().join("testkit.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("{SLOW_BOOT}\n{text}")).unwrap();
        let pods = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let tmp = scratch.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let secrets = scratch.path().join("secrets");
        let mut command = runner();
        command
            .env("TESTKIT_PODS_DIR", pods.path())
            .env("TESTKIT_SECRETS_DIR", &secrets)
            .env("TMPDIR", &tmp)
            .arg("run")
            .arg(suite.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = Running(Some(command.spawn().unwrap()));
        let runner_pid = child.pid().as_raw();
        // The boot has begun once the shell sleeps; the suite was built
        // before it.
        let booting = || {
            descendants(runner_pid)
                .iter()
                .any(|(p, _)| testkit_engine::process::command_of(*p).starts_with("sleep 120"))
        };
        assert!(
            wait_for(Duration::from_secs(240), booting),
            "{signal}: the boot began"
        );
        std::thread::sleep(Duration::from_secs(1));
        let started = descendants(runner_pid);
        let private: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("testkit-pod-")
            })
            .collect();
        assert_eq!(
            private.len(),
            1,
            "{signal}: the pod's private dir: {private:?}"
        );
        assert!(secrets.is_dir(), "{signal}: the run's secrets dir exists");
        let signalled = std::time::Instant::now();
        kill(child.pid(), signal).unwrap();
        let ran = child.finish_within(Duration::from_secs(30));
        let took = signalled.elapsed();
        let left = || {
            started
                .iter()
                .filter(|(p, ticks)| testkit_engine::process::is_running(*p, *ticks))
                .copied()
                .collect::<Vec<_>>()
        };
        let gone = wait_for(Duration::from_secs(15), || {
            left().is_empty() && !private[0].exists() && !secrets.exists()
        });
        let still = left();
        for (p, _) in &still {
            let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
        }
        assert!(still.is_empty(), "{signal}: left running: {still:?}");
        assert!(
            gone,
            "{signal}: private dir left {}, secrets dir left {}",
            private[0].exists(),
            secrets.exists()
        );
        if signal != Signal::SIGKILL {
            let ran = ran.unwrap_or_else(|| panic!("{signal}: the runner did not end"));
            // A boot of two minutes, and a runner that ended within the
            // 30 s it was given: it did not wait for the boot, however
            // loaded the machine.
            assert!(
                took < Duration::from_secs(120),
                "{signal}: the runner waited for the boot ({took:?}): {}",
                ran.stdout
            );
            let (up, why) = ran.verdict("up");
            assert_eq!(up, "fail", "{signal}: {why}");
            assert!(
                why.contains("interrupted while the pod booted"),
                "{signal}: {why}"
            );
            // Ctrl-C and SIGTERM alike: interrupted, cleanup ran.
            assert_eq!(ran.code, 130, "{signal}: {}", ran.stdout);
        }
    }
}

/// The watchdog runs with an empty environment: a preloaded library or a
/// variable that broke the runner does not reach it.
#[test]
fn the_watchdog_inherits_nothing_of_the_runners_environment() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let child = slow_run_with(suite.path(), pods.path(), |c| {
        c.env("TESTKIT_WATCHDOG_PROBE", "inherited");
    });
    let watchdog: Vec<i32> = descendants(child.pid().as_raw())
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| testkit_engine::process::command_of(*p).contains("watch-pod"))
        .collect();
    assert_eq!(watchdog.len(), 1, "one watchdog: {watchdog:?}");
    let env = std::fs::read(format!("/proc/{}/environ", watchdog[0])).unwrap();
    let env = String::from_utf8_lossy(&env);
    assert!(
        !env.contains("TESTKIT_WATCHDOG_PROBE") && !env.contains("PATH="),
        "the watchdog's environment: {env}"
    );
}

/// While a run's pod runs its `[pod] setup` command, and then while it
/// boots, `pod ls` lists it with that phase, and `pod down` stops it: the
/// run's up phase names the stop, and nothing of the boot is left.
#[test]
fn a_booting_pod_is_listed_with_its_phase_and_pod_down_stops_it() {
    let setup = r#"
[pod]
setup = [["sh", "-c", "sleep 120"]]
"#;
    for (phase, config_head) in [("setup", setup), ("booting", SLOW_BOOT)] {
        let suite = fixture("suite");
        let config = suite.path().join("testkit.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("{config_head}\n{text}")).unwrap();
        let pods = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let mut command = runner();
        command
            .env("TESTKIT_PODS_DIR", pods.path())
            .env("TMPDIR", scratch.path())
            .arg("run")
            .arg(suite.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = Running(Some(command.spawn().unwrap()));
        let ls = || {
            Ran::from(
                runner()
                    .env("TESTKIT_PODS_DIR", pods.path())
                    .args(["pod", "ls"])
                    .output()
                    .unwrap(),
            )
        };
        let mut listed = None;
        wait_for(Duration::from_secs(240), || {
            listed = ls()
                .stdout
                .lines()
                .find(|l| l.starts_with("booting-"))
                .map(str::to_owned);
            listed.is_some()
        });
        let listed = listed.unwrap_or_else(|| panic!("{phase}: pod ls never listed the boot"));
        let words: Vec<&str> = listed.split_whitespace().collect();
        assert_eq!(words[1], phase, "{listed}");
        let booting = descendants(child.pid().as_raw());
        let down = Ran::from(
            runner()
                .env("TESTKIT_PODS_DIR", pods.path())
                .args(["pod", "down", words[0]])
                .output()
                .unwrap(),
        );
        assert_eq!(down.code, 0, "{phase}: {}{}", down.stdout, down.stderr);
        assert!(
            down.stderr.contains("stopping it interrupts that run"),
            "{phase}: {}",
            down.stderr
        );
        let ran = child
            .finish_within(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{phase}: the run did not end"));
        let (up, why) = ran.verdict("up");
        assert_eq!(up, "fail", "{phase}: {why}");
        assert!(
            why.contains("stopped by `pod down`") && why.contains("while it booted"),
            "{phase}: {why}"
        );
        let left: Vec<_> = booting
            .iter()
            .filter(|(p, t)| testkit_engine::process::is_running(*p, *t))
            .collect();
        assert!(left.is_empty(), "{phase}: left running: {left:?}");
        let private = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("testkit-pod-"))
            .collect::<Vec<_>>();
        assert!(private.is_empty(), "{phase}: {private:?} left");
        assert!(
            std::fs::read_dir(pods.path()).unwrap().next().is_none(),
            "{phase}: a pod record is left"
        );
    }
}

/// A second Ctrl-C while the tests clean up after the first hurries them:
/// the runner kills the test processes at once (saying so), their reapers
/// delete and verify what they held, and the residue sweep and teardown
/// still run; the run exits 130.
#[test]
fn a_second_ctrl_c_kills_the_cleaning_tests_and_the_sweep_and_teardown_still_run() {
    let suite = fixture("suite");
    let pods = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    // Each delete takes 8 s to finish (the kind allows 10 s): the test's own
    // cleanup of its two sandboxes, under a long grace, takes 16 s or more.
    let pod = crate::CallerPod::start_with(&["--fault", "delete-delay=8s"]);
    let child = run_in_mode(suite.path(), pods.path(), "slow", |c| {
        c.env("TESTKIT_GRACE", "120s")
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .arg("--results")
            .arg(results.path())
            .args(["-E", "test(create_two)"]);
    });
    let journal = || testkit_engine::resource::read_journal(results.path());
    kill(child.pid(), Signal::SIGINT).unwrap();
    let cleaning = wait_for(Duration::from_secs(60), || {
        journal()
            .iter()
            .any(|e| e.event == testkit_engine::resource::Event::Deleted)
    });
    assert!(cleaning, "the test began its cleanup: {:#?}", journal());
    kill(child.pid(), Signal::SIGINT).unwrap();
    let ran = child
        .finish_within(Duration::from_secs(180))
        .expect("the twice interrupted run ended");
    assert_eq!(ran.code, 130);
    assert!(
        ran.stderr
            .contains("Ctrl-C again: killing the tests; the residue sweep and teardown still run"),
        "{}",
        ran.stderr
    );
    let entries = journal();
    let test_pid = entries[0].pid;
    let verified_by_test = entries
        .iter()
        .filter(|e| e.event == testkit_engine::resource::Event::Verified && e.pid == test_pid)
        .count();
    assert!(
        verified_by_test < 2,
        "the test process was left to finish its cleanup: {entries:#?}"
    );
    let (verdict, evidence) = ran.verdict("residue");
    assert_ne!(verdict, "skip", "residue: {evidence}");
    // Teardown ran: it leaves a caller's pod running, and says so.
    let (_, evidence) = ran.verdict("down");
    assert!(evidence.contains("never stops it"), "down: {evidence}");
    // The reaper, or else the residue sweep, deleted both sandboxes.
    let gone = wait_for(Duration::from_secs(60), || {
        sandboxes_of(&pod, &ran.run_id()).is_empty()
    });
    assert!(gone, "{:?}", sandboxes_of(&pod, &ran.run_id()));
}
