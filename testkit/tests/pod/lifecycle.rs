//! Pods that testkit starts: boot, auth, boot failures, verified teardown.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use testkit_engine::config::BootstrapStep;
use testkit_engine::pod::{check_auth, launch, LaunchError};

use crate::support::*;

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 2..].chars().next())
        .is_some_and(|state| state != 'Z' && state != 'X')
}

#[test]
fn boots_checks_auth_and_stops_verified() {
    let logs = tempfile::tempdir().unwrap();
    let rt = runtime();
    let pod = rt
        .block_on(launch(&sandboxd_spec(logs.path(), &[])))
        .unwrap();
    assert!(pod.health.ok(), "{}", pod.health.summary());
    assert!(pod.home.is_dir());
    let config = testkit_engine::config::SuiteConfig::default();
    let connected = rt
        .block_on(testkit_engine::pod::connect(
            pod.handle.clone(),
            &config,
            None,
        ))
        .unwrap();
    let auth = rt
        .block_on(check_auth(&connected, Duration::from_secs(10)))
        .expect("sandboxd's auth has a probe");
    assert!(auth.ok(), "{}", auth.summary());
    assert_eq!(auth.without_token.status, Some(401));
    let (pid, private) = (pod.pid as i32, pod.private_dir.clone());
    let token = pod.handle.token().to_owned();
    let report = rt.block_on(pod.stop(Duration::from_secs(10))).unwrap();
    assert!(report.drained_after_term, "{report:?}");
    assert!(!alive(pid));
    assert!(!private.exists());
    // The logs are kept, redacted.
    let stdout = std::fs::read_to_string(logs.path().join("pod.stdout.log")).unwrap();
    assert!(
        stdout.contains("[REDACTED]") && !stdout.contains(&token),
        "{stdout}"
    );
    assert!(std::fs::read_to_string(logs.path().join("pod.stderr.log"))
        .unwrap()
        .contains("listening"));
}

#[test]
fn a_missing_program_says_how_to_fix_it() {
    let logs = tempfile::tempdir().unwrap();
    let err = runtime()
        .block_on(launch(&spec(
            logs.path(),
            vec!["no-such-pod-program".into()],
        )))
        .unwrap_err();
    assert!(matches!(err, LaunchError::ProgramNotFound { .. }), "{err}");
    // How to mend it, for a program of the suite's own as for testkit's:
    // nothing that only holds in a checkout of testkit.
    assert!(
        err.to_string().contains("`no-such-pod-program`")
            && err.to_string().contains("put it on PATH")
            && err.to_string().contains("`[pod] command`")
            && !err.to_string().contains("testkit workspace"),
        "{err}"
    );
}

fn assert_logs_kept(logs: &Path, err: &LaunchError) {
    assert!(
        err.to_string().contains(&logs.display().to_string()),
        "{err}"
    );
    assert!(logs.join("pod.stderr.log").is_file() && logs.join("pod.stdout.log").is_file());
}

#[test]
fn a_pod_that_exits_early_is_reported_with_its_last_words() {
    let logs = tempfile::tempdir().unwrap();
    let err = runtime()
        .block_on(launch(&spec(
            logs.path(),
            sh("echo 'cannot open database' >&2; exit 3"),
        )))
        .unwrap_err();
    assert!(matches!(err, LaunchError::ExitedEarly { .. }), "{err}");
    assert!(
        err.to_string().contains("cannot open database") && err.to_string().contains('3'),
        "{err}"
    );
    assert_logs_kept(logs.path(), &err);
}

#[test]
fn a_pod_that_never_becomes_healthy_times_out_on_inactivity() {
    let logs = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("pid");
    let mut spec = spec(
        logs.path(),
        sh(&format!(
            "echo 'loading plugins'; echo $$ > '{}'; exec sleep 300",
            pid_file.display()
        )),
    );
    spec.inactivity_timeout = Duration::from_secs(1);
    let err = runtime().block_on(launch(&spec)).unwrap_err();
    // The pod that never came up was ended, not left to sleep.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("the pod that timed out (pid {pid}) was left running");
    }
    assert!(matches!(err, LaunchError::Timeout { .. }), "{err}");
    assert!(
        err.to_string().contains("no progress for 1s")
            && err.to_string().contains("loading plugins"),
        "{err}"
    );
    assert_logs_kept(logs.path(), &err);
    assert!(std::fs::read_to_string(logs.path().join("pod.stdout.log"))
        .unwrap()
        .contains("loading plugins"));
}

