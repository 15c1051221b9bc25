//! The suite: where its workspace root is, and its `testkit.toml`.
//!
//! ```toml
//! [suite]
//! name_prefix = "ct"                 # resource-name prefix: 1-8 of a-z0-9
//! flaky = "pass"                     # a test that passes on a nextest retry: "pass"
//!                                    # (the run passes, saying so) or "fail"
//!
//! [pod]
//! command = ["sandboxd", "serve"]    # how `testkit-runner` starts a pod
//! ready = "handle"                   # or "health": up when health_path answers
//! health_path = "/api/health"
//! inactivity_timeout = "20s"         # boot wait, reset by every line the pod prints (1ms to 24h)
//! ceiling = "2m"                     # hard limit of the boot wait (1ms to 24h)
//! allow_remote_hosts = []            # host names a handle may use besides loopback
//! protected = ["127.0.0.1:443"]      # endpoints refused whatever else is right
//! handle = "pod.json"                # a handle file, relative to the suite dir
//!
//! fields = { user = "admin@x.test", password = "{random}" }
//!                                    # a pod that prints no handle: testkit makes one
//! setup = [["svc", "adduser", "{user}", "{password}"]]  # run before `command`
//! public_fields = ["user"]           # handle fields that are not secrets
//!
//! [auth]                             # how the service takes its credential
//! send = "bearer"                    # bearer | header | basic | cookie | none
//! header = "X-Api-Key"               # send = "header": the header
//! prefix = ""                        # send = "header": text before the credential
//! cookie = "session"                 # send = "cookie": the cookie's name
//! probe = "GET /api/capabilities"    # needs the credential; the runner's auth phase
//! refused = [401, 403]               # what `probe` answers without it
//! expired = [401]                    # answers that mean: log in again (once, across processes)
//!
//! [auth.login]                       # optional: credentials → a session or a token
//! request = "POST /api/login"
//! body = '{"user": "{user}", "password": "{password}"}'
//! send = "none"                      # how the login request carries the handle's token
//! token = "/token"                   # JSON pointer of the token in the answer, or
//! cookie = true                      # the answer's Set-Cookie is the session
//!
//! [capabilities]                     # where the pod's capabilities come from
//! request = "GET /api/capabilities"  # an endpoint, and
//! pointer = "/capabilities"          # the JSON pointer of its array of strings; or
//! list = ["exec"]                    # declared here; a handle's `capabilities` wins
//!
//! [cli]
//! program = "sandboxctl"
//! env = { SANDBOXD_URL = "{base_url}", SANDBOXD_TOKEN = "{token}", SANDBOXD_COOKIE = "{session_cookie}" }
//!
//! [resources.sandbox]                # kept raw for the resource module
//!
//! [witnesses.home-dirs]              # a look below the API: witness.rs
//! what = "sandbox directories"
//! command = ["ls", "{home}/sandboxes"]
//! ```
//!
//! Without `[auth]` and `[capabilities]`, the defaults are those of the
//! embedded default pod, `sandboxd`: its token (bearer) opens a cookie
//! session at `GET /api/capabilities`, which also lists its capabilities. A
//! section a suite writes replaces that default whole.
//!
//! Each section is a file of its own with its type, its defaults and its
//! check (`suite.rs`, `pod.rs`, `container.rs` for `[pod.container]`,
//! `vm.rs` for `[pod.vm]`, `auth.rs`, `capabilities.rs`, `cli.rs`,
//! `witness.rs`), re-exported
//! here; this module reads the file, names the key of a value that does
//! not parse, and runs each section's check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod auth;
mod bootstrap;
mod capabilities;
mod cli;
mod container;
mod pod;
mod suite;
mod vm;
mod witness;
pub use auth::{AuthSection, LoginSection, SendAs};
pub use bootstrap::BootstrapStep;
pub use capabilities::CapabilitiesSection;
pub use cli::CliSection;
pub use container::{
    BuildSection, ContainerSection, DiskSection, MountSection, NodeSection, MAX_DISK_MIB,
};
pub use pod::{PodSection, Ready, DEFAULT_STOP_GRACE};
pub use suite::{
    FlakyPolicy, RetryPolicy, SuiteSection, UnknownFlakyPolicy, UnknownRetryPolicy, MAX_RETRIES,
};
pub use vm::{
    two_versions_of_a_package, BinariesSection, BinaryFile, GuestField, Installer, VmSection,
};
pub use witness::{WitnessSection, DEFAULT_WITNESS_TIMEOUT, WITNESS_PLACEHOLDERS};

