//! One running `sandboxd`: started isolated, checked healthy within a bound,
//! stopped with its whole process group.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::binary::sandboxd_bin;

/// How long sandboxd may take to print its handle, and then to answer health.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long one health request may take to connect and to answer.
const READ_LIMIT: Duration = Duration::from_secs(5);
/// How long sandboxd may take to shut down after SIGTERM: it gives its own
/// sandboxes a grace period and open connections 5 s.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// How long the group may take to drain once its leader is reaped.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// Lines of the log a failure shows.
const LOG_TAIL: usize = 40;

/// The variables sandboxd keeps from the test's environment; everything
/// else is dropped, so the developer's settings cannot change its behavior.
const INHERITED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ", "RUST_BACKTRACE", "RUST_LOG"];

/// A running `sandboxd`, stopped on drop.
///
/// It listens on a free port of 127.0.0.1, runs in its own process group
/// with a scrubbed environment (`HOME` is its home, `TMPDIR` a private
/// folder), and writes its stderr (and any stdout after the handle) to
/// [`log_path`](Self::log_path). The handle it printed is kept, and written
/// to [`handle_file`](Self::handle_file) for code that reads a handle file.
///
/// Every failure to start panics with what happened and the tail of the log.
pub struct Sandboxd {
    child: Option<Child>,
    status: Option<ExitStatus>,
    /// Whether its group was seen gone: never signal the id again after,
    /// it may belong to someone else by then.
    drained: bool,
    pid: i32,
    home: PathBuf,
    log: PathBuf,
    handle_file: PathBuf,
    handle_json: String,
    name: String,
    base_url: String,
    port: u16,
    token: String,
    /// The log, the handle file, `TMPDIR`, and the home unless the caller
    /// owns it; deleted on drop after the server stopped.
    _dir: TempDir,
}