#[test]
fn progress_resets_the_inactivity_timeout_but_not_the_ceiling() {
    let logs = tempfile::tempdir().unwrap();
    let mut spec = spec(logs.path(), sh("while true; do echo tick; sleep 0.2; done"));
    spec.inactivity_timeout = Duration::from_secs(1);
    spec.ceiling = Duration::from_secs(3);
    let err = runtime().block_on(launch(&spec)).unwrap_err();
    assert!(
        err.to_string().contains("hard ceiling 3s") && err.to_string().contains("tick"),
        "{err}"
    );
}

/// A pod that is its process group says so in its handle, and what a hung
/// test's report reads of it follows the pod: running with its last lines,
/// paused when frozen, exited when gone.
#[test]
fn a_process_pods_handle_describes_it_running_paused_and_exited() {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let logs = tempfile::tempdir().unwrap();
    let script = format!(
        "echo 'a line before serving' >&2; exec '{}' serve --home \"$0\" --listen 127.0.0.1:$TESTKIT_POD_PORT",
        sandboxd().display()
    );
    let rt = runtime();
    let pod = rt
        .block_on(launch(&spec(logs.path(), sh(&script))))
        .unwrap();
    // Through the handle's JSON, as a test process reads it.
    let handle = testkit_engine::pod::PodHandle::parse(
        &pod.handle.to_json(),
        &testkit_engine::pod::HandlePolicy::from_suite(
            &testkit_engine::config::SuiteConfig::default(),
        ),
    )
    .unwrap();
    let process = handle
        .process()
        .expect("a process pod's handle names its group")
        .clone();
    assert_eq!(process.pgid, pod.pgid);
    let running = process.describe(20);
    assert!(
        running.starts_with(&format!("node pod (process group {}): running;", pod.pgid))
            && running.contains("\n    a line before serving"),
        "{running}"
    );
    let group = Pid::from_raw(pod.pgid);
    killpg(group, Signal::SIGSTOP).unwrap();
    // The kernel stops the process when it next runs: until then, running.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while process.state() != "paused" && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let paused = process.state();
    killpg(group, Signal::SIGCONT).unwrap();
    assert_eq!(paused, "paused");
    let pid = pod.pid as i32;
    rt.block_on(pod.stop(Duration::from_secs(10))).unwrap();
    assert!(!alive(pid));
    assert_eq!(process.state(), "exited");
}

#[test]
fn a_pod_printing_a_bad_handle_is_refused() {
    let logs = tempfile::tempdir().unwrap();
    let bad = r#"{"name":"x","base_url":"http://10.1.2.3:9","port":9,"token":"abcdefgh"}"#;
    let err = runtime()
        .block_on(launch(&spec(
            logs.path(),
            sh(&format!("echo '{bad}'; sleep 300")),
        )))
        .unwrap_err();
    assert!(matches!(err, LaunchError::BadHandle { .. }), "{err}");
    assert!(
        err.to_string().contains("`base_url`") && err.to_string().contains("loopback"),
        "{err}"
    );
}

