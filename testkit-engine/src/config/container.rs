//! `[pod.container]` of `testkit.toml`: the same pod as a container image,
//! chosen for a run by `testkit-runner run --pod container`.
//!
//! ```toml
//! [pod.container]
//! image = "myservice:1.2"            # an image the engine holds, or
//! build = { context = "container", prepare = [["sh", "prepare.sh"]] }
//!                                    # built from a dir of the suite, tagged by its content
//! port = 8080                        # the container port: published on 127.0.0.1:<free port>
//! command = ["myservice", "serve", "--listen", "{listen}"]  # else the image's own
//! env = { LOG = "debug", ADMIN_PASSWORD = "{password}" }    # handle fields as placeholders
//! mounts = [{ volume = "data", target = "/data" }]          # a volume of the pod, or
//!                                    # { source = "fixtures", target = "/fixtures", read_only = true }
//! setup = [["myservice", "adduser", "{user}", "{password}"]] # one-off containers, before `command`
//! ```
//!
//! A pod of several nodes (a gateway and its workers, a replicated store)
//! names them; each is a container of the same image on the pod's network,
//! reached by the others at its name, and by the tests at a port of its own:
//!
//! ```toml
//! [pod.container]
//! build = { context = "container" }
//! port = 8080
//! entry = "gateway"                  # the node whose API is the pod's base URL
//! reach = ["wget", "-q", "-O", "/dev/null", "http://{node}:{port}/api/health"]
//!                                    # run in a node: proves it reaches node `{node}`
//! [pod.container.nodes.gateway]
//! command = ["svc", "gateway", "--listen", "{listen}", "--worker", "http://worker-1:{port}"]
//! [pod.container.nodes.worker-1]
//! command = ["svc", "worker", "--listen", "{listen}"]
//! ```
//!
//! `[pod]` `ready`, `health_path`, the boot timeouts, `fields` and
//! `public_fields` hold for the container as for the process; `[pod]
//! command` and `setup` are the process's only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[pod.container]`: how to run the pod as a container.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ContainerSection {
    /// An image the engine already holds (a tag or an id): nothing is pulled.
    #[serde(default)]
    pub image: Option<String>,
    /// An image built from a directory of the suite.
    #[serde(default)]
    pub build: Option<BuildSection>,
    /// The port the service listens on inside the container.
    pub port: u16,
    /// The command, replacing the image's; placeholders: `{listen}`
    /// (`0.0.0.0:<port>`), `{port}` (the container port) and the handle's
    /// fields.
    #[serde(default)]
    pub command: Vec<String>,
    /// Environment of the container, with the placeholders of `command`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Volumes of the pod and directories of the suite, mounted.
    #[serde(default)]
    pub mounts: Vec<MountSection>,
    /// Commands run to completion in one-off containers of the image, with
    /// the same mounts and environment, before `command`.
    #[serde(default)]
    pub setup: Vec<Vec<String>>,
    /// The nodes of a pod of several, by name (`[pod.container.nodes.NAME]`);
    /// empty for a pod of one container.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeSection>,
    /// The node whose API is the pod's base URL, and whose output carries
    /// the handle a service prints.
    #[serde(default)]
    pub entry: Option<String>,
    /// A command run in one node (`docker exec`) that succeeds when it
    /// reaches the node `{node}` (placeholders `{node}`, `{port}`): how an
    /// undone fault is proven undone between peers.
    #[serde(default)]
    pub reach: Vec<String>,
}

/// `[pod.container.nodes.NAME]`: one node of a pod of several.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct NodeSection {
    /// The node's command, else `[pod.container] command`; placeholders as
    /// there, and `{node}` (its name).
    #[serde(default)]
    pub command: Vec<String>,
    /// More environment, over `[pod.container] env`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its unauthenticated health path, else `[pod] health_path`.
    #[serde(default)]
    pub health_path: Option<String>,
    /// A data disk of its own, of a bounded size, that
    /// `cx.faults().fill_disk(node)` fills.
    #[serde(default)]
    pub disk: Option<DiskSection>,
}

