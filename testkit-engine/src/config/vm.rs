//! `[pod.vm]` of `testkit.toml`: the pod as a service installed from its
//! Debian package in a virtual machine (QEMU), chosen for a run by
//! `testkit-runner run --pod vm`.
//!
//! ```toml
//! [pod.vm]
//! image = "debian-12"                 # the default environment
//! environments = ["debian-12", "debian-12-docker"]  # what --environment may name
//! prepare = [["sh", "vm/build-deb.sh"]]  # run in the suite dir before the boot
//! debs = "vm/debs"                    # installer "deb": every *.deb of this suite dir (dpkg -i)
//! installer = "deb"                   # the default installer: "deb" or "binaries"
//! port = 8080                         # the guest port: forwarded from 127.0.0.1:<free port>
//! memory_mib = 1024                   # 256 to 16384
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
//!
//! The installer `binaries` copies files of the suite to paths in the
//! guest, runs commands in the guest, and starts the product's unit:
//!
//! ```toml
//! [pod.vm.binaries]
//! files = [{ from = "vm/bin/sandboxd", to = "/usr/bin/sandboxd", mode = "0755" },
//!          { from = "vm/sandboxd.service", to = "/etc/systemd/system/sandboxd.service" }]
//! setup = [["systemd-sysusers"]]      # in the guest, as root, after the copy
//! unit = "sandboxd.service"           # enabled and started last
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
    /// The machine image, by name (`debian-12`, `debian-12-docker`): the
    /// environment a run boots unless `--environment` names another.
    #[serde(default = "default_image")]
    pub image: String,
    /// The environments (image names) the suite runs in, for
    /// `--environment` and a CI matrix; default: `image` alone.
    #[serde(default)]
    pub environments: Vec<String>,
    /// The installer a run uses unless `--installer` names another:
    /// default `deb` when `debs` is given, else `binaries`.
    #[serde(default)]
    pub installer: Option<Installer>,
    /// The installer `binaries`: files copied to paths in the guest, and
    /// the unit started.
    #[serde(default)]
    pub binaries: Option<BinariesSection>,
    /// Commands run in the suite dir before the boot (building the
    /// packages, say).
    #[serde(default)]
    pub prepare: Vec<Vec<String>>,
    /// A directory of the suite whose `*.deb` files are installed (the
    /// installer `deb`).
    #[serde(default)]
    pub debs: Option<String>,
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

/// How the product gets onto the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// Its Debian packages, installed with `dpkg -i` (maintainer scripts
    /// included).
    Deb,
    /// Files copied to named paths, commands run, its unit started.
    Binaries,
}

impl Installer {
    /// The word `testkit.toml` and `--installer` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Installer::Deb => "deb",
            Installer::Binaries => "binaries",
        }
    }
}

/// `[pod.vm.binaries]`: the installer `binaries`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BinariesSection {
    /// The files copied into the guest, in this order.
    pub files: Vec<BinaryFile>,
    /// Commands run in the guest as root after the copy (users, state
    /// directories, a token), each a program and its arguments.
    #[serde(default)]
    pub setup: Vec<Vec<String>>,
    /// The product's systemd unit: enabled and started last.
    pub unit: String,
}

/// A file the installer `binaries` copies into the guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BinaryFile {
    /// A file of the suite, relative to `testkit.toml`.
    pub from: String,
    /// Its absolute path in the guest (parents made).
    pub to: String,
    /// Its mode, in octal (default `0644`).
    #[serde(default = "default_mode")]
    pub mode: String,
}