#[test]
fn teardown_kills_what_ignores_sigterm_and_verifies() {
    let logs = tempfile::tempdir().unwrap();
    let script = format!(
        "trap '' TERM; sleep 300 & echo $! > \"$0/../stubborn\"; exec '{}' serve --home \"$0\" --listen 127.0.0.1:$TESTKIT_POD_PORT",
        sandboxd().display()
    );
    let rt = runtime();
    let pod = rt
        .block_on(launch(&spec(logs.path(), sh(&script))))
        .unwrap();
    let stubborn: i32 = std::fs::read_to_string(pod.private_dir.join("stubborn"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(stubborn));
    let (pid, private) = (pod.pid as i32, pod.private_dir.clone());
    let report = rt.block_on(pod.stop(Duration::from_millis(500))).unwrap();
    assert!(!report.drained_after_term, "{report:?}");
    assert!(report.killed.contains(&stubborn), "{report:?}");
    assert!(!alive(stubborn) && !alive(pid));
    assert!(!private.exists());
}

#[test]
fn runner_pod_verbs_up_ls_down_and_reclaim_after_kill_9() {
    let runner = crate::support::runner();
    let pods = tempfile::tempdir().unwrap();
    let suite = tempfile::tempdir().unwrap();
    std::fs::write(
        suite.path().join("testkit.toml"),
        format!(
            "[pod]\ncommand = [{:?}, \"serve\"]\n",
            sandboxd().display().to_string()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(runner)
            .args(args)
            .env("TESTKIT_PODS_DIR", pods.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, out) = run(&[
        "pod",
        "up",
        "--json",
        "--suite",
        suite.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    let up: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let name = up["name"].as_str().unwrap().to_owned();
    let pid = up["pid"].as_i64().unwrap() as i32;
    let handle = std::fs::read_to_string(up["handle"].as_str().unwrap()).unwrap();
    let token = serde_json::from_str::<serde_json::Value>(&handle).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!out.contains(&token), "pod up printed the token: {out}");
    let (code, out) = run(&["pod", "ls"]);
    assert!(
        code == Some(0) && out.contains(&name) && out.contains("alive"),
        "{out}"
    );
    let (code, out) = run(&["pod", "status", &name]);
    assert_eq!(code, Some(0), "{out}");

    // A crash: the pod dies without `down`.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, out) = run(&["pod", "ls"]);
    assert!(code == Some(0) && out.contains("dead"), "{out}");
    let (code, out) = run(&["pod", "status", &name]);
    assert_eq!(code, Some(1), "{out}");
    let private: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pods.path().join(&name).join("pod.json")).unwrap())
            .unwrap();
    let private = std::path::PathBuf::from(private["private_dir"].as_str().unwrap());
    assert!(private.exists());
    let (code, out) = run(&["pod", "down", &name]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("already dead"), "{out}");
    assert!(!private.exists() && !pods.path().join(&name).exists());
    let (code, out) = run(&["pod", "down", &name]);
    assert_eq!(code, Some(64), "{out}");
}

/// `[pod] env` gives the pod and its setup commands the handle's fields
/// (a secret among them) in their environment, never on a command line;
/// `[pod] ports` reserves more free ports, as `{port_<name>}`.
#[test]
fn pod_env_carries_secrets_and_pod_ports_reserves_named_ports() {
    let logs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let seen = out.path().display();
    let mut spec = spec(
        logs.path(),
        sh(&format!(
            "echo \"$ADMIN_PASSWORD $PEER_PORT\" > {seen}/pod.env; \
             cat /proc/$$/cmdline > {seen}/pod.cmdline; \
             exec {} serve --home \"$0\" --listen 127.0.0.1:$TESTKIT_POD_PORT",
            sandboxd().display()
        )),
    );
    spec.ready = testkit_engine::config::Ready::Health;
    // The default [auth] sends a token: the made handle has one.
    spec.fields = [
        ("password".to_owned(), "{random}".to_owned()),
        ("token".to_owned(), "{random}".to_owned()),
    ]
    .into();
    spec.ports = vec!["peer".to_owned()];
    spec.env_templates = [
        ("ADMIN_PASSWORD".to_owned(), "{password}".to_owned()),
        ("PEER_PORT".to_owned(), "{port_peer}".to_owned()),
    ]
    .into();
    spec.setup = vec![vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!("echo \"$ADMIN_PASSWORD\" > {seen}/setup.env"),
    ]];
    let rt = runtime();
    let pod = Guard(Some(rt.block_on(launch(&spec)).unwrap()));
    let launched = pod.0.as_ref().unwrap();
    let password = launched.handle.field("password").unwrap().to_owned();
    assert!(password.len() >= 16, "a fresh secret: {password:?}");
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap();
    assert_eq!(
        read("setup.env").trim(),
        password,
        "the setup's environment"
    );
    let pod_env = read("pod.env");
    let (pod_password, peer) = pod_env.trim().split_once(' ').unwrap();
    assert_eq!(pod_password, password, "the pod's environment");
    let peer: u16 = peer.parse().unwrap();
    assert_ne!(
        peer,
        launched.handle.port(),
        "the peer port is a port of its own"
    );
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", peer)).is_ok(),
        "the peer port was free for the pod"
    );
    assert!(
        !read("pod.cmdline").contains(&password),
        "the secret stood on the pod's command line"
    );
}

