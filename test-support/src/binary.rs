//! Where the `sandboxd` and `sandboxctl` executables come from: cargo builds
//! them (a no-op when they are fresh) once per process, into the target dir
//! the running test was built in, so every crate's tests use the same build.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Longest a build of `sandboxd` may take: a cold build on a loaded machine.
const BUILD_LIMIT: Duration = Duration::from_secs(20 * 60);

struct Binaries {
    sandboxd: PathBuf,
    sandboxctl: PathBuf,
}

/// The `sandboxd` executable of this checkout, built if it is not.
///
/// The first call of a process runs `cargo build -p sandboxd --bins` (other
/// threads wait for it); later calls, and calls after a failed build, reuse
/// its outcome. Panics with cargo's output when the build fails.
pub fn sandboxd_bin() -> &'static Path {
    &binaries().sandboxd
}

/// The `sandboxctl` executable, from the same build as [`sandboxd_bin`].
pub fn sandboxctl_bin() -> &'static Path {
    &binaries().sandboxctl
}

fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Result<Binaries, String>> = OnceLock::new();
    match BINARIES.get_or_init(build) {
        Ok(binaries) => binaries,
        Err(e) => panic!("{e}"),
    }
}

/// The root of this workspace.
pub(crate) fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support sits in the workspace root")
}

/// The target dir the running test was built in (the nearest ancestor of
/// its executable that cargo tagged), so that a nested build reuses its
/// artifacts; else an absolute `CARGO_TARGET_DIR`; else the workspace's.
///
/// A relative `CARGO_TARGET_DIR` cannot be trusted here: it is relative to
/// the directory the outer cargo was started in, which a test does not know.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    exe.as_deref()
        .and_then(|exe| exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()))
        .map(Path::to_owned)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute())
        })
        .unwrap_or_else(|| workspace().join("target"))
}

fn build() -> Result<Binaries, String> {
    let manifest = workspace().join("sandboxd/Cargo.toml");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args(["build", "--locked", "-p", "sandboxd", "--bins"])
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(workspace().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir())
        .current_dir(workspace());
    // What cargo (or nextest) set for the running test would make this
    // build see another environment than the outer one did, and rebuild
    // what that one built; the target dir is the one given above.
    for var in testkit_engine::process::vars_set_by_cargo() {
        cargo.env_remove(var);
    }
    cargo.env_remove("CARGO_TARGET_DIR");
    let shown = format!("{cargo:?}");
    let (status, stdout, stderr) = run_bounded(cargo, BUILD_LIMIT)
        .map_err(|e| format!("failed to build sandboxd with {shown}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "failed to build sandboxd: {shown} exited with {status}:\n{stderr}"
        ));
    }
    let mut found = (None, None);
    for message in stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        if message["reason"] != "compiler-artifact"
            || message["manifest_path"].as_str() != manifest.to_str()
        {
            continue;
        }
        let exe = message["executable"].as_str().map(PathBuf::from);
        match message["target"]["name"].as_str() {
            Some("sandboxd") if exe.is_some() => found.0 = exe,
            Some("sandboxctl") if exe.is_some() => found.1 = exe,
            _ => {}
        }
    }
    match found {
        (Some(sandboxd), Some(sandboxctl)) => Ok(Binaries {
            sandboxd,
            sandboxctl,
        }),
        _ => Err(format!(
            "{shown} succeeded but named no `sandboxd` and `sandboxctl` executables of {}",
            manifest.display()
        )),
    }
}

/// Runs `cmd` in its own process group with its output captured, killing
/// the group if it runs longer than `limit`.
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<(ExitStatus, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("failed to start: {e}"))?;
    let drain = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = from.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(None) => {
                let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!("still running after {limit:?}; killed"));
            }
            Err(e) => return Err(format!("failed to wait: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}
