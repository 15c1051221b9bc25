//! The suite: where its workspace root is, and its `testkit.toml`.
//!
//! ```toml
//! [suite]
//! name_prefix = "ct"                 # resource-name prefix: 1-8 of a-z0-9
//!
//! [pod]
//! command = ["sandboxd", "serve"]    # how `testkit-runner` starts a pod
//! ready = "handle"                   # or "health": up when health_path answers
//! health_path = "/api/health"
//! inactivity_timeout = "20s"         # boot wait, reset by every line the pod prints
//! ceiling = "2m"                     # hard limit of the boot wait
//! allow_remote_hosts = []            # host names a handle may use besides loopback
//! protected = ["127.0.0.1:443"]      # endpoints refused whatever else is right
//! handle = "pod.json"                # a handle file, relative to the suite dir
//!
//! [cli]
//! program = "sandboxctl"
//! env = { SANDBOXD_URL = "{base_url}", SANDBOXD_TOKEN = "{token}" }
//!
//! [resources.sandbox]                # kept raw for the resource module
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

/// The name of a suite's config file, at its workspace root.
pub const CONFIG_FILE: &str = "testkit.toml";

/// A suite's `testkit.toml`. A missing file means every default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SuiteConfig {
    /// `[suite]`.
    #[serde(default)]
    pub suite: SuiteSection,
    /// `[pod]`.
    #[serde(default)]
    pub pod: PodSection,
    /// `[cli]`.
    #[serde(default)]
    pub cli: CliSection,
    /// `[resources.<kind>]` tables, unparsed.
    #[serde(default)]
    pub resources: BTreeMap<String, toml::Value>,
}

/// `[suite]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SuiteSection {
    /// Prefix of every resource name: 1 to 8 characters of `a-z0-9`.
    #[serde(default = "default_prefix")]
    pub name_prefix: String,
}

impl Default for SuiteSection {
    fn default() -> Self {
        SuiteSection {
            name_prefix: default_prefix(),
        }
    }
}

/// When a started pod counts as up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Ready {
    /// When it prints its handle (one JSON line) on stdout.
    #[default]
    Handle,
    /// When `health_path` answers 2xx (the handle is still read from stdout).
    Health,
}

/// `[pod]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PodSection {
    /// The command that starts a pod. `{home}`, `{port}` and `{listen}` in an
    /// argument are replaced; a command that uses none of them gets
    /// `--home {home} --listen {listen}` appended (the `sandboxd` convention).
    #[serde(default = "default_command")]
    pub command: Vec<String>,
    /// When a started pod counts as up.
    #[serde(default)]
    pub ready: Ready,
    /// The pod's unauthenticated health endpoint.
    #[serde(default = "default_health_path")]
    pub health_path: String,
    /// How long a booting pod may stay silent.
    #[serde(default = "default_inactivity", with = "humantime_serde_compat")]
    pub inactivity_timeout: Duration,
    /// The longest a pod may take to boot, progress or not.
    #[serde(default = "default_ceiling", with = "humantime_serde_compat")]
    pub ceiling: Duration,
    /// Host names a handle may use besides loopback.
    #[serde(default)]
    pub allow_remote_hosts: Vec<String>,
    /// `host:port` endpoints a handle may never point at.
    #[serde(default)]
    pub protected: Vec<String>,
    /// A pod handle file, relative to the suite dir.
    #[serde(default)]
    pub handle: Option<PathBuf>,
}

impl Default for PodSection {
    fn default() -> Self {
        PodSection {
            command: default_command(),
            ready: Ready::default(),
            health_path: default_health_path(),
            inactivity_timeout: default_inactivity(),
            ceiling: default_ceiling(),
            allow_remote_hosts: Vec::new(),
            protected: Vec::new(),
            handle: None,
        }
    }
}

