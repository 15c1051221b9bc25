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
//! [witnesses.home-dirs]              # a look below the API: config/witness.rs
//! what = "sandbox directories"
//! command = ["ls", "{home}/sandboxes"]
//! ```
//!
//! Without `[auth]` and `[capabilities]`, the defaults are those of the
//! embedded default pod, `sandboxd`: its token (bearer) opens a cookie
//! session at `GET /api/capabilities`, which also lists its capabilities. A
//! section a suite writes replaces that default whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod container;
mod witness;
pub use container::{BuildSection, ContainerSection, MountSection, NodeSection};
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

/// `[suite]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SuiteSection {
    /// Prefix of every resource name: 1 to 8 characters of `a-z0-9`.
    #[serde(default = "default_prefix")]
    pub name_prefix: String,
    /// Whether a flaky test (one that failed, then passed on a nextest
    /// retry) fails the run.
    #[serde(default)]
    pub flaky: FlakyPolicy,
}

impl Default for SuiteSection {
    fn default() -> Self {
        SuiteSection {
            name_prefix: default_prefix(),
            flaky: FlakyPolicy::default(),
        }
    }
}

/// `[suite] flaky`: what a flaky test does to the run. Either way it is
/// counted and shown as flaky, with every attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[non_exhaustive]
pub enum FlakyPolicy {
    /// `"pass"`: the run passes, and its summary says which tests were flaky.
    #[default]
    Pass,
    /// `"fail"`: a flaky test fails the run.
    Fail,
}

impl FlakyPolicy {
    /// The word `testkit.toml` (and nextest's `--flaky-result`) spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            FlakyPolicy::Pass => "pass",
            FlakyPolicy::Fail => "fail",
        }
    }
}

impl TryFrom<String> for FlakyPolicy {
    type Error = String;

    fn try_from(value: String) -> Result<FlakyPolicy, String> {
        match value.as_str() {
            "pass" => Ok(FlakyPolicy::Pass),
            "fail" => Ok(FlakyPolicy::Fail),
            _ => Err(format!(
                "is {value:?}: expected \"pass\" (a test that passes on a retry \
                 passes the run, and the summary names it) or \"fail\" (it fails the run)"
            )),
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
    /// The fields of the handle of a pod that prints none: given, testkit
    /// makes the handle itself (name, base URL, port, and these, with
    /// `{random}` a fresh secret, `{home}` and `{port}` filled).
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    /// Commands run before `command`, in the pod's HOME and environment,
    /// each of which must succeed (placeholders as in `command`, and the
    /// handle's fields).
    #[serde(default)]
    pub setup: Vec<Vec<String>>,
    /// Handle fields that are not secrets; every other field is redacted
    /// wherever it would appear.
    #[serde(default)]
    pub public_fields: Vec<String>,
    /// Commands run once the pod is up (its health answered), before the
    /// auth check and the tests, against the running pod: what a service
    /// can only do while it runs (enable auth, create its first admin).
    /// Placeholders as in `setup`, and the handle's fields; the
    /// environment as the pod's, and `TESTKIT_BASE_URL`. Each must succeed.
    #[serde(default)]
    pub bootstrap: Vec<Vec<String>>,
    /// Environment of the pod and of its setup commands, with the same
    /// placeholders as `command`: how a secret field (`{password}`) reaches
    /// them without standing on a command line, where `ps` shows it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// More free loopback ports, by name, besides `{port}`: each is
    /// `{port_<name>}` wherever `{port}` is (a peer port, a metrics port).
    #[serde(default)]
    pub ports: Vec<String>,
    /// `[pod.container]`: the pod as a container image, for a run that asks
    /// for one (`testkit-runner run --pod container`).
    #[serde(default)]
    pub container: Option<ContainerSection>,
}

/// How a request carries a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SendAs {
    /// `Authorization: Bearer <credential>`.
    #[default]
    Bearer,
    /// `<header>: <prefix><credential>`.
    Header,
    /// `Authorization: Basic` of the handle's `user` and `password`.
    Basic,
    /// `Cookie: <cookie>=<credential>`.
    Cookie,
    /// Nothing (`send = "none"`).
    #[serde(rename = "none")]
    Nothing,
}

/// `[auth]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuthSection {
    /// How each request carries the credential (the handle's token, or what
    /// the login step returned as a token).
    #[serde(default)]
    pub send: SendAs,
    /// `send = "header"`: the header's name.
    #[serde(default)]
    pub header: Option<String>,
    /// `send = "header"`: what goes before the credential.
    #[serde(default)]
    pub prefix: String,
    /// `send = "cookie"`: the cookie's name.
    #[serde(default)]
    pub cookie: Option<String>,
    /// A request that needs the credential and changes nothing: the
    /// runner's auth phase sends it with and without the credential.
    #[serde(default)]
    pub probe: Option<String>,
    /// A body for `probe` (JSON unless it starts otherwise), with the
    /// handle's fields as placeholders: for a service whose cheapest
    /// authenticated call is a `POST`.
    #[serde(default)]
    pub probe_body: Option<String>,
    /// What `probe` must answer without the credential.
    #[serde(default = "default_refused")]
    pub refused: Vec<u16>,
    /// Answers that mean the credential expired: testkit logs in again, once
    /// for every process of the run, and repeats the request.
    #[serde(default = "default_expired")]
    pub expired: Vec<u16>,
    /// `[auth.login]`.
    #[serde(default)]
    pub login: Option<LoginSection>,
}