/// The largest data disk a node may have, in MiB: a fill writes it whole,
/// and a tmpfs is held in the host's memory.
pub const MAX_DISK_MIB: u64 = 1024;

/// `[pod.container.nodes.NAME] disk`: a node's data directory on a volume
/// of its own, a tmpfs of `size_mib` (the engine's `local` driver): small,
/// so a fault fills it in a moment, and bounded, so filling it never fills
/// the host's disk. Its contents last while the node's container runs: a
/// stop or a restart of the node empties it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DiskSection {
    /// Where it appears in the node's container: its data directory.
    pub target: String,
    /// Its size in MiB, 1 to 1024.
    pub size_mib: u64,
}

impl DiskSection {
    fn validate(&self, node: &str) -> Result<(), (&'static str, String)> {
        let key = "pod.container.nodes.*.disk";
        if !self.target.starts_with('/') || self.target.contains(',') {
            return Err((
                key,
                format!(
                    "of `{node}` has target {:?}: expected an absolute path in the container, \
                     without a comma",
                    self.target
                ),
            ));
        }
        if !(1..=MAX_DISK_MIB).contains(&self.size_mib) {
            return Err((
                key,
                format!(
                    "of `{node}` has size_mib = {}: expected 1 to {} (a small tmpfs, held in \
                     the host's memory)",
                    self.size_mib, MAX_DISK_MIB
                ),
            ));
        }
        Ok(())
    }
}

/// `[pod.container] build`: an image made from a directory of the suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BuildSection {
    /// The build context, relative to the suite dir; copied before it is
    /// prepared, so the suite's copy is never written to.
    pub context: PathBuf,
    /// The Dockerfile, relative to the context.
    #[serde(default = "default_dockerfile")]
    pub dockerfile: String,
    /// Commands run in the copy of the context before it is built (to put
    /// binaries in it), with the runner's `PATH` and nothing secret.
    #[serde(default)]
    pub prepare: Vec<Vec<String>>,
}

/// One entry of `[pod.container] mounts`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MountSection {
    /// A volume of the pod by this short name: created empty, labelled,
    /// removed with the pod.
    #[serde(default)]
    pub volume: Option<String>,
    /// A directory of the suite (relative to the suite dir), bind-mounted.
    #[serde(default)]
    pub source: Option<PathBuf>,
    /// Where it appears in the container.
    pub target: String,
    /// Mounted read-only.
    #[serde(default)]
    pub read_only: bool,
}

fn default_dockerfile() -> String {
    "Dockerfile".to_owned()
}

