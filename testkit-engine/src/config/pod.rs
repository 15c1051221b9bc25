//! `[pod]` of `testkit.toml`: how `testkit-runner` starts a pod, when it
//! counts as up, and what a handle may point at. `[pod.container]` is
//! `container.rs`, `[pod.vm]` is `vm.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{BootstrapStep, ContainerSection, Problem, VmSection};

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
    #[serde(default = "default_inactivity", with = "super::humantime_serde_compat")]
    pub inactivity_timeout: Duration,
    /// The longest a pod may take to boot, progress or not.
    #[serde(default = "default_ceiling", with = "super::humantime_serde_compat")]
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
    /// Steps run once the pod is up (its health answered), before the
    /// auth check and the tests, against the running pod: what a service
    /// can only do while it runs (enable auth, create its first admin).
    /// Each a command (placeholders as in `setup`, and the handle's fields;
    /// the environment as the pod's, and `TESTKIT_BASE_URL`), given text on
    /// its stdin or not, or an HTTP request to the pod. Each must succeed.
    #[serde(default)]
    pub bootstrap: Vec<BootstrapStep>,
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
    /// `[pod.vm]`: the pod as a service installed from its Debian package
    /// in a virtual machine, for a run that asks for one (`testkit-runner
    /// run --pod vm`).
    #[serde(default)]
    pub vm: Option<VmSection>,
    /// How long the pod has to stop once asked (SIGTERM to its processes,
    /// `docker stop` to its containers) before what still runs is killed.
    #[serde(default = "default_stop_grace", with = "super::humantime_serde_compat")]
    pub stop_grace: Duration,
    /// Whether the file wrote `command`: without it, a suite whose pod is
    /// `[pod.container]` runs that container, not `sandboxd`.
    #[serde(skip)]
    pub(super) command_written: bool,
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
            vm: None,
            stop_grace: default_stop_grace(),
            command_written: false,
        }
    }
}

impl PodSection {
    /// Whether a run that does not say `--pod` starts `[pod.container]`: a
    /// pod of several nodes always (only containers can be one), and a
    /// container pod whose suite wrote no `[pod] command` (the process
    /// would be the default, `sandboxd`, which is not the suite's service).
    pub fn container_by_default(&self) -> bool {
        self.container
            .as_ref()
            .is_some_and(|c| !c.nodes.is_empty() || !self.command_written)
    }

    /// A pod of several nodes prints no one handle: testkit makes it, of
    /// `fields` (a credential every node is given, as `{random}`).
    pub(super) fn validate_nodes_handle(&self) -> Result<(), Problem> {
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

    pub(super) fn validate(&self) -> Result<(), Problem> {
        if self.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err((
                "pod.command",
                "is empty: expected a program and its arguments".to_owned(),
            ));
        }
        if !self.health_path.starts_with('/') || self.health_path.contains('#') {
            return Err((
                "pod.health_path",
                format!(
                    "is {:?}: expected a path starting with `/`, without a `#fragment` \
                     (a fragment is never sent: the check would ask another path)",
                    self.health_path
                ),
            ));
        }
        self.validate_protected()?;
        self.validate_ports()?;
        self.validate_env_names()?;
        self.validate_fields()?;
        commands_not_empty("pod.setup", &self.setup)?;
        for step in &self.bootstrap {
            step.validate()?;
        }
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
            super::field_name("pod.fields", key, crate::template::RESERVED_FIELDS)?;
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

fn default_command() -> Vec<String> {
    vec!["sandboxd".to_owned(), "serve".to_owned()]
}
pub(super) fn default_health_path() -> String {
    "/api/health".to_owned()
}
fn default_inactivity() -> Duration {
    Duration::from_secs(20)
}
fn default_ceiling() -> Duration {
    Duration::from_secs(120)
}
/// The stop grace when `[pod] stop_grace` says none.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);
fn default_stop_grace() -> Duration {
    DEFAULT_STOP_GRACE
}