/// `[auth.login]`: a request that turns the handle's credentials into a
/// session (a cookie) or a short-lived token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LoginSection {
    /// `METHOD /path`.
    pub request: String,
    /// A body (JSON unless it starts otherwise), with placeholders.
    #[serde(default)]
    pub body: Option<String>,
    /// How the login request carries the handle's token; default: as
    /// `[auth] send` says.
    #[serde(default)]
    pub send: Option<SendAs>,
    /// The JSON pointer of the token in the answer.
    #[serde(default)]
    pub token: Option<String>,
    /// The answer's `Set-Cookie` is the session.
    #[serde(default)]
    pub cookie: bool,
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

impl AuthSection {
    /// `sandboxd`'s: the token (bearer) opens a cookie session.
    pub fn sandboxd() -> AuthSection {
        AuthSection {
            send: SendAs::Bearer,
            header: None,
            prefix: String::new(),
            cookie: None,
            probe: Some("GET /api/capabilities".to_owned()),
            probe_body: None,
            refused: default_refused(),
            expired: default_expired(),
            login: Some(LoginSection {
                request: "GET /api/capabilities".to_owned(),
                body: None,
                send: None,
                token: None,
                cookie: true,
            }),
        }
    }

    /// Whether a handle needs a `token` field for this auth.
    pub fn needs_token(&self) -> bool {
        match &self.login {
            None => !matches!(self.send, SendAs::Nothing | SendAs::Basic),
            Some(login) => !matches!(
                login.send.unwrap_or(self.send),
                SendAs::Nothing | SendAs::Basic
            ),
        }
    }
}

/// `[capabilities]` of `testkit.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CapabilitiesSection {
    /// An endpoint that lists them (sent with the credential).
    #[serde(default)]
    pub request: Option<String>,
    /// The JSON pointer of its array of strings.
    #[serde(default = "default_capabilities_pointer")]
    pub pointer: String,
    /// Declared here.
    #[serde(default)]
    pub list: Vec<String>,
}

impl CapabilitiesSection {
    /// `sandboxd`'s: `GET /api/capabilities`, `/capabilities`.
    pub fn sandboxd() -> CapabilitiesSection {
        CapabilitiesSection {
            request: Some("GET /api/capabilities".to_owned()),
            pointer: default_capabilities_pointer(),
            list: Vec::new(),
        }
    }
}