/// The name of a suite's config file, at its workspace root.
pub const CONFIG_FILE: &str = "testkit.toml";

/// A suite's `testkit.toml`. A missing file means every default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SuiteConfig {
    /// `[suite]`.
    #[serde(default)]
    pub suite: SuiteSection,
    /// `[pod]`.
    #[serde(default)]
    pub pod: PodSection,
    /// `[auth]`.
    #[serde(default = "AuthSection::sandboxd")]
    pub auth: AuthSection,
    /// `[capabilities]`.
    #[serde(default = "CapabilitiesSection::sandboxd")]
    pub capabilities: CapabilitiesSection,
    /// `[cli]`.
    #[serde(default)]
    pub cli: CliSection,
    /// `[resources.<kind>]` tables, unparsed.
    #[serde(default)]
    pub resources: BTreeMap<String, toml::Value>,
    /// `[witnesses.<name>]`: looks below the API for residue the product
    /// forgot, by name.
    #[serde(default)]
    pub witnesses: BTreeMap<String, WitnessSection>,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        SuiteConfig {
            suite: SuiteSection::default(),
            pod: PodSection::default(),
            auth: AuthSection::sandboxd(),
            capabilities: CapabilitiesSection::sandboxd(),
            cli: CliSection::default(),
            resources: BTreeMap::new(),
            witnesses: BTreeMap::new(),
        }
    }
}

/// A duration key of `testkit.toml`, bounded as every timeout is
/// ([`crate::duration::TIMEOUT`]). The key is named by the error's path.
mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        crate::duration::TIMEOUT
            .parse(&s)
            .map_err(|e| serde::de::Error::custom(format!("is {s:?}: {e}")))
    }
}

/// A `testkit.toml` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("failed to read {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
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
    /// A `[witnesses.<name>]` table that cannot be used.
    #[error("invalid {}: `witnesses.{name}{}` {problem}", path.display(), key.map(|k| format!(".{k}")).unwrap_or_default())]
    Witness {
        /// The file.
        path: PathBuf,
        /// The witness's name.
        name: String,
        /// The key at fault below it (`command`, `names`); `None`: the table.
        key: Option<&'static str>,
        /// What is wrong, and how to mend it.
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
            Err(source) => {
                return Err(ConfigError::Read {
                    path,
                    cause: source,
                })
            }
        };
        SuiteConfig::parse(&text, &path)
    }

    /// Parses the text of a `testkit.toml`; `path` is used in errors only.
    /// A value of the wrong type, or out of bounds, names its dotted key
    /// and its line.
    pub fn parse(text: &str, path: &Path) -> Result<SuiteConfig, ConfigError> {
        let parse_error = |message: String| ConfigError::Parse {
            path: path.to_owned(),
            message,
        };
        let syntax = |mut e: toml::de::Error| {
            e.set_input(Some(text));
            parse_error(e.to_string().trim_end().to_owned())
        };
        let deserializer = toml::Deserializer::parse(text).map_err(syntax)?;
        let mut config: SuiteConfig =
            serde_path_to_error::deserialize(deserializer).map_err(|e| {
                let key = e.path().to_string();
                let inner = e.into_inner();
                if key.is_empty() || key == "." {
                    return syntax(inner);
                }
                let line = inner
                    .span()
                    .map(|span| {
                        let line = text[..span.start.min(text.len())].lines().count().max(1);
                        format!(" (line {line})")
                    })
                    .unwrap_or_default();
                let problem = serde_problem(inner.message().trim_end());
                parse_error(format!("`{key}` {problem}{line}"))
            })?;
        config.defaults_of_what_is_written(text);
        config.validate(path)?;
        Ok(config)
    }

    /// The defaults that depend on what else the file wrote: a suite that
    /// says how its service authenticates (`[auth]`) but not what it can
    /// do has no capabilities, rather than `sandboxd`'s endpoint asked of a
    /// service that is not `sandboxd`; and whether `[pod] command` was
    /// written ([`PodSection::container_by_default`]). The text has
    /// parsed already, so a table that does not parse here cannot happen.
    fn defaults_of_what_is_written(&mut self, text: &str) {
        let Ok(table) = text.parse::<toml::Table>() else {
            return;
        };
        let pod = table.get("pod").and_then(toml::Value::as_table);
        self.pod.command_written = pod.is_some_and(|p| p.contains_key("command"));
        if table.contains_key("auth") && !table.contains_key("capabilities") {
            self.capabilities = CapabilitiesSection::none();
        }
    }

    /// Every section's own check, in file order; the first problem is the
    /// error, naming its key.
    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let checks = [
            self.suite.validate(),
            self.pod.validate(),
            self.pod
                .container
                .as_ref()
                .map_or(Ok(()), ContainerSection::validate),
            self.pod.vm.as_ref().map_or(Ok(()), VmSection::validate),
            self.pod.vm.as_ref().map_or(Ok(()), |vm| {
                vm.validate_files(path.parent().unwrap_or(Path::new(".")))
            }),
            self.pod.validate_nodes_handle(),
            self.cli.validate(),
            self.auth.validate(),
            self.capabilities.validate(),
        ];
        if let Some((key, problem)) = checks.into_iter().find_map(Result::err) {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                key,
                problem,
            });
        }
        for (name, witness) in &self.witnesses {
            witness
                .validate(name, &self.pod.public_fields)
                .map_err(|(key, problem)| ConfigError::Witness {
                    path: path.to_owned(),
                    name: name.clone(),
                    key,
                    problem,
                })?;
        }
        Ok(())
    }
}

