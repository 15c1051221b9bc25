//! The pod starter against the real sandboxd: it starts healthy, stops with
//! its group, restarts on a kept home, and a failed start says why.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use test_support::Sandboxd;

fn group_gone(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None) == Err(Errno::ESRCH)
}

#[test]
fn starts_isolated_and_stops_with_its_group() {
    let mut pod = Sandboxd::start(&[]);
    assert_eq!(pod.base_url(), format!("http://127.0.0.1:{}", pod.port()));
    assert_eq!(
        pod.url("/api/health"),
        format!("{}/api/health", pod.base_url())
    );
    let handle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pod.handle_file()).unwrap()).unwrap();
    assert_eq!(handle["token"], pod.token());
    assert_eq!(
        handle.to_string(),
        serde_json::from_str::<serde_json::Value>(pod.handle_json())
            .unwrap()
            .to_string()
    );
    assert!(
        !pod.handle_file().starts_with(pod.home()),
        "the handle is written outside HOME"
    );
    assert!(pod.home().is_dir());
    // The folder of the handle (the token) is its user's alone.
    {
        use std::os::unix::fs::PermissionsExt;
        let folder = pod.handle_file().parent().unwrap();
        let mode = std::fs::metadata(folder).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", folder.display());
    }
    assert!(pod.is_running());
    let environ = std::fs::read(format!("/proc/{}/environ", pod.pid())).unwrap();
    let vars: Vec<String> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| {
            String::from_utf8_lossy(v)
                .split('=')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        vars.iter().all(|v| [
            "PATH",
            "HOME",
            "TMPDIR",
            "LANG",
            "LC_ALL",
            "TZ",
            "RUST_BACKTRACE",
            "RUST_LOG"
        ]
        .contains(&v.as_str())),
        "the environment is not scrubbed: {vars:?}"
    );
    let pid = pod.pid();
    let home = pod.home().to_owned();
    assert!(pod.stop().success(), "{}", pod.log_text());
    assert!(group_gone(pid));
    assert!(!pod.is_running());
    assert!(pod.stop().success(), "a second stop answers the same");
    drop(pod);
    assert!(!home.exists(), "the temporary home is deleted");
}

#[test]
fn a_restart_on_a_kept_home_keeps_the_identity() {
    let home = tempfile::tempdir().unwrap();
    let first = Sandboxd::start_in(home.path(), &["--token-window", "30m"]);
    let (name, token) = (first.name().to_owned(), first.token().to_owned());
    drop(first);
    assert!(home.path().is_dir(), "the caller's home is kept");
    let second = Sandboxd::start_in(home.path(), &[]);
    assert_eq!(
        (second.name(), second.token()),
        (name.as_str(), token.as_str())
    );
}

#[test]
fn a_server_that_exits_by_itself_is_reaped() {
    // crash-after=0 aborts on the first request that is not a health check.
    let mut pod = Sandboxd::start(&["--fault", "crash-after=0"]);
    let addr = format!("127.0.0.1:{}", pod.port());
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET /api/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    let status = pod.wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    assert!(group_gone(pod.pid()));
    assert!(pod.log_text().contains("crash-after"), "{}", pod.log_text());
}

#[test]
fn a_failed_start_says_what_happened_and_shows_the_log() {
    let panic = std::panic::catch_unwind(|| Sandboxd::start(&["--no-such-flag"])).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("exited before printing its handle"),
        "{message}"
    );
    assert!(
        message.contains("--no-such-flag"),
        "the log tail is shown: {message}"
    );
}

/// A test process killed outright (SIGKILL: no `Drop` runs) leaves no
/// sandboxd behind: the server is told to stop when its test process
/// ends, even when the test's thread that started it has already ended.
#[test]
fn a_killed_test_process_leaves_no_server_behind() {
    if let Some(pid_file) = std::env::var_os("START_STOP_HOLD") {
        // The child: start a server from a thread that then ends, say
        // its pid, and wait to be killed.
        let pod = std::thread::spawn(|| Sandboxd::start(&[])).join().unwrap();
        std::fs::write(&pid_file, pod.pid().to_string()).unwrap();
        std::thread::sleep(Duration::from_secs(120));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_test_process_leaves_no_server_behind",
            "--nocapture",
        ])
        .env("START_STOP_HOLD", &pid_file)
        // The killed child never removes its server's temporary folder:
        // it makes it in this test's, which goes with the test.
        .env("TMPDIR", dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                break pid;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child started no server"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The child's thread that started the server has ended: it still runs.
    assert!(!group_gone(pid), "the server outlived its starting thread");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !group_gone(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone = group_gone(pid);
    if !gone {
        let _ = killpg(Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    assert!(gone, "sandboxd {pid} outlived its killed test process");
}
