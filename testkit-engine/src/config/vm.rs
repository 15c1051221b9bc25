//! `[pod.vm]` of `testkit.toml`: the pod as a service installed from its
//! Debian package in a virtual machine (QEMU), chosen for a run by
//! `testkit-runner run --pod vm`.
//!
//! ```toml
//! [pod.vm]
//! image = "debian-12"                 # or "debian-12-docker" (with docker.io)
//! prepare = [["sh", "vm/build-deb.sh"]]  # run in the suite dir before the boot
//! debs = "vm/debs"                    # every *.deb of this suite dir is installed (dpkg -i)
//! port = 8080                         # the guest port: forwarded from 127.0.0.1:<free port>
//! memory_mib = 1024
//! cpus = 1
//! ceiling = "5m"                      # boot, install and first healthy answer, at most
//! data_disk_mib = 64                  # a blank data disk, mounted at /var/lib/testkit-data
//! # Handle fields read in the guest once the service answers healthy: a
//! # `VAR=value` line of a file, a string at a JSON pointer of a JSON file,
//! # or the whole file (trimmed). `name` names the pod (else testkit does).
//! fields = { token = { file = "/etc/sandboxd/token.env", var = "SANDBOXD_TOKEN" },
//!            name = { file = "/var/lib/sandboxd/identity.json", pointer = "/name" } }
//! ```
//!
//! `[pod]` `health_path` and `public_fields` hold for the machine as for
//! the process; `[pod]` `command`, `setup`, `env`, `ports`, `fields` and
//! `ceiling` are the process's (the machine has its own `fields` and
//! `ceiling`).

use std::collections::BTreeMap;
use std::time::Duration;

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
    /// The longest the machine may take from the start of its boot to its
    /// first healthy answer (the boot, the packages' install, the
    /// service's start); the image's build and `prepare` are not counted.
    #[serde(default = "default_ceiling", with = "super::humantime_serde_compat")]
    pub ceiling: Duration,
    /// A blank ext4 data disk of this many MiB, mounted in the guest at
    /// `/var/lib/testkit-data` before the packages are installed: where the
    /// product keeps what a full disk should hit (`cx.faults().fill_disk`).
    #[serde(default)]
    pub data_disk_mib: Option<u32>,
}

/// The sizes a data disk may have, in MiB: ext4 needs a few MiB of its
/// own, and a fault fills the whole disk, which takes longer the larger
/// it is.
const DATA_DISK_MIB: std::ops::RangeInclusive<u32> = 8..=4096;

/// A handle field read in the guest (`[pod.vm.fields]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GuestField {
    /// An absolute path in the guest.
    pub file: String,
    /// The variable of a `VAR=value` line to take.
    #[serde(default)]
    pub var: Option<String>,
    /// The JSON pointer of a string (or number) in a JSON file to take.
    /// Without `var` or `pointer`, the whole file (trimmed).
    #[serde(default)]
    pub pointer: Option<String>,
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

fn default_ceiling() -> Duration {
    Duration::from_secs(300)
}

impl VmSection {
    /// Checks what serde cannot: `(key, what is wrong and how to mend it)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !crate::machine::ImageRecipe::known().any(|known| known == self.image) {
            return Err((
                "pod.vm.image",
                format!(
                    "is {:?}, which is no machine image: give one of {}",
                    self.image,
                    crate::machine::ImageRecipe::known()
                        .map(|k| format!("{k:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
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
        if let Some(mib) = self.data_disk_mib.filter(|m| !DATA_DISK_MIB.contains(m)) {
            return Err((
                "pod.vm.data_disk_mib",
                format!(
                    "{mib} MiB: give {} to {} (ext4 needs a few MiB of its own; a full-disk \
                     fault writes the whole disk)",
                    DATA_DISK_MIB.start(),
                    DATA_DISK_MIB.end()
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
            // The pod's name may come from the guest; the rest testkit fills.
            let filled: Vec<&str> = crate::template::RESERVED_FIELDS
                .iter()
                .copied()
                .filter(|f| *f != "name")
                .collect();
            super::field_name("pod.vm.fields", name, &filled)?;
            if field.var.is_some() && field.pointer.is_some() {
                return Err((
                    "pod.vm.fields",
                    format!("{name}: has both `var` and `pointer`: give one, or neither for the whole file"),
                ));
            }
            if field.pointer.as_ref().is_some_and(|p| !p.starts_with('/')) {
                return Err((
                    "pod.vm.fields",
                    format!("{name}: `pointer` is a JSON pointer, such as \"/name\""),
                ));
            }
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
        assert_eq!(vm.ceiling, Duration::from_secs(300));
        assert_eq!(
            vm.fields["token"],
            GuestField {
                file: "/etc/sandboxd/token.env".to_owned(),
                var: Some("SANDBOXD_TOKEN".to_owned()),
                pointer: None,
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
                "debs = \"d\"\nport = 1\ndata_disk_mib = 2",
                "pod.vm.data_disk_mib: 2 MiB: give 8 to 4096",
            ),
            (
                "debs = \"d\"\nport = 1\ndata_disk_mib = 100000",
                "pod.vm.data_disk_mib: 100000 MiB: give 8 to 4096",
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
            (
                "debs = \"d\"\nport = 1\nimage = \"debian-13\"",
                "pod.vm.image: is \"debian-13\", which is no machine image: give one of \"debian-12\", \"debian-12-docker\"",
            ),
            (
                "debs = \"d\"\nport = 1\nfields = { base_url = { file = \"/f\" } }",
                "pod.vm.fields: has \"base_url\"",
            ),
            (
                "debs = \"d\"\nport = 1\nfields = { n = { file = \"/f\", var = \"A\", pointer = \"/a\" } }",
                "pod.vm.fields: n: has both `var` and `pointer`",
            ),
            (
                "debs = \"d\"\nport = 1\nfields = { n = { file = \"/f\", pointer = \"a\" } }",
                "pod.vm.fields: n: `pointer` is a JSON pointer",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    /// `[pod.vm]` is part of `[pod]`: a suite's file parses with it, and
    /// its mistakes are the file's, naming the key.
    #[test]
    fn the_section_is_part_of_a_suite_s_pod() {
        use super::super::SuiteConfig;
        let path = std::path::Path::new("/s/testkit.toml");
        let c = SuiteConfig::parse(
            "[pod.vm]\ndebs = \"vm/debs\"\nport = 8080\nceiling = \"90s\"\n",
            path,
        )
        .unwrap();
        let vm = c.pod.vm.unwrap();
        assert_eq!((vm.port, vm.ceiling), (8080, Duration::from_secs(90)));
        let e = SuiteConfig::parse("[pod.vm]\ndebs = \"d\"\nport = 0\n", path)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid /s/testkit.toml: `pod.vm.port` must be the port the service listens on in \
             the guest, not 0"
        );
        let e = SuiteConfig::parse("[pod.vm]\ndebs = \"d\"\nport = 1\nceiling = \"0s\"\n", path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`pod.vm.ceiling` is \"0s\": it is zero"), "{e}");
    }
}