impl BinaryFile {
    /// The mode, parsed.
    pub fn mode_bits(&self) -> Option<u32> {
        u32::from_str_radix(&self.mode, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
    }
}

fn default_mode() -> String {
    "0644".to_owned()
}

/// The bounds of `memory_mib`.
const MEMORY_MIB: std::ops::RangeInclusive<u32> = 256..=16384;

/// A path of the suite that stays in it: relative, without `..`.
fn inside_suite(path: &str) -> bool {
    let p = std::path::Path::new(path);
    !path.is_empty()
        && p.is_relative()
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
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
        if let Some(debs) = self.debs.as_ref().filter(|d| !inside_suite(d)) {
            return Err((
                "pod.vm.debs",
                format!(
                    "{debs:?}: give a directory of the suite, relative to testkit.toml, \
                     without `..`"
                ),
            ));
        }
        if !MEMORY_MIB.contains(&self.memory_mib) {
            return Err((
                "pod.vm.memory_mib",
                format!(
                    "{} MiB: give {} to {} (Debian with systemd needs the least; a test \
                     machine on a shared host, no more than the most)",
                    self.memory_mib,
                    MEMORY_MIB.start(),
                    MEMORY_MIB.end()
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
        self.validate_environments()?;
        self.validate_installers()?;
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

impl VmSection {
    /// The environments a run may name: `environments`, else `image`.
    pub fn environment_names(&self) -> Vec<&str> {
        match self.environments.is_empty() {
            true => vec![self.image.as_str()],
            false => self.environments.iter().map(String::as_str).collect(),
        }
    }

    /// The installers the section sets up: `deb` with `debs`, `binaries`
    /// with `[pod.vm.binaries]`.
    pub fn installers(&self) -> Vec<Installer> {
        let mut all = Vec::new();
        if self.debs.is_some() {
            all.push(Installer::Deb);
        }
        if self.binaries.is_some() {
            all.push(Installer::Binaries);
        }
        all
    }

    /// The installer a run uses without `--installer`.
    pub fn default_installer(&self) -> Installer {
        self.installer.unwrap_or(match self.debs {
            Some(_) => Installer::Deb,
            None => Installer::Binaries,
        })
    }

    fn validate_environments(&self) -> Result<(), (&'static str, String)> {
        let known: Vec<&str> = crate::machine::ImageRecipe::known().collect();
        if let Some(unknown) = self
            .environments
            .iter()
            .find(|e| !known.contains(&e.as_str()))
        {
            return Err((
                "pod.vm.environments",
                format!(
                    "has {unknown:?}, which is no machine image: give names of {}",
                    known.join(", ")
                ),
            ));
        }
        if !self.environment_names().contains(&self.image.as_str()) {
            return Err((
                "pod.vm.image",
                format!(
                    "is {:?}, which `environments` does not list: add it there, or name one \
                     of them",
                    self.image
                ),
            ));
        }
        Ok(())
    }

    fn validate_installers(&self) -> Result<(), (&'static str, String)> {
        if self.installers().is_empty() {
            return Err((
                "pod.vm",
                "installs nothing: give `debs` (a directory of .deb files) or \
                 [pod.vm.binaries] (files to copy and a unit to start)"
                    .to_owned(),
            ));
        }
        if !self.installers().contains(&self.default_installer()) {
            return Err((
                "pod.vm.installer",
                format!(
                    "is {:?}, which the section does not set up: give {}",
                    self.default_installer().as_str(),
                    match self.default_installer() {
                        Installer::Deb => "`debs`",
                        Installer::Binaries => "[pod.vm.binaries]",
                    }
                ),
            ));
        }
        let Some(b) = &self.binaries else {
            return Ok(());
        };
        if b.files.is_empty() {
            return Err((
                "pod.vm.binaries.files",
                "is empty: list the files to copy, each { from, to }".to_owned(),
            ));
        }
        for f in &b.files {
            if !inside_suite(&f.from) {
                return Err((
                    "pod.vm.binaries.files",
                    format!(
                        "from = {:?}: give a file of the suite, relative to testkit.toml, \
                         without `..`",
                        f.from
                    ),
                ));
            }
            if !f.to.starts_with('/') || f.to.ends_with('/') {
                return Err((
                    "pod.vm.binaries.files",
                    format!(
                        "to = {:?}: give the absolute path of a file in the guest",
                        f.to
                    ),
                ));
            }
            if f.mode_bits().is_none() {
                return Err((
                    "pod.vm.binaries.files",
                    format!(
                        "mode = {:?} (of {}): give an octal mode, such as \"0755\"",
                        f.mode, f.to
                    ),
                ));
            }
        }
        if let Some(empty) = b.setup.iter().position(Vec::is_empty) {
            return Err((
                "pod.vm.binaries.setup",
                format!(
                    "command {} is empty: give a program and its arguments",
                    empty + 1
                ),
            ));
        }
        if b.unit.trim().is_empty() || b.unit.contains('/') {
            return Err((
                "pod.vm.binaries.unit",
                format!(
                    "{:?}: give the name of the product's systemd unit, such as \
                     \"sandboxd.service\"",
                    b.unit
                ),
            ));
        }
        Ok(())
    }

    /// Checks what is on disk, in the suite dir `suite_dir`: `debs` is a
    /// directory (once made) with one file per package; each file of
    /// `binaries` a file. `debs` may not exist yet (`prepare` makes it).
    pub fn validate_files(
        &self,
        suite_dir: &std::path::Path,
    ) -> Result<(), (&'static str, String)> {
        if let Some(debs) = &self.debs {
            let dir = suite_dir.join(debs);
            if dir.exists() && !dir.is_dir() {
                return Err((
                    "pod.vm.debs",
                    format!("{debs:?} is a file: give the directory that holds the .deb files"),
                ));
            }
            if dir.is_dir() {
                let files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                if let Some(problem) = two_versions_of_a_package(&files) {
                    return Err(("pod.vm.debs", format!("{debs:?}: {problem}")));
                }
            }
        }
        Ok(())
    }
}

/// The package a `.deb` file holds, by Debian's naming of package files
/// (`NAME_VERSION_ARCH.deb`; a name without `_` is all name).
fn package_of(file: &std::path::Path) -> Option<String> {
    if file.extension().is_none_or(|e| e != "deb") {
        return None;
    }
    let stem = file.file_stem()?.to_string_lossy().into_owned();
    Some(stem.split('_').next().unwrap_or(&stem).to_owned())
}

/// Two `.deb` files of one package among `files`, said: `dpkg -i` would
/// install both, the later over the earlier, by the order of their names.
pub fn two_versions_of_a_package(files: &[std::path::PathBuf]) -> Option<String> {
    let mut seen: BTreeMap<String, &std::path::Path> = BTreeMap::new();
    let mut sorted: Vec<&std::path::PathBuf> = files.iter().collect();
    sorted.sort();
    for file in sorted {
        let Some(package) = package_of(file) else {
            continue;
        };
        if let Some(first) = seen.insert(package.clone(), file) {
            return Some(format!(
                "holds two files of package `{package}`, {} and {}: `dpkg -i` would install \
                 one over the other; keep one (have `prepare` clear the directory first)",
                first.file_name().unwrap_or_default().to_string_lossy(),
                file.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    None
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
                "debs = \"../..\"\nport = 1",
                "pod.vm.debs: \"../..\": give a directory of the suite, relative to \
                 testkit.toml, without `..`",
            ),
            (
                "debs = \"d/../../x\"\nport = 1",
                "without `..`",
            ),
            (
                "debs = \"d\"\nport = 1\nmemory_mib = 64",
                "pod.vm.memory_mib: 64 MiB: give 256 to 16384",
            ),
            (
                "debs = \"d\"\nport = 1\nmemory_mib = 4000000",
                "pod.vm.memory_mib: 4000000 MiB: give 256 to 16384",
            ),
            (
                "debs = \"d\"\nport = 1\nenvironments = [\"debian-12\", \"ubuntu\"]",
                "pod.vm.environments: has \"ubuntu\", which is no machine image",
            ),
            (
                "debs = \"d\"\nport = 1\nenvironments = [\"debian-12-docker\"]",
                "pod.vm.image: is \"debian-12\", which `environments` does not list",
            ),
            ("port = 1", "pod.vm: installs nothing: give `debs`"),
            (
                "debs = \"d\"\nport = 1\ninstaller = \"binaries\"",
                "pod.vm.installer: is \"binaries\", which the section does not set up: give \
                 [pod.vm.binaries]",
            ),
            (
                "debs = \"d\"\nport = 1\ninstaller = \"rpm\"",
                "unknown variant `rpm`, expected `deb` or `binaries`",
            ),
            (
                "port = 1\n[binaries]\nfiles = []\nunit = \"s.service\"",
                "pod.vm.binaries.files: is empty",
            ),
            (
                "port = 1\n[binaries]\nfiles = [{ from = \"../x\", to = \"/x\" }]\nunit = \"s\"",
                "pod.vm.binaries.files: from = \"../x\"",
            ),
            (
                "port = 1\n[binaries]\nfiles = [{ from = \"x\", to = \"x\" }]\nunit = \"s\"",
                "pod.vm.binaries.files: to = \"x\": give the absolute path",
            ),
            (
                "port = 1\n[binaries]\nfiles = [{ from = \"x\", to = \"/x\", mode = \"9\" }]\nunit = \"s\"",
                "pod.vm.binaries.files: mode = \"9\" (of /x): give an octal mode",
            ),
            (
                "port = 1\n[binaries]\nfiles = [{ from = \"x\", to = \"/x\" }]\nunit = \"\"",
                "pod.vm.binaries.unit: \"\": give the name",
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

    /// What is on disk: a `debs` that is a file, or that holds two files
    /// of one package, is refused, naming them; a `debs` not made yet is
    /// `prepare`'s to make.
    #[test]
    fn the_packages_dir_is_a_dir_with_one_file_per_package() {
        let suite = tempfile::tempdir().unwrap();
        let vm = parse("debs = \"debs\"\nport = 1").unwrap();
        vm.validate_files(suite.path()).unwrap();
        std::fs::write(suite.path().join("debs"), b"").unwrap();
        let (key, problem) = vm.validate_files(suite.path()).unwrap_err();
        assert_eq!(key, "pod.vm.debs");
        assert!(problem.contains("\"debs\" is a file"), "{problem}");
        std::fs::remove_file(suite.path().join("debs")).unwrap();
        let debs = suite.path().join("debs");
        std::fs::create_dir(&debs).unwrap();
        std::fs::write(debs.join("svc_1.0_amd64.deb"), b"").unwrap();
        std::fs::write(debs.join("svc-tools_1.0_amd64.deb"), b"").unwrap();
        vm.validate_files(suite.path()).unwrap();
        std::fs::write(debs.join("svc_1.1_amd64.deb"), b"").unwrap();
        let (_, problem) = vm.validate_files(suite.path()).unwrap_err();
        assert!(
            problem.contains(
                "holds two files of package `svc`, svc_1.0_amd64.deb and svc_1.1_amd64.deb"
            ),
            "{problem}"
        );
    }

    #[test]
    fn environments_and_installers_have_their_defaults() {
        let vm = parse("debs = \"d\"\nport = 1").unwrap();
        assert_eq!(vm.environment_names(), ["debian-12"]);
        assert_eq!(vm.default_installer(), Installer::Deb);
        let vm = parse(
            "port = 1\nenvironments = [\"debian-12\", \"debian-12-docker\"]\n\
             [binaries]\nfiles = [{ from = \"b/svc\", to = \"/usr/bin/svc\", mode = \"0755\" }]\n\
             unit = \"svc.service\"",
        )
        .unwrap();
        assert_eq!(vm.environment_names(), ["debian-12", "debian-12-docker"]);
        assert_eq!(vm.default_installer(), Installer::Binaries);
        assert_eq!(vm.installers(), [Installer::Binaries]);
        assert_eq!(vm.binaries.unwrap().files[0].mode_bits(), Some(0o755));
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
