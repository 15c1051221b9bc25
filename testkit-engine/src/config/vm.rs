//! `[pod.vm]` of `testkit.toml`: the pod as a service installed from its
//! Debian package in a virtual machine (QEMU), chosen for a run by
//! `testkit-runner run --pod vm` once the runner offers it.
//!
//! ```toml
//! [pod.vm]
//! image = "debian-12"                 # or "debian-12-docker" (with docker.io)
//! prepare = [["sh", "vm/build-deb.sh"]]  # run in the suite dir before the boot
//! debs = "vm/debs"                    # every *.deb of this suite dir is installed (dpkg -i)
//! port = 8080                         # the guest port: forwarded from 127.0.0.1:<free port>
//! memory_mib = 1024
//! cpus = 1
//! # Handle fields read in the guest once the packages are installed: a
//! # `VAR=value` line of a file, or the whole file (trimmed) without `var`.
//! fields = { token = { file = "/etc/sandboxd/token.env", var = "SANDBOXD_TOKEN" } }
//! ```
//!
//! Not yet part of [`super::PodSection`]: the section parses and validates
//! on its own until the pod launcher boots machines.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[pod.vm]`: how to run the pod in a virtual machine.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct VmSection {
    /// The machine image, by name (`debian-12`, `debian-12-docker`).
    #[serde(default = "default_image")]
    pub image: String,
    /// Commands run in the suite dir before the boot (building the
    /// packages, say).
    #[serde(default)]
    pub prepare: Vec<Vec<String>>,
    /// A directory of the suite whose `*.deb` files are installed.
    pub debs: String,
    /// The guest port the service listens on.
    pub port: u16,
    /// The guest's memory, in MiB.
    #[serde(default = "default_memory")]
    pub memory_mib: u32,
    /// The guest's CPUs.
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    /// Handle fields read from files of the guest.
    #[serde(default)]
    pub fields: BTreeMap<String, GuestField>,
}

/// A handle field read in the guest (`[pod.vm.fields]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GuestField {
    /// An absolute path in the guest.
    pub file: String,
    /// The variable of a `VAR=value` line to take; the whole file when unset.
    #[serde(default)]
    pub var: Option<String>,
}

fn default_image() -> String {
    "debian-12".to_owned()
}

fn default_memory() -> u32 {
    1024
}

fn default_cpus() -> u32 {
    1
}

impl VmSection {
    /// Checks what serde cannot: `(key, what is wrong and how to mend it)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.port == 0 {
            return Err((
                "pod.vm.port",
                "must be the port the service listens on in the guest, not 0".to_owned(),
            ));
        }
        if self.debs.is_empty() || self.debs.starts_with('/') {
            return Err((
                "pod.vm.debs",
                format!(
                    "{:?}: give a directory of the suite, relative to testkit.toml",
                    self.debs
                ),
            ));
        }
        if self.memory_mib < 256 {
            return Err((
                "pod.vm.memory_mib",
                format!(
                    "{} MiB is too little for Debian with systemd: give at least 256",
                    self.memory_mib
                ),
            ));
        }
        if !(1..=16).contains(&self.cpus) {
            return Err(("pod.vm.cpus", format!("{}: give 1 to 16", self.cpus)));
        }
        if let Some(empty) = self.prepare.iter().position(Vec::is_empty) {
            return Err((
                "pod.vm.prepare",
                format!(
                    "command {} is empty: give a program and its arguments",
                    empty + 1
                ),
            ));
        }
        for (name, field) in &self.fields {
            if !field.file.starts_with('/') {
                return Err((
                    "pod.vm.fields",
                    format!(
                        "{name}: {:?} is not an absolute path in the guest",
                        field.file
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<VmSection, String> {
        let section: VmSection = toml::from_str(text).map_err(|e| e.to_string())?;
        section
            .validate()
            .map_err(|(key, problem)| format!("{key}: {problem}"))?;
        Ok(section)
    }

    #[test]
    fn a_vm_pod_parses_with_its_defaults_and_fields() {
        let vm = parse(
            r#"
            prepare = [["sh", "vm/build-deb.sh"]]
            debs = "vm/debs"
            port = 8080
            fields = { token = { file = "/etc/sandboxd/token.env", var = "SANDBOXD_TOKEN" } }
            "#,
        )
        .unwrap();
        assert_eq!(vm.image, "debian-12");
        assert_eq!((vm.memory_mib, vm.cpus), (1024, 1));
        assert_eq!(
            vm.fields["token"],
            GuestField {
                file: "/etc/sandboxd/token.env".to_owned(),
                var: Some("SANDBOXD_TOKEN".to_owned())
            }
        );
    }

    #[test]
    fn each_mistake_names_its_key_and_the_fix() {
        let cases = [
            ("debs = \"d\"\nport = 0", "pod.vm.port: must be the port"),
            (
                "debs = \"/abs\"\nport = 1",
                "pod.vm.debs: \"/abs\": give a directory of the suite",
            ),
            (
                "debs = \"d\"\nport = 1\nmemory_mib = 64",
                "pod.vm.memory_mib: 64 MiB",
            ),
            (
                "debs = \"d\"\nport = 1\ncpus = 0",
                "pod.vm.cpus: 0: give 1 to 16",
            ),
            (
                "debs = \"d\"\nport = 1\nprepare = [[]]",
                "pod.vm.prepare: command 1 is empty",
            ),
            (
                "debs = \"d\"\nport = 1\nfields = { t = { file = \"rel\" } }",
                "pod.vm.fields: t: \"rel\" is not an absolute path",
            ),
            (
                "debs = \"d\"\nport = 1\nkernel = \"x\"",
                "unknown field `kernel`",
            ),
            ("port = 1", "missing field `debs`"),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