/// `[pod] bootstrap` runs against the running pod, before the launch
/// returns: here the product's CLI creates a sandbox, its URL and token
/// given by `[pod] env` entries that only the running pod's handle fills.
/// A bootstrap that fails stops the pod and says which command; an entry
/// that nothing fills is named.
#[test]
fn bootstrap_runs_against_the_running_pod_and_a_failure_stops_it() {
    let logs = tempfile::tempdir().unwrap();
    let mut spec = sandboxd_spec(logs.path(), &[]);
    spec.env_templates = [
        ("SANDBOXD_URL".to_owned(), "{base_url}".to_owned()),
        ("SANDBOXD_TOKEN".to_owned(), "{token}".to_owned()),
    ]
    .into();
    spec.bootstrap = vec![BootstrapStep::command(vec![
        sandboxctl().display().to_string(),
        "sandbox".to_owned(),
        "create".to_owned(),
        "made-at-bootstrap".to_owned(),
    ])];
    let rt = runtime();
    let pod = Guard(Some(rt.block_on(launch(&spec)).unwrap()));
    let handle = &pod.0.as_ref().unwrap().handle;
    let status = rt.block_on(async {
        reqwest::Client::new()
            .get(format!(
                "{}/api/sandboxes/made-at-bootstrap",
                handle.base_url()
            ))
            .bearer_auth(handle.token())
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200, "the bootstrap's sandbox");
    drop(pod);

    let logs = tempfile::tempdir().unwrap();
    let parent = tempfile::tempdir().unwrap();
    let mut failing = sandboxd_spec(logs.path(), &[]);
    failing.private_parent = Some(parent.path().to_owned());
    failing.bootstrap = vec![BootstrapStep::command(vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        "echo refusing to bootstrap; exit 3".to_owned(),
    ])];
    let err = rt.block_on(launch(&failing)).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("the pod's bootstrap command")
            && message.contains("exit status: 3")
            && message.contains("refusing to bootstrap"),
        "{message}"
    );
    let log = std::fs::read_to_string(logs.path().join("pod.bootstrap.log")).unwrap();
    assert!(log.contains("refusing to bootstrap"), "{log}");
    // The pod it ran against was up, and was stopped: its private dir
    // (HOME, raw stdout) is gone with it.
    let stderr = std::fs::read_to_string(logs.path().join("pod.stderr.log")).unwrap();
    assert!(stderr.contains("listening"), "the pod was up: {stderr}");
    let left: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    let logs = tempfile::tempdir().unwrap();
    let mut typo = sandboxd_spec(logs.path(), &[]);
    typo.env_templates = [("SANDBOXD_TOKEN".to_owned(), "{tokn}".to_owned())].into();
    let err = rt.block_on(launch(&typo)).unwrap_err().to_string();
    assert!(
        err.contains("pod.env.SANDBOXD_TOKEN") && err.contains("`{tokn}`"),
        "{err}"
    );
}

/// The fake secret that must not reach the pod, and the sign that this test
/// binary runs as the launcher whose environment holds it.
const LAUNCHER_SECRET: (&str, &str) = ("AWS_SECRET_ACCESS_KEY", "fake-launcher-secret");

/// What the pod may see: `INHERITED_ENV` of `testkit-engine/src/pod/launch.rs`,
/// the variables testkit sets, the spec's `env`, and what `sh` sets itself.
const POD_MAY_SEE: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "HOME",
    "TMPDIR",
    "TESTKIT_POD_PORT",
    "ENV_DUMP",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
];

/// A pod testkit launches gets a scrubbed environment: a secret in the
/// launcher's environment never reaches it. The test runs itself again as
/// the launcher, with the secret in its environment.
#[test]
fn the_pod_inherits_only_the_allowlist_not_the_launchers_secrets() {
    let (var, value) = LAUNCHER_SECRET;
    if std::env::var(var).as_deref() != Ok(value) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lifecycle::the_pod_inherits_only_the_allowlist_not_the_launchers_secrets",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(var, value)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "the launcher failed: {text}");
        assert!(
            text.contains("1 passed"),
            "the launcher ran no test: {text}"
        );
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let dump = logs.path().join("pod.env");
    let script = format!(
        "env -0 > \"$ENV_DUMP\"; exec '{}' serve --home \"$0\" --listen 127.0.0.1:$TESTKIT_POD_PORT",
        sandboxd().display()
    );
    let mut spec = spec(logs.path(), sh(&script));
    spec.env
        .insert("ENV_DUMP".to_owned(), dump.display().to_string());
    let rt = runtime();
    let pod = Guard(Some(rt.block_on(launch(&spec)).unwrap()));
    let launched = pod.0.as_ref().unwrap();
    let text = std::fs::read_to_string(&dump).unwrap();
    let seen: BTreeMap<&str, &str> = text
        .split('\0')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    assert!(!seen.contains_key(var), "{var} reached the pod: {seen:#?}");
    let unexpected: Vec<&&str> = seen.keys().filter(|k| !POD_MAY_SEE.contains(k)).collect();
    assert!(
        unexpected.is_empty(),
        "the pod got {unexpected:?} from the launcher: {seen:#?}"
    );
    assert_eq!(
        seen.get("HOME").copied(),
        launched.home.to_str(),
        "{seen:#?}"
    );
    assert_eq!(
        seen.get("TMPDIR").copied(),
        launched.private_dir.to_str(),
        "{seen:#?}"
    );
    assert_eq!(
        seen.get("TESTKIT_POD_PORT").copied(),
        Some(launched.handle.port().to_string().as_str()),
        "{seen:#?}"
    );
}

