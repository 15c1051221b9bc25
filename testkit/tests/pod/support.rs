use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use testkit_engine::pod::{HandlePolicy, LaunchSpec, LaunchedPod};

/// Builds a target with cargo and returns the executable it produced.
fn cargo_executable(args: &[&str], name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(args)
        .arg("--message-format=json")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"]["name"] == name)
        .filter_map(|v| v["executable"].as_str().map(PathBuf::from))
        .next_back()
        .unwrap_or_else(|| panic!("cargo {args:?} produced no executable `{name}`"))
}

pub(crate) fn sandboxd() -> &'static Path {
    test_support::sandboxd_bin()
}

pub(crate) fn sandboxctl() -> &'static Path {
    test_support::sandboxctl_bin()
}

pub(crate) fn fixture() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_executable(
            &["test", "-p", "testkit", "--test", "pod_fixture", "--no-run"],
            "pod_fixture",
        )
    })
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A spec that starts the real sandboxd with `extra` arguments.
pub(crate) fn sandboxd_spec(logs: &Path, extra: &[&str]) -> LaunchSpec {
    let mut command = vec![sandboxd().to_string_lossy().into_owned()];
    command.extend(["serve", "--home", "{home}", "--listen", "{listen}"].map(String::from));
    command.extend(extra.iter().map(|s| s.to_string()));
    spec(logs, command)
}

pub(crate) fn spec(logs: &Path, command: Vec<String>) -> LaunchSpec {
    let config = testkit_engine::config::SuiteConfig::default();
    let mut spec = LaunchSpec::from_config(&config, None, logs.to_owned());
    spec.command = command;
    spec.inactivity_timeout = Duration::from_secs(20);
    spec.ceiling = Duration::from_secs(60);
    spec.policy = HandlePolicy::default();
    spec.env = BTreeMap::new();
    spec
}

pub(crate) fn sh(script: &str) -> Vec<String> {
    // `{home}` is passed as $0 so testkit appends no sandboxd arguments.
    vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
        "{home}".into(),
    ]
}

/// Stops a pod at the end of a test, even a failing one.
pub(crate) struct Guard(pub(crate) Option<LaunchedPod>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(pod) = self.0.take() {
            let rt = runtime();
            let _ = rt.block_on(pod.stop(Duration::from_secs(5)));
        }
    }
}

/// Every file under `dir`, recursively.
pub(crate) fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

pub(crate) fn runner() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_executable(
            &["build", "-p", "testkit-runner", "--bins"],
            "testkit-runner",
        )
    })
}