impl ContainerSection {
    /// The section's own check: what is wrong, under which key.
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        self.validate_image()?;
        if let Some(build) = &self.build {
            build.validate()?;
        }
        if self.port == 0 {
            return Err((
                "pod.container.port",
                "is 0: expected the port the service listens on inside the container".to_owned(),
            ));
        }
        if self
            .setup
            .iter()
            .any(|c| c.first().is_none_or(|p| p.trim().is_empty()))
        {
            return Err((
                "pod.container.setup",
                "has an empty command: expected a program and its arguments".to_owned(),
            ));
        }
        self.validate_env_names()?;
        for mount in &self.mounts {
            mount.validate()?;
        }
        self.validate_nodes()
    }

    /// Node names that are host names on the pod's network, an entry that
    /// is one of them, and nodes only with an entry.
    fn validate_nodes(&self) -> Result<(), (&'static str, String)> {
        for (name, node) in &self.nodes {
            let ok = !name.is_empty()
                && name.len() <= 32
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.starts_with('-');
            if !ok {
                return Err((
                    "pod.container.nodes",
                    format!("has node {name:?}: expected 1 to 32 of a-z, 0-9 and `-` (it is the node's host name)"),
                ));
            }
            if node.command.is_empty() && self.command.is_empty() {
                return Err((
                    "pod.container.nodes",
                    format!("has node {name:?} without a command: give it `command`, or give [pod.container] one"),
                ));
            }
            if let Some(disk) = &node.disk {
                disk.validate(name)?;
            }
            if node
                .health_path
                .as_deref()
                .is_some_and(|p| !p.starts_with('/'))
            {
                return Err((
                    "pod.container.nodes",
                    format!("has node {name:?} whose health_path does not start with `/`"),
                ));
            }
        }
        match (&self.entry, self.nodes.is_empty()) {
            (None, false) => Err((
                "pod.container.entry",
                format!(
                    "is missing: a pod of several nodes names the one whose API is the pod's (one of {})",
                    self.node_names()
                ),
            )),
            (Some(entry), false) if !self.nodes.contains_key(entry) => Err((
                "pod.container.entry",
                format!("is {entry:?}, which is not a node: expected one of {}", self.node_names()),
            )),
            (Some(_), true) => Err((
                "pod.container.entry",
                "names a node, but there is no [pod.container.nodes.NAME]: add the nodes, or remove `entry`".to_owned(),
            )),
            _ if !self.reach.is_empty() && self.nodes.is_empty() => Err((
                "pod.container.reach",
                "is for a pod of several nodes: add [pod.container.nodes.NAME], or remove `reach`".to_owned(),
            )),
            _ => Ok(()),
        }
    }

    fn node_names(&self) -> String {
        self.nodes
            .keys()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Exactly one of `image` and `build`, and an image that names one.
    fn validate_image(&self) -> Result<(), (&'static str, String)> {
        match (&self.image, &self.build) {
            (Some(_), Some(_)) | (None, None) => Err((
                "pod.container",
                "needs exactly one of `image` (an image the engine holds) and `build` \
                 (a context dir of the suite)"
                    .to_owned(),
            )),
            (Some(image), None) if image.trim().is_empty() => {
                Err(("pod.container.image", "is empty".to_owned()))
            }
            _ => Ok(()),
        }
    }

    fn validate_env_names(&self) -> Result<(), (&'static str, String)> {
        for key in self.env.keys() {
            let ok = !key.is_empty()
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !key.as_bytes()[0].is_ascii_digit();
            if !ok {
                return Err((
                    "pod.container.env",
                    format!("has {key:?}: expected names of A-Z, a-z, 0-9 and `_`"),
                ));
            }
        }
        Ok(())
    }
}

impl BuildSection {
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.context.as_os_str().is_empty() || self.context.is_absolute() {
            return Err((
                "pod.container.build.context",
                format!(
                    "is {:?}: expected a directory relative to the suite dir",
                    self.context
                ),
            ));
        }
        if self
            .prepare
            .iter()
            .any(|c| c.first().is_none_or(|p| p.trim().is_empty()))
        {
            return Err((
                "pod.container.build.prepare",
                "has an empty command: expected a program and its arguments".to_owned(),
            ));
        }
        Ok(())
    }
}