impl std::fmt::Debug for Sandboxd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: it is never shown.
        f.debug_struct("Sandboxd")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("pid", &self.pid)
            .field("home", &self.home)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Sandboxd {
    /// Starts `sandboxd serve` in a new temporary home, with `args` after
    /// `--home` and `--listen` (for example `["--fault", "delete-fail=3"]`).
    pub fn start(args: &[&str]) -> Sandboxd {
        let dir = private_dir();
        let home = dir.path().join("home");
        launch(dir, home, args, &[])
    }

    /// Starts `sandboxd serve` on an existing home, which the caller owns
    /// and which outlives the server: a restart keeps identity, token,
    /// sessions and sandboxes.
    pub fn start_in(home: &Path, args: &[&str]) -> Sandboxd {
        launch(private_dir(), home.to_owned(), args, &[])
    }

    /// [`start_in`](Self::start_in) with `env` added to its scrubbed
    /// environment (for example the variable `--token-env` names).
    pub fn start_in_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Sandboxd {
        launch(private_dir(), home.to_owned(), args, env)
    }

    /// The instance name, stable across restarts on one home.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The bearer token (a secret).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// `base_url` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The handle it printed, one JSON object (holds the token).
    pub fn handle_json(&self) -> &str {
        &self.handle_json
    }

    /// A file holding [`handle_json`](Self::handle_json), outside the home.
    pub fn handle_file(&self) -> &Path {
        &self.handle_file
    }

    /// Its home.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The file its stderr goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its process id, which is also its process group's id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Stops its whole group with `SIGSTOP` and returns once every thread
    /// of it is stopped, as a paused container's are; resumed when the
    /// guard drops. `kill` returns before the group stop has taken: one
    /// thread of it starts the stop when it next runs, and until then its
    /// other threads go on (an answer sent after the `kill` was seen on a
    /// loaded machine).
    ///
    /// Panics when the group is not stopped within [`START_LIMIT`].
    pub fn freeze(&self) -> Frozen {
        let frozen = Frozen(self.pid);
        killpg(Pid::from_raw(self.pid), Signal::SIGSTOP)
            .unwrap_or_else(|e| panic!("SIGSTOP to group {}: {e}", self.pid));
        let deadline = Instant::now() + START_LIMIT;
        while !group_stopped(self.pid) {
            assert!(
                Instant::now() < deadline,
                "group {} not stopped {START_LIMIT:?} after SIGSTOP",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        frozen
    }

    /// Whether it is still running (a crash fault may have ended it).
    pub fn is_running(&mut self) -> bool {
        self.reap_if_exited();
        self.child.is_some()
    }

    /// Stops it: SIGTERM to its process group, SIGKILL after a grace period,
    /// then waits for the group to be gone (panicking if it is not). Answers
    /// how it exited; a second call answers the same.
    pub fn stop(&mut self) -> ExitStatus {
        if let Some(mut child) = self.child.take() {
            let group = Pid::from_raw(self.pid);
            let _ = killpg(group, Signal::SIGTERM);
            let status = match wait_child(&mut child, STOP_GRACE) {
                Some(status) => status,
                None => {
                    let _ = killpg(group, Signal::SIGKILL);
                    child.wait().expect("wait for sandboxd")
                }
            };
            self.status = Some(status);
        }
        self.drain_group();
        self.status.expect("a stopped server has a status")
    }

    /// Waits for it to exit by itself (a crash fault), at most `limit`;
    /// panics, leaving it running, if it does not.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        while self.is_running() {
            if Instant::now() >= deadline {
                panic!(
                    "sandboxd (pid {}) still runs {limit:?} later{}",
                    self.pid,
                    log_tail(&self.log)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.drain_group();
        self.status.expect("an exited server has a status")
    }

    fn reap_if_exited(&mut self) {
        if let Some(child) = &mut self.child {
            if let Ok(Some(status)) = child.try_wait() {
                self.status = Some(status);
                self.child = None;
            }
        }
    }

    /// Waits until nothing of its process group is left, SIGKILLing what
    /// outlived the server.
    fn drain_group(&mut self) {
        let group = Pid::from_raw(self.pid);
        if self.drained || wait_group_gone(group, DRAIN_LIMIT) {
            self.drained = true;
            return;
        }
        let _ = killpg(group, Signal::SIGKILL);
        self.drained = wait_group_gone(group, DRAIN_LIMIT);
        if !self.drained && !std::thread::panicking() {
            panic!(
                "process group {} of sandboxd still has processes after SIGKILL",
                self.pid
            );
        }
    }
}

impl Drop for Sandboxd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A folder of the user's alone: it holds the handle, and with it the
/// token.
fn private_dir() -> TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("sandboxd-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap_or_else(|e| panic!("failed to create a temporary folder for sandboxd: {e}"))
}

fn launch(dir: TempDir, home: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Sandboxd {
    let bin = sandboxd_bin();
    let log = dir.path().join("sandboxd.log");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap_or_else(|e| panic!("failed to create {}: {e}", tmp.display()));
    let mut cmd = serve_command(bin, &home, &tmp, &log, args);
    cmd.envs(env.iter().copied());
    let mut child = spawn_ended_with_this_process(cmd)
        .unwrap_or_else(|e| panic!("failed to start {}: {e}", bin.display()));
    let pid = child.id() as i32;

    // The handle is its first line of stdout; the rest goes to the log, so
    // that a later write never meets a closed pipe.
    let stdout = child.stdout.take().expect("piped");
    let rx = first_line_then_log(stdout, append_to(&log));
    let starting = Starting {
        bin,
        log: &log,
        pid,
    };
    let line = match rx.recv_timeout(START_LIMIT) {
        Ok(line) if !line.is_empty() => line,
        Ok(_) => starting.failed(child, "sandboxd exited before printing its handle".into()),
        Err(_) => starting.failed(
            child,
            format!("sandboxd printed no handle within {START_LIMIT:?}"),
        ),
    };
    let handle = match parse_handle(&line) {
        Ok(handle) => handle,
        Err(e) => starting.failed(child, format!("sandboxd printed no valid handle: {e}")),
    };
    if let Err(e) = wait_healthy(&mut child, handle.port) {
        starting.failed(child, e);
    }
    let handle_json = line.trim().to_owned();
    let handle_file = dir.path().join("handle.json");
    if let Err(e) = std::fs::write(&handle_file, &handle_json) {
        starting.failed(
            child,
            format!("failed to write {}: {e}", handle_file.display()),
        );
    }
    Sandboxd {
        child: Some(child),
        status: None,
        drained: false,
        pid,
        home,
        log,
        handle_file,
        handle_json,
        name: handle.name,
        base_url: handle.base_url,
        port: handle.port,
        token: handle.token,
        _dir: dir,
    }
}

/// Spawns `cmd` so that it is sent SIGTERM when this process ends, however
/// it ends: a test process killed outright (a timeout's SIGKILL, a
/// cancelled run) never leaves a sandboxd behind, which `Drop` alone
/// cannot promise.
///
/// The kernel sends a parent-death signal when the *thread* that forked
/// the child ends, not the process: so every child is forked by one
/// thread that lives as long as the process, never by a test's thread,
/// which ends with its test while its server may be shared.
fn spawn_ended_with_this_process(mut cmd: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<Request>>> =
        std::sync::OnceLock::new();
    let parent = std::process::id() as i32;
    // SAFETY: prctl and getppid are async-signal-safe; nothing here
    // allocates or takes a lock between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
            // The parent may have died before the signal was armed.
            // (No allocation after fork: an errno, not a message.)
            if nix::unistd::getppid().as_raw() != parent {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("test-support-spawner".into())
            .spawn(move || {
                for (mut cmd, answer) in rx {
                    let _ = answer.send(cmd.spawn());
                }
            })
            .expect("a thread to start servers from");
        std::sync::Mutex::new(tx)
    });
    let (answer, spawned) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send((cmd, answer))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    spawned
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// The log file, opened to append to.
fn append_to(log: &Path) -> File {
    File::options()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("failed to open {}: {e}", log.display()))
}

/// A group stopped by [`Sandboxd::freeze`], resumed (`SIGCONT`) on drop.
#[derive(Debug)]
#[must_use = "the group is resumed when this is dropped"]
pub struct Frozen(i32);

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0), Signal::SIGCONT);
    }
}