fn default_refused() -> Vec<u16> {
    vec![401, 403]
}
fn default_expired() -> Vec<u16> {
    vec![401]
}
fn default_capabilities_pointer() -> String {
    "/capabilities".to_owned()
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
            fields: BTreeMap::new(),
            setup: Vec::new(),
            public_fields: Vec::new(),
            bootstrap: Vec::new(),
            env: BTreeMap::new(),
            ports: Vec::new(),
            container: None,
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
    /// Environment of the CLI: values may use every field of the pod
    /// handle: `{base_url}`, `{token}`, `{port}`, `{name}` and extra ones
    /// such as `{user}`, `{session_cookie}` (the `Cookie` header of the
    /// tests' session at that moment, empty when there is none) and
    /// `{credential}` (the credential the client sends at that moment, as
    /// `[auth] send` carries it: a login's token, renewed after an expiry).
    /// Default:
    /// `SANDBOXD_URL = "{base_url}"`, `SANDBOXD_TOKEN = "{token}"`,
    /// `SANDBOXD_COOKIE = "{session_cookie}"`.
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
        ("SANDBOXD_COOKIE", "{session_cookie}"),
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
        let config: SuiteConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
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
        config.validate(path)?;
        Ok(config)
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

impl SuiteSection {
    fn validate(&self) -> Result<(), Problem> {
        let prefix = &self.name_prefix;
        if prefix.is_empty()
            || prefix.len() > 8
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err((
                "suite.name_prefix",
                format!("is {prefix:?}: expected 1 to 8 characters of a-z and 0-9"),
            ));
        }
        Ok(())
    }
}