impl MountSection {
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if !self.target.starts_with('/') {
            return Err((
                "pod.container.mounts",
                format!(
                    "has target {:?}: expected an absolute path in the container",
                    self.target
                ),
            ));
        }
        match (&self.volume, &self.source) {
            (Some(name), None) => {
                let ok = !name.is_empty()
                    && name.len() <= 32
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if !ok {
                    return Err((
                        "pod.container.mounts",
                        format!("has volume {name:?}: expected 1 to 32 of a-z, 0-9 and `-`"),
                    ));
                }
                Ok(())
            }
            (None, Some(source)) if source.is_absolute() => Err((
                "pod.container.mounts",
                format!("has source {source:?}: expected a directory relative to the suite dir"),
            )),
            (None, Some(_)) => Ok(()),
            _ => Err((
                "pod.container.mounts",
                format!(
                    "has an entry for {:?} with {}: expected exactly one of `volume` \
                     (a volume of the pod) and `source` (a directory of the suite)",
                    self.target,
                    if self.volume.is_some() {
                        "both"
                    } else {
                        "neither"
                    }
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigError, SuiteConfig};
    use std::path::Path;

    fn parse(text: &str) -> Result<SuiteConfig, ConfigError> {
        SuiteConfig::parse(text, Path::new("testkit.toml"))
    }

    #[test]
    fn a_built_container_pod_parses_with_its_mounts_and_setup() {
        let c = parse(
            r#"
            [pod]
            ready = "health"
            fields = { password = "{random}" }
            [pod.container]
            build = { context = "container", prepare = [["sh", "prepare.sh"]] }
            port = 8090
            command = ["svc", "serve", "--http", "{listen}"]
            env = { ADMIN_PASSWORD = "{password}" }
            mounts = [{ volume = "data", target = "/data" }, { source = "fx", target = "/fx", read_only = true }]
            setup = [["svc", "init"]]
            "#,
        )
        .unwrap();
        let container = c.pod.container.unwrap();
        assert_eq!(container.port, 8090);
        assert_eq!(container.build.unwrap().dockerfile, "Dockerfile");
        assert_eq!(container.mounts.len(), 2);
        assert!(container.mounts[1].read_only);
        assert_eq!(container.setup, [["svc", "init"]]);
    }

    /// A pod of several nodes writes its nodes under the handle's
    /// `cluster`: a field of that name would be read as that, and the pod
    /// boot fail with "not a cluster's description". `check` refuses it.
    #[test]
    fn a_field_named_cluster_is_refused_naming_why() {
        let e = parse(
            "[pod]\nready = \"health\"\nfields = { cluster = \"{random}\" }\n\
             [pod.container]\nimage = \"x\"\nport = 80\nentry = \"a\"\n\
             [pod.container.nodes.a]\ncommand = [\"s\"]",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("pod.fields") && e.contains("\"cluster\""), "{e}");
    }

    #[test]
    fn each_mistake_names_its_key_and_the_fix() {
        let cases = [
            ("port = 80", "exactly one of `image`"),
            (
                "image = \"x\"\nbuild = { context = \"c\" }\nport = 80",
                "exactly one of `image`",
            ),
            ("image = \"x\"\nport = 0", "pod.container.port"),
            (
                "build = { context = \"/abs\" }\nport = 80",
                "relative to the suite dir",
            ),
            (
                "image = \"x\"\nport = 80\nenv = { \"A-B\" = \"1\" }",
                "pod.container.env",
            ),
            (
                "image = \"x\"\nport = 80\nmounts = [{ target = \"/d\" }]",
                "neither",
            ),
            (
                "image = \"x\"\nport = 80\nmounts = [{ volume = \"Data\", target = \"/d\" }]",
                "a-z, 0-9",
            ),
            (
                "image = \"x\"\nport = 80\nmounts = [{ volume = \"d\", target = \"d\" }]",
                "absolute path",
            ),
            (
                "image = \"x\"\nport = 80\nsetup = [[]]",
                "pod.container.setup",
            ),
            (
                "image = \"x\"\nport = 80\nentry = \"a\"\n[pod.container.nodes.a]\ncommand = [\"s\"]\ndisk = { target = \"data\", size_mib = 8 }",
                "`pod.container.nodes.*.disk` of `a` has target \"data\": expected an absolute path",
            ),
            (
                "image = \"x\"\nport = 80\nentry = \"a\"\n[pod.container.nodes.a]\ncommand = [\"s\"]\ndisk = { target = \"/d\", size_mib = 0 }",
                "size_mib = 0: expected 1 to 1024",
            ),
            (
                "image = \"x\"\nport = 80\nentry = \"a\"\n[pod.container.nodes.a]\ncommand = [\"s\"]\ndisk = { target = \"/d\", size_mib = 4096 }",
                "size_mib = 4096: expected 1 to 1024",
            ),
        ];
        for (body, expected) in cases {
            let e = parse(&format!("[pod.container]\n{body}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{body}: {e}");
        }
    }
}