/// Whether every thread of every process in group `pgid` is stopped
/// (state `T` in `/proc/<pid>/task/<tid>/stat`), and there is one.
fn group_stopped(pgid: i32) -> bool {
    let mut seen = false;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if rest
            .split_whitespace()
            .nth(2)
            .and_then(|g| g.parse::<i32>().ok())
            != Some(pgid)
        {
            continue;
        }
        seen = true;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            // `T` stopped, `t` traced; an exited thread has no stat left.
            if !matches!(state, Some("T" | "t") | None) {
                return false;
            }
        }
    }
    seen
}

/// `sandboxd serve` on a free loopback port (unless `args` has a `--listen`
/// of its own, e.g. to restart on the same port), in a process group of its
/// own, with a clean environment: stdout piped, stderr to `log`.
fn serve_command(bin: &Path, home: &Path, tmp: &Path, log: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("serve").arg("--home").arg(home);
    if !args
        .iter()
        .any(|a| *a == "--listen" || a.starts_with("--listen="))
    {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    cmd.args(args)
        .env_clear()
        .env("HOME", home)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(append_to(log))
        .process_group(0);
    for var in INHERITED_ENV {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    cmd
}

/// Sends the first line of `stdout` (empty at end of file) on the channel
/// it returns, and copies the rest to `rest`.
fn first_line_then_log(stdout: ChildStdout, mut rest: File) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut reader, &mut rest);
    });
    rx
}

/// A sandboxd that is starting, as its failure to start names it.
struct Starting<'a> {
    bin: &'a Path,
    log: &'a Path,
    pid: i32,
}

impl Starting<'_> {
    /// Ends the sandboxd `child` and its group, and panics with `what`, the
    /// exit status and the log's tail.
    fn failed(&self, mut child: Child, what: String) -> ! {
        let pid = self.pid;
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let status = child.wait();
        let _ = wait_group_gone(Pid::from_raw(pid), DRAIN_LIMIT);
        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
        panic!(
            "{what} (`{} serve`, pid {pid}, {status}){}",
            self.bin.display(),
            log_tail(self.log)
        );
    }
}

struct Handle {
    name: String,
    base_url: String,
    port: u16,
    token: String,
}

/// Reads the handle line; errors name the field, never show the token.
fn parse_handle(line: &str) -> Result<Handle, String> {
    let value: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let text = |field: &str| {
        value[field]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("`{field}` is not a non-empty string"))
    };
    let port = value["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)
        .ok_or("`port` is not a port number")?;
    Ok(Handle {
        name: text("name")?,
        base_url: text("base_url")?,
        port,
        token: text("token")?,
    })
}

/// Polls `GET /api/health` until it answers 200 with status ok; every
/// connect and read is bounded, and so is the whole wait.
fn wait_healthy(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let last = match health(port) {
            Ok(answer) if answer.starts_with("HTTP/1.1 200") && answer.contains("\"ok\"") => {
                return Ok(());
            }
            Ok(answer) => format!("it answered {:?}", first_line(&answer)),
            Err(e) => e,
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "sandboxd exited with {status} before it was healthy ({last})"
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "GET /api/health on port {port} failed for {START_LIMIT:?}: {last}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn health(port: u16) -> Result<String, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, READ_LIMIT)
        .map_err(|e| format!("failed to connect to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(READ_LIMIT))
        .and_then(|()| stream.set_write_timeout(Some(READ_LIMIT)))
        .map_err(|e| format!("failed to set timeouts: {e}"))?;
    write!(
        stream,
        "GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("failed to send the request: {e}"))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| format!("failed to read the answer within {READ_LIMIT:?}: {e}"))?;
    Ok(answer)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `group` is gone within `limit` (`kill(-pgid, 0)` fails with
/// ESRCH); members reparented to init can take a moment to be reaped.
pub(crate) fn wait_group_gone(group: Pid, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while killpg(group, None) != Err(Errno::ESRCH) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The last lines of the log, for a failure message.
fn log_tail(log: &Path) -> String {
    let text = match std::fs::read_to_string(log) {
        Ok(text) if !text.trim().is_empty() => text,
        Ok(_) => return format!("; its log {} is empty", log.display()),
        Err(e) => return format!("; failed to read its log {}: {e}", log.display()),
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n");
    format!("\n--- last lines of {}:\n{tail}", log.display())
}