/// A service that takes its address and data dir from the environment and
/// rejects flags it does not know: its `[pod] command` uses no
/// placeholder, its `[pod] env` does, and testkit appends no `--home …
/// --listen …` to it (it used to, and the service stopped with "flag
/// provided but not defined").
#[test]
fn placeholders_used_only_in_pod_env_count_and_no_flags_are_appended() {
    let logs = tempfile::tempdir().unwrap();
    let mut spec = spec(
        logs.path(),
        vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            format!(
                "if [ $# -gt 0 ]; then echo \"flag provided but not defined: $1\" >&2; exit 2; fi; \
                 exec {} serve --home \"$DATA_DIR\" --listen \"$LISTEN_ADDR\"",
                sandboxd().display()
            ),
            "kv-server".to_owned(),
        ],
    );
    spec.env_templates = [
        ("DATA_DIR".to_owned(), "{home}".to_owned()),
        ("LISTEN_ADDR".to_owned(), "{listen}".to_owned()),
    ]
    .into();
    let rt = runtime();
    let pod = Guard(Some(
        rt.block_on(launch(&spec)).unwrap_or_else(|e| panic!("{e}")),
    ));
    let launched = pod.0.as_ref().unwrap();
    // It lives where `{home}` said: sandboxd writes its state in its HOME.
    assert!(
        std::fs::read_dir(&launched.home).unwrap().next().is_some(),
        "nothing in the pod's HOME {}",
        launched.home.display()
    );
    let stderr = std::fs::read_to_string(logs.path().join("pod.stderr.log")).unwrap();
    assert!(!stderr.contains("flag provided"), "{stderr}");
}

/// `[pod] bootstrap` without `sh -c`: a secret reaches a command on its
/// stdin (`{ command, stdin }`), and a service's first objects are made by
/// an HTTP request to it (`{ request, body, headers }`), no `curl`. A
/// request that answers an error, or a 2xx with something at its `error`
/// pointer (a service that answers 200 with `{"error": …}`), fails the boot,
/// naming the request.
#[test]
fn bootstrap_takes_stdin_and_http_requests() {
    let rt = runtime();
    let logs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut spec = sandboxd_spec(logs.path(), &[]);
    let read_to = out.path().join("stdin.txt");
    // Was: ["sh", "-c", "printf \"$PW\" | tool"]; a tool that reads its
    // secret from stdin, and nothing on its command line.
    spec.bootstrap = vec![
        serde_json::from_value(serde_json::json!({
            "command": ["/bin/sh", "-c", format!("cat > {}", read_to.display())],
            "stdin": "{token}\n",
        }))
        .unwrap(),
        // Was: ["sh", "-c", "curl -fsS -X POST … | grep -v error"].
        serde_json::from_value(serde_json::json!({
            "request": "POST /api/sandboxes",
            "body": "{\"name\": \"made-by-request\"}",
            "headers": { "Authorization": "Bearer {token}" },
            "error": "/error",
        }))
        .unwrap(),
    ];
    let pod = Guard(Some(
        rt.block_on(launch(&spec)).unwrap_or_else(|e| panic!("{e}")),
    ));
    let handle = &pod.0.as_ref().unwrap().handle;
    assert_eq!(
        std::fs::read_to_string(&read_to).unwrap(),
        format!("{}\n", handle.token()),
        "the command's stdin"
    );
    let status = rt.block_on(async {
        reqwest::Client::new()
            .get(format!(
                "{}/api/sandboxes/made-by-request",
                handle.base_url()
            ))
            .bearer_auth(handle.token())
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200, "the request's sandbox");
    drop(pod);

    for (step, wanted) in [
        (
            serde_json::json!({ "request": "POST /api/sandboxes", "body": "{\"name\": \"x\"}" }),
            "answered 401",
        ),
        (
            // sandboxd's health answers 200 with `status`: it stands for a
            // service that answers 200 with an `error` field.
            serde_json::json!({ "request": "GET /api/health", "error": "/status" }),
            "answered 200 OK with an error at \"/status\"",
        ),
    ] {
        let logs = tempfile::tempdir().unwrap();
        let mut failing = sandboxd_spec(logs.path(), &[]);
        failing.bootstrap = vec![serde_json::from_value(step).unwrap()];
        let err = rt.block_on(launch(&failing)).unwrap_err().to_string();
        assert!(
            err.contains("the pod's bootstrap command") && err.contains(wanted),
            "{err}"
        );
        let log = std::fs::read_to_string(logs.path().join("pod.bootstrap.log")).unwrap();
        assert!(log.contains("answered"), "{log}");
    }
}