/// serde's message about a value, worded to follow the key it is about:
/// `invalid type: string "many", expected usize` becomes `has the wrong
/// type: string "many", expected usize`.
pub(crate) fn serde_problem(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        format!("has the wrong type: {rest}")
    } else if let Some(rest) = message.strip_prefix("invalid value: ") {
        format!("has an invalid value: {rest}")
    } else {
        message.to_owned()
    }
}

/// What is wrong with a key of `testkit.toml`: the dotted key, and why.
type Problem = (&'static str, String);

/// A handle field's name under `key`: a placeholder name, none of `filled`
/// (which testkit fills itself).
fn field_name(key: &'static str, name: &str, filled: &[&str]) -> Result<(), Problem> {
    if filled.contains(&name)
        || name.starts_with("port_")
        || !crate::template::is_placeholder_name(name)
    {
        return Err((
            key,
            format!(
                "has {name:?}: expected names of a-z, 0-9 and `_` other than {} and \
                 `port_<name>` (testkit fills those, or writes them into the handle): \
                 rename the field",
                filled.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The suite's workspace root for a test binary whose manifest dir is
/// `manifest_dir`: the nearest ancestor that holds `testkit.toml` or
/// `KNOWN-ISSUES.md`, else the nearest one whose `Cargo.toml` declares a
/// `[workspace]`, else `manifest_dir` itself.
pub fn find_suite_dir(manifest_dir: &Path) -> PathBuf {
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
    use std::time::Duration;

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
        assert_eq!(c.suite.name_prefix, "ab1");
        assert_eq!(c.pod.command, ["x", "--home", "{home}"]);
        assert_eq!(c.pod.ready, Ready::Health);
        assert_eq!(c.pod.inactivity_timeout, Duration::from_secs(3));
        assert_eq!(c.pod.ceiling, Duration::from_secs(60));
        assert_eq!(c.pod.protected, ["127.0.0.1:443"]);
        assert_eq!(c.cli.program.as_deref(), Some("sandboxctl"));
        assert_eq!(
            c.cli.env.get("SANDBOXD_URL").map(String::as_str),
            Some("{base_url}")
        );
        assert!(c.resources.contains_key("sandbox"));
        // What the file does not set keeps its default.
        assert_eq!(c.pod.health_path, SuiteConfig::default().pod.health_path);
        assert_eq!(c.auth.send, SendAs::Bearer);
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

    /// Past a day, a boot wait's deadline could overflow the clock; zero
    /// cannot be meant. Either is refused, naming the dotted key and its line.
    #[test]
    fn the_pod_s_waits_are_more_than_zero_and_at_most_a_day() {
        for key in ["inactivity_timeout", "ceiling"] {
            for (value, reason) in [
                ("0s", "it is zero"),
                ("5000000000000000h", "it is longer than 24h"),
                ("99999999999999999999h", "it is longer than 24h"),
            ] {
                let e = parse(&format!("[pod]\n{key} = {value:?}"))
                    .unwrap_err()
                    .to_string();
                assert_eq!(
                    e,
                    format!(
                        "invalid /s/testkit.toml: `pod.{key}` is {value:?}: {reason}; give a \
                         duration from 1ms to 24h, such as 30s or 5m (line 2)"
                    )
                );
            }
        }
        let c = parse("[pod]\nceiling = \"24h\"").unwrap();
        assert_eq!(c.pod.ceiling, crate::duration::DAY);
        // Of the wrong type, too, a key is named.
        let e = parse("[suite]\nname_prefix = 5").unwrap_err().to_string();
        assert!(
            e.contains(
                "`suite.name_prefix` has the wrong type: integer `5`, expected a string (line 2)"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_witness_is_a_command_or_a_request_and_its_errors_say_how_to_mend_it() {
        let c = parse(
            "[witnesses.home-dirs]\nwhat = \"sandbox directories\"\n\
             command = [\"ls\", \"{home}/sandboxes\"]\n\
             [witnesses.debug]\nwhat = \"disks\"\nrequest = \"GET /debug/disks?run={run}\"\n\
             names = \"/disks/*/id\"\ntimeout = \"5s\"\n",
        )
        .unwrap();
        let home = &c.witnesses["home-dirs"];
        assert!(home.uses_home());
        assert_eq!(home.timeout, DEFAULT_WITNESS_TIMEOUT);
        assert!(!c.witnesses["debug"].uses_home());
        assert_eq!(c.witnesses["debug"].timeout, Duration::from_secs(5));
        for (text, wanted) in [
            (
                "[witnesses.w]\ncommand = [\"ls\"]\n",
                "`witnesses.w.what` is missing: say what the witness lists",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\n",
                "`witnesses.w` has neither `command` nor `request`",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncommand = [\"ls\"]\nrequest = \"GET /x\"\n",
                "`witnesses.w` has both `command` and `request`",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncommand = []\n",
                "`witnesses.w.command` is empty",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\nrequest = \"GET /x\"\n",
                "`witnesses.w.names` is missing",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\nrequest = \"GET /x\"\nnames = \"/items\"\n",
                "`witnesses.w.names` is \"/items\": expected a JSON pointer with one `/*`",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncommand = [\"ls\"]\nnames = \"/a/*\"\n",
                "`witnesses.w.names` is set, but the witness is a `command`",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncommand = [\"echo\", \"{token}\"]\n",
                "`witnesses.w.command` uses `{token}`, which a witness does not know",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncommand = [\"ls\"]\ntimeout = \"0s\"\n",
                "`witnesses.w.timeout` is \"0s\": it is zero",
            ),
            (
                "[witnesses.\"a b\"]\nwhat = \"x\"\ncommand = [\"ls\"]\n",
                "`witnesses.a b` has an invalid name",
            ),
            (
                "[witnesses.w]\nwhat = \"x\"\ncomand = [\"ls\"]\n",
                "unknown field `comand`",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.contains(wanted) && e.contains("/s/testkit.toml"),
                "{text}: {e}"
            );
        }
        // A public field of the handle is a placeholder too.
        parse(
            "[pod]\nready = \"health\"\nfields = { user = \"u\" }\npublic_fields = [\"user\"]\n\
             [witnesses.w]\nwhat = \"x\"\ncommand = [\"ls\", \"/srv/{user}\"]\n",
        )
        .unwrap();
    }
}