/// `[cli]` of `testkit.toml`: the product's CLI, run by `cx.cli(..)`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CliSection {
    /// The program (a name on PATH or a path relative to the suite dir);
    /// default `sandboxctl`.
    #[serde(default = "default_cli_program")]
    pub program: Option<String>,
    /// Environment of the CLI: values may use `{base_url}`, `{token}`,
    /// `{port}` and `{name}` from the pod handle. Default:
    /// `SANDBOXD_URL = "{base_url}"`, `SANDBOXD_TOKEN = "{token}"`.
    #[serde(default = "default_cli_env")]
    pub env: BTreeMap<String, String>,
}

impl Default for CliSection {
    fn default() -> Self {
        CliSection {
            program: default_cli_program(),
            env: default_cli_env(),
        }
    }
}

fn default_cli_program() -> Option<String> {
    Some("sandboxctl".to_owned())
}
fn default_cli_env() -> BTreeMap<String, String> {
    [
        ("SANDBOXD_URL", "{base_url}"),
        ("SANDBOXD_TOKEN", "{token}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn default_prefix() -> String {
    "ct".to_owned()
}
fn default_command() -> Vec<String> {
    vec!["sandboxd".to_owned(), "serve".to_owned()]
}
fn default_health_path() -> String {
    "/api/health".to_owned()
}
fn default_inactivity() -> Duration {
    Duration::from_secs(20)
}
fn default_ceiling() -> Duration {
    Duration::from_secs(120)
}

mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim()).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {s:?}: {e} (expected e.g. 20s, 2m)"
            ))
        })
    }
}

/// A `testkit.toml` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("failed to read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type.
    #[error("invalid {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key and position.
        message: String,
    },
    /// A value of the right type that is not allowed.
    #[error("invalid {}: `{key}` {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `suite.name_prefix`.
        key: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl SuiteConfig {
    /// Loads `<dir>/testkit.toml`; a missing file gives the defaults.
    pub fn load(dir: &Path) -> Result<SuiteConfig, ConfigError> {
        let path = dir.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SuiteConfig::default()),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        SuiteConfig::parse(&text, &path)
    }

    /// Parses the text of a `testkit.toml`; `path` is used in errors only.
    pub fn parse(text: &str, path: &Path) -> Result<SuiteConfig, ConfigError> {
        let config: SuiteConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |key, problem: String| ConfigError::Invalid {
            path: path.to_owned(),
            key,
            problem,
        };
        let prefix = &self.suite.name_prefix;
        if prefix.is_empty()
            || prefix.len() > 8
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(invalid(
                "suite.name_prefix",
                format!("is {prefix:?}: expected 1 to 8 characters of a-z and 0-9"),
            ));
        }
        if self.pod.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(invalid(
                "pod.command",
                "is empty: expected a program and its arguments".to_owned(),
            ));
        }
        if !self.pod.health_path.starts_with('/') {
            return Err(invalid(
                "pod.health_path",
                format!(
                    "is {:?}: expected a path starting with `/`",
                    self.pod.health_path
                ),
            ));
        }
        if self.pod.inactivity_timeout.is_zero() || self.pod.ceiling.is_zero() {
            return Err(invalid(
                "pod.inactivity_timeout",
                "and `pod.ceiling` must be longer than zero".to_owned(),
            ));
        }
        for endpoint in &self.pod.protected {
            let ok = endpoint
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                return Err(invalid(
                    "pod.protected",
                    format!("has {endpoint:?}: expected `host:port` entries"),
                ));
            }
        }
        if self
            .cli
            .program
            .as_deref()
            .is_some_and(|p| p.trim().is_empty())
        {
            return Err(invalid("cli.program", "is empty".to_owned()));
        }
        Ok(())
    }
}