impl PodSection {
    /// A pod of several nodes prints no one handle: testkit makes it, of
    /// `fields` (a credential every node is given, as `{random}`).
    fn validate_nodes_handle(&self) -> Result<(), (&'static str, String)> {
        let nodes = self.container.as_ref().is_some_and(|c| !c.nodes.is_empty());
        if nodes && self.fields.is_empty() {
            return Err((
                "pod.fields",
                "is empty, but the pod is several nodes, which print no one handle: give the \
                 fields testkit makes the handle of, such as `fields = { token = \"{random}\" }`, \
                 and hand them to every node in [pod.container] env"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), Problem> {
        if self.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err((
                "pod.command",
                "is empty: expected a program and its arguments".to_owned(),
            ));
        }
        if !self.health_path.starts_with('/') {
            return Err((
                "pod.health_path",
                format!(
                    "is {:?}: expected a path starting with `/`",
                    self.health_path
                ),
            ));
        }
        self.validate_protected()?;
        self.validate_ports()?;
        self.validate_env_names()?;
        self.validate_fields()?;
        commands_not_empty("pod.setup", &self.setup)?;
        commands_not_empty("pod.bootstrap", &self.bootstrap)?;
        Ok(())
    }

    fn validate_protected(&self) -> Result<(), Problem> {
        for endpoint in &self.protected {
            let ok = endpoint
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                return Err((
                    "pod.protected",
                    format!("has {endpoint:?}: expected `host:port` entries"),
                ));
            }
        }
        Ok(())
    }

    fn validate_ports(&self) -> Result<(), Problem> {
        for name in &self.ports {
            if !crate::template::is_placeholder_name(name)
                || self.ports.iter().filter(|p| *p == name).count() > 1
            {
                return Err((
                    "pod.ports",
                    format!(
                        "has {name:?}: expected distinct names of a-z, 0-9 and `_`, each giving a placeholder `{{port_<name>}}`"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_env_names(&self) -> Result<(), Problem> {
        for key in self.env.keys() {
            let valid = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err((
                    "pod.env",
                    format!(
                        "has {key:?}: expected environment variable names of A-Z, a-z, 0-9 and `_`"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_fields(&self) -> Result<(), Problem> {
        for key in self.fields.keys() {
            let filled = crate::template::FILLED_FIELDS;
            if filled.contains(&key.as_str()) || !crate::template::is_placeholder_name(key) {
                return Err((
                    "pod.fields",
                    format!(
                        "has {key:?}: expected names of a-z, 0-9 and `_` other than {} \
                         (testkit fills those)",
                        filled.join(", ")
                    ),
                ));
            }
        }
        if !self.fields.is_empty() && self.ready != Ready::Health {
            return Err((
                "pod.fields",
                "makes the handle of a pod that prints none, so the pod is up when its \
                 health path answers: set `ready = \"health\"`"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

/// Fails `key` if one of its commands has no program.
fn commands_not_empty(key: &'static str, commands: &[Vec<String>]) -> Result<(), Problem> {
    if commands
        .iter()
        .any(|c| c.first().is_none_or(|p| p.trim().is_empty()))
    {
        return Err((
            key,
            "has an empty command: expected a program and its arguments".to_owned(),
        ));
    }
    Ok(())
}

impl CliSection {
    fn validate(&self) -> Result<(), Problem> {
        if self.program.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(("cli.program", "is empty".to_owned()));
        }
        Ok(())
    }
}

impl AuthSection {
    fn validate(&self) -> Result<(), Problem> {
        let auth = self;
        if auth.send == SendAs::Header
            && auth.header.as_deref().is_none_or(|h| {
                h.is_empty() || reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err()
            })
        {
            return Err((
                "auth.header",
                format!(
                    "is {:?}: `send = \"header\"` needs the header's name, e.g. header = \"X-Api-Key\"",
                    auth.header.as_deref().unwrap_or("")
                ),
            ));
        }
        if auth.send == SendAs::Cookie && auth.cookie.as_deref().is_none_or(str::is_empty) {
            return Err((
                "auth.cookie",
                "is missing: `send = \"cookie\"` needs the cookie's name, e.g. cookie = \"session\"".to_owned(),
            ));
        }
        match &auth.probe {
            Some(probe) => {
                crate::template::RequestTemplate::parse(probe).map_err(|p| ("auth.probe", p))?;
            }
            None if auth.send != SendAs::Nothing || auth.login.is_some() => {
                return Err((
                    "auth.probe",
                    "is missing: name a request that needs the credential and changes nothing, \
                     e.g. probe = \"GET /api/items\" (the runner checks it is accepted with the \
                     credential and refused without)"
                        .to_owned(),
                ))
            }
            None => {}
        }
        if auth.refused.is_empty() || auth.refused.iter().any(|s| !(400..600).contains(s)) {
            return Err((
                "auth.refused",
                format!(
                    "is {:?}: expected HTTP statuses from 400 to 599",
                    auth.refused
                ),
            ));
        }
        if auth.expired.iter().any(|s| !(400..600).contains(s)) {
            return Err((
                "auth.expired",
                format!(
                    "is {:?}: expected HTTP statuses from 400 to 599",
                    auth.expired
                ),
            ));
        }
        if let Some(login) = &auth.login {
            crate::template::RequestTemplate::parse(&login.request)
                .map_err(|p| ("auth.login.request", p))?;
            match (&login.token, login.cookie) {
                (Some(_), true) | (None, false) => {
                    return Err((
                        "auth.login",
                        "must say where the answer carries the credential: `token = \"/json/pointer\"` \
                         or `cookie = true`, not both"
                            .to_owned(),
                    ))
                }
                (Some(p), false) if !p.starts_with('/') => {
                    return Err((
                        "auth.login.token",
                        format!("is {p:?}: expected a JSON pointer, e.g. \"/token\""),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl CapabilitiesSection {
    fn validate(&self) -> Result<(), Problem> {
        if let Some(request) = &self.request {
            crate::template::RequestTemplate::parse(request)
                .map_err(|p| ("capabilities.request", p))?;
            if !self.pointer.starts_with('/') {
                return Err((
                    "capabilities.pointer",
                    format!(
                        "is {:?}: expected a JSON pointer, e.g. \"/capabilities\"",
                        self.pointer
                    ),
                ));
            }
        }
        Ok(())
    }
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
        assert_eq!(c.pod.health_path, default_health_path());
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
    fn flaky_passes_by_default_and_takes_pass_or_fail_only() {
        assert_eq!(parse("").unwrap().suite.flaky, FlakyPolicy::Pass);
        let c = parse("[suite]\nflaky = \"fail\"").unwrap();
        assert_eq!(c.suite.flaky, FlakyPolicy::Fail);
        assert_eq!(
            parse("[suite]\nflaky = \"pass\"").unwrap().suite.flaky,
            FlakyPolicy::Pass
        );
        let e = parse("[suite]\nflaky = \"retry\"").unwrap_err().to_string();
        assert_eq!(e.matches("suite.flaky").count(), 1, "{e}");
        assert!(
            e.contains("/s/testkit.toml")
                && e.contains("suite.flaky")
                && e.contains("\"retry\"")
                && e.contains("\"pass\"")
                && e.contains("\"fail\""),
            "{e}"
        );
        let e = parse("[suite]\nflaky = true").unwrap_err().to_string();
        assert!(e.contains("flaky"), "{e}");
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