/// The config of this process's suite: defaults when there is no suite dir
/// or no `testkit.toml`.
pub(crate) fn current() -> Result<&'static SuiteConfig, &'static ConfigError> {
    static CONFIG: OnceLock<Result<SuiteConfig, ConfigError>> = OnceLock::new();
    CONFIG
        .get_or_init(|| match suite_dir() {
            Some(dir) => SuiteConfig::load(dir),
            None => Ok(SuiteConfig::default()),
        })
        .as_ref()
}

/// The manifest directory of the test binary, as it was when it was
/// compiled: `testkit::main!()` hands it over, so that a binary run directly
/// (a nextest archive, a debugger) still finds its suite.
static COMPILED_MANIFEST_DIR: OnceLock<&'static str> = OnceLock::new();

/// Called by the harness before anything reads the config.
pub(crate) fn set_compiled_manifest_dir(dir: &'static str) {
    let _ = COMPILED_MANIFEST_DIR.set(dir);
}

/// The suite's workspace root: `TESTKIT_SUITE_DIR`, else the nearest
/// ancestor of the manifest dir (`CARGO_MANIFEST_DIR`, which cargo and
/// nextest set for test processes, else the one the binary was compiled in)
/// that holds `testkit.toml` or `KNOWN-ISSUES.md`, else the nearest one whose
/// `Cargo.toml` declares a `[workspace]`.
pub(crate) fn suite_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let settings = crate::settings::or_default();
        if let Some(dir) = &settings.suite_dir {
            return Some(dir.clone());
        }
        let manifest_dir = settings.manifest_dir.clone().or_else(|| {
            COMPILED_MANIFEST_DIR
                .get()
                .map(PathBuf::from)
                .filter(|d| d.is_dir())
        })?;
        Some(find_suite_dir(&manifest_dir))
    })
    .as_deref()
}

fn find_suite_dir(manifest_dir: &Path) -> PathBuf {
    if let Some(dir) = manifest_dir
        .ancestors()
        .find(|d| d.join("testkit.toml").is_file() || d.join("KNOWN-ISSUES.md").is_file())
    {
        return dir.to_owned();
    }
    let is_workspace_root = |d: &Path| {
        std::fs::read_to_string(d.join("Cargo.toml"))
            .is_ok_and(|s| s.lines().any(|l| l.trim() == "[workspace]"))
    };
    manifest_dir
        .ancestors()
        .find(|d| is_workspace_root(d))
        .unwrap_or(manifest_dir)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SuiteConfig, ConfigError> {
        SuiteConfig::parse(text, Path::new("/s/testkit.toml"))
    }

    #[test]
    fn defaults_and_a_full_file() {
        let c = parse("").unwrap();
        assert_eq!(c.suite.name_prefix, "ct");
        assert_eq!(c.pod.command, ["sandboxd", "serve"]);
        let c = parse(
            r#"
            [suite]
            name_prefix = "ab1"
            [pod]
            command = ["x", "--home", "{home}"]
            ready = "health"
            inactivity_timeout = "3s"
            ceiling = "1m"
            protected = ["127.0.0.1:443"]
            [cli]
            program = "sandboxctl"
            env = { SANDBOXD_URL = "{base_url}" }
            [resources.sandbox]
            limit = 4
            "#,
        )
        .unwrap();
        assert_eq!(c.pod.ready, Ready::Health);
        assert_eq!(c.pod.inactivity_timeout, Duration::from_secs(3));
        assert!(c.resources.contains_key("sandbox"));
    }

    #[test]
    fn errors_name_the_key_and_file() {
        let e = parse("[pod]\ncomand = []").unwrap_err().to_string();
        assert!(e.contains("/s/testkit.toml") && e.contains("comand"), "{e}");
        let e = parse("[suite]\nname_prefix = \"Bad-\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("suite.name_prefix"), "{e}");
        let e = parse("[pod]\nceiling = \"soon\"").unwrap_err().to_string();
        assert!(e.contains("ceiling") && e.contains("soon"), "{e}");
        let e = parse("[pod]\nprotected = [\"nope\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pod.protected"), "{e}");
    }
}
