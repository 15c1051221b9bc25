//! Machine pods, the runner's side (`--pod vm`, `[pod.vm]`): the suite's
//! `prepare` commands, the packages they leave, and the machine image,
//! from the cache or built into it, made ready for the pod launcher,
//! which boots the machine.
//!
//! Images are built by the runner only (a build needs root and Debian's
//! mirror, and test processes never start pods).

use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit_engine::config::{Installer, SuiteConfig};
use testkit_engine::machine::{
    ImageCache, ImageRecipe, MachineError, MachineRecord, Provenance, DEFAULT_MIRROR,
};
use testkit_engine::pod::{BinariesLaunch, MachineLaunch, StopReport};
use testkit_engine::settings::Settings;

use crate::containers::RunError;
use crate::verdict::Verdict;

/// `--installer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InstallerArg {
    /// The product's Debian packages (`[pod.vm] debs`), with `dpkg -i`.
    Deb,
    /// Files copied to named paths and the product's unit started
    /// (`[pod.vm.binaries]`).
    Binaries,
}

impl InstallerArg {
    fn installer(self) -> Installer {
        match self {
            InstallerArg::Deb => Installer::Deb,
            InstallerArg::Binaries => Installer::Binaries,
        }
    }
}

/// The environment and installer of a machine pod's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MachineChoice {
    /// The machine image to boot.
    pub(crate) environment: String,
    pub(crate) installer: Installer,
}

/// An `--environment` or `--installer` the run cannot use.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChoiceError {
    #[error("--environment and --installer choose a machine pod's: add --pod vm")]
    NotAMachine,
    #[error(
        "--environment {given:?}: the suite's [pod.vm] environments are {declared}: name one, \
         or add it to `environments` in testkit.toml (machine images there are: {known})"
    )]
    Environment {
        given: String,
        declared: String,
        known: String,
    },
    #[error(
        "--installer {given}: the suite's [pod.vm] does not set it up ({how}); it sets up {set}"
    )]
    Installer {
        given: &'static str,
        how: &'static str,
        set: String,
    },
}

/// The environment and installer of a run: `--environment` and
/// `--installer`, else the suite's defaults; each one the suite declares.
/// `None` for a pod that is no machine (which takes neither option).
pub(crate) fn choose(
    mode: crate::containers::PodMode,
    config: &SuiteConfig,
    environment: Option<&str>,
    installer: Option<InstallerArg>,
) -> Result<Option<MachineChoice>, ChoiceError> {
    let section = match (&config.pod.vm, mode) {
        (Some(section), crate::containers::PodMode::Vm) => section,
        _ if environment.is_some() || installer.is_some() => return Err(ChoiceError::NotAMachine),
        _ => return Ok(None),
    };
    let declared = section.environment_names();
    let environment = environment.unwrap_or(&section.image);
    if !declared.contains(&environment) {
        return Err(ChoiceError::Environment {
            given: environment.to_owned(),
            declared: declared.join(", "),
            known: ImageRecipe::known().collect::<Vec<_>>().join(", "),
        });
    }
    let installer = installer.map_or(section.default_installer(), InstallerArg::installer);
    if !section.installers().contains(&installer) {
        return Err(ChoiceError::Installer {
            given: installer.as_str(),
            how: match installer {
                Installer::Deb => "`debs`, a directory of .deb files",
                Installer::Binaries => "[pod.vm.binaries], files to copy and a unit to start",
            },
            set: section
                .installers()
                .iter()
                .map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(Some(MachineChoice {
        environment: environment.to_owned(),
        installer,
    }))
}

/// Why a machine pod could not be made ready.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MachinesError {
    #[error("the suite's testkit.toml has no [pod.vm]")]
    NoSection,
    #[error("{}", path.display())]
    LogsDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[pod.vm] prepare")]
    Prepare(#[source] RunError),
    #[error(
        "[pod.vm] debs: {} holds no .deb file once `prepare` has run: have `prepare` build the \
         packages into it, or name the directory that holds them",
        .0.display()
    )]
    NoDebs(PathBuf),
    #[error("[pod.vm] debs: {0}")]
    TwoVersions(String),
    #[error("[pod.vm.binaries] files: {} is not a file of the suite: have `prepare` make it, or name the file that is", .0.display())]
    NoBinary(PathBuf),
    #[error("[pod.vm] debs: cannot read {}", path.display())]
    ReadDebs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "nowhere to cache machine images: set TESTKIT_MACHINE_CACHE (or XDG_CACHE_HOME or HOME)"
    )]
    NoCache,
    #[error("[pod.vm] image")]
    Image(#[source] MachineError),
}

/// The directory machine images are cached in: `TESTKIT_MACHINE_CACHE`,
/// else `$XDG_CACHE_HOME/testkit/machines`, else
/// `$HOME/.cache/testkit/machines`.
pub(crate) fn cache_dir(settings: &Settings) -> Option<PathBuf> {
    settings.machine_cache.clone().or_else(|| {
        ImageCache::default_dir(|name| {
            let value = match name {
                "XDG_CACHE_HOME" => settings.cache_home.as_ref(),
                "HOME" => settings.home.as_ref(),
                _ => None,
            };
            value.map(|v| v.to_string_lossy().into_owned())
        })
    })
}

/// The machine launch of the suite's `[pod.vm]`: its `prepare` commands
/// run in the suite dir (each in a process group told to `groups`, the
/// run's watchdog), with `path` as `PATH` and their output in
/// `vm.prepare.log`; the `.deb` files of its `debs` directory; its image,
/// from the cache or built into it now (`say` is told so first: it takes
/// a minute or two).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn spec(
    config: &SuiteConfig,
    choice: &MachineChoice,
    run_id: &str,
    suite_dir: &Path,
    logs_dir: &Path,
    path: Option<std::ffi::OsString>,
    settings: &Settings,
    groups: &(dyn Fn(i32) + Sync),
    say: &(dyn Fn(&str) + Sync),
) -> Result<MachineLaunch, MachinesError> {
    let Some(section) = &config.pod.vm else {
        return Err(MachinesError::NoSection);
    };
    std::fs::create_dir_all(logs_dir).map_err(|source| MachinesError::LogsDir {
        path: logs_dir.to_owned(),
        source,
    })?;
    let log = logs_dir.join("vm.prepare.log");
    for command in &section.prepare {
        crate::containers::run_logged(
            &command[0],
            &command[1..],
            suite_dir,
            path.as_deref(),
            &log,
            groups,
        )
        .await
        .map_err(MachinesError::Prepare)?;
    }
    let (debs, binaries) = match (choice.installer, &section.debs, &section.binaries) {
        (Installer::Deb, Some(debs), _) => (debs_in(&suite_dir.join(debs))?, None),
        (Installer::Binaries, _, Some(b)) => {
            let launch = BinariesLaunch::new(b, suite_dir);
            if let Some((missing, _, _)) = launch.files.iter().find(|f| !f.0.is_file()) {
                return Err(MachinesError::NoBinary(missing.clone()));
            }
            (Vec::new(), Some(launch))
        }
        // `choose` took only an installer the section sets up.
        _ => return Err(MachinesError::NoSection),
    };
    let recipe =
        ImageRecipe::named(&choice.environment, DEFAULT_MIRROR).map_err(MachinesError::Image)?;
    let cache = ImageCache::new(cache_dir(settings).ok_or(MachinesError::NoCache)?);
    if cache.lookup(&recipe).is_none() {
        say(&format!(
            "up: building the machine image {} into {} (once: later runs reuse it)",
            recipe.name,
            cache.dir().display()
        ));
    }
    let (image, provenance) = cache.ensure(&recipe).await.map_err(MachinesError::Image)?;
    let note = match provenance {
        Provenance::Cached => format!("cached in {}", cache.dir().display()),
        Provenance::Built(took) => format!(
            "built in {} into {}",
            humantime::format_duration(Duration::from_secs(took.as_secs())),
            cache.dir().display()
        ),
        _ => "from the cache".to_owned(),
    };
    let mut launch = MachineLaunch::new(section, image, note, debs);
    launch.binaries = binaries;
    launch.run_id = Some(run_id.to_owned());
    Ok(launch)
}

/// The `.deb` files of `dir`, sorted by name; at least one.
fn debs_in(dir: &Path) -> Result<Vec<PathBuf>, MachinesError> {
    let entries = std::fs::read_dir(dir).map_err(|source| MachinesError::ReadDebs {
        path: dir.to_owned(),
        source,
    })?;
    let mut debs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb") && p.is_file())
        .collect();
    debs.sort();
    if debs.is_empty() {
        return Err(MachinesError::NoDebs(dir.to_owned()));
    }
    if let Some(problem) = testkit_engine::config::two_versions_of_a_package(&debs) {
        return Err(MachinesError::TwoVersions(problem));
    }
    Ok(debs)
}

/// The down verdict of a machine pod: QEMU ended (asked to quit, or
/// killed past its bound, which fails it), QEMU and the overlay proven
/// gone.
pub(crate) fn stopped(name: &str, pid: u32, report: &StopReport) -> (Verdict, String) {
    let Some(m) = &report.machine else {
        return (Verdict::Pass, String::new());
    };
    let took =
        humantime::format_duration(Duration::from_millis(report.duration.as_millis() as u64));
    let gone = format!(
        "QEMU (pid {}) verified gone, its overlay and run dir {} verified gone; the pod's \
         private dir ({}) deleted, verified gone",
        m.qemu_pid,
        m.run_dir.display(),
        report.removed.display()
    );
    if m.already_gone {
        (
            Verdict::Pass,
            format!(
                "pod {name} (pid {pid}): QEMU had exited before the stop (see `pod`), in {took}; {gone}"
            ),
        )
    } else if m.exited_cleanly {
        (
            Verdict::Pass,
            format!(
                "stopped pod {name} (pid {pid}): the machine quit when asked, in {took}; {gone}"
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!(
                "stopped pod {name} (pid {pid}) in {took}, but QEMU did not exit when asked to \
                 quit and was killed; {gone}"
            ),
        )
    }
}

/// How to reach and end a machine pod kept by `--keep`.
pub(crate) fn keep_note(
    pod: &testkit_engine::pod::LaunchedPod,
    record: &MachineRecord,
    handle_file: &Path,
    run_id: &str,
) -> String {
    let forwarded: Vec<String> = record
        .ports
        .iter()
        .map(|(guest, host)| format!("127.0.0.1:{host} → guest port {guest}"))
        .collect();
    format!(
        "pod {name} is still running at {url} (a machine: QEMU pid {pid}, image {image})\n\
         \x20 reach it: TESTKIT_POD_HANDLE={handle} TESTKIT_RUN_ID={run_id} cargo nextest run   (in the suite)\n\
         \x20 forwarded: {forwarded}\n\
         \x20 console:  {console}\n\
         \x20 QEMU log: {qemu_log}\n\
         \x20 monitor:  {monitor} (QMP, free for you)\n\
         \x20 stop it:  testkit-runner pod down {name} && rm -rf {secrets}\n",
        name = pod.handle.name(),
        url = pod.handle.base_url(),
        pid = record.qemu_pid,
        image = record.image,
        handle = handle_file.display(),
        forwarded = forwarded.join(", "),
        console = record.console_log().display(),
        qemu_log = record.qemu_log().display(),
        monitor = record.monitor_socket().display(),
        secrets = handle_file.parent().unwrap_or(Path::new(".")).display(),
    )
}

/// `, machine QEMU pid N, image I, …` for a machine pod, else nothing:
/// what `pod ls` adds after the pod's URL.
pub(crate) fn describe(private_dir: &Path) -> String {
    match MachineRecord::of_pod(private_dir) {
        Some(r) => format!(
            ", machine ({}{})",
            r.describe(),
            if r.kept() { ", kept" } else { "" }
        ),
        None => String::new(),
    }
}

/// What `pod down` did to a machine pod's machine.
pub(crate) fn down_note(report: &StopReport) -> Option<String> {
    let m = report.machine.as_ref()?;
    let how = match (m.already_gone, m.exited_cleanly) {
        (true, _) => "had exited already",
        (false, true) => "exited on SIGTERM",
        (false, false) => "did not exit on SIGTERM and was killed",
    };
    Some(format!(
        "  machine: QEMU (pid {}) {how}, verified gone; its overlay and run dir {} verified gone",
        m.qemu_pid,
        m.run_dir.display()
    ))
}

/// The machines recorded under `parent` (the temp dir, where pods' private
/// dirs are) that nothing will end: their owner is gone and they were not
/// kept, and, with `run`, booted for that run. Each is ended and its
/// overlay removed, proven: `machine … : ended, …`; or what was left.
pub(crate) async fn sweep_orphans(parent: &Path, run: Option<&str>) -> Vec<Result<String, String>> {
    let mut done = Vec::new();
    for record in MachineRecord::all_under(parent) {
        if !record.orphaned() || run.is_some_and(|r| record.run_id.as_deref() != Some(r)) {
            continue;
        }
        let what = format!(
            "machine {} (run {}, its owner pid {} gone)",
            record.describe(),
            record.run_id.as_deref().unwrap_or("-"),
            record.owner.map_or(0, |o| o.pid)
        );
        done.push(match record.end(Duration::from_secs(10)).await {
            Ok(ended) if ended.was_running => Ok(format!(
                "{what}: QEMU ended, verified gone; its overlay {} removed, verified gone",
                record.run_dir.display()
            )),
            Ok(_) => Ok(format!(
                "{what}: QEMU had exited; its overlay {} removed, verified gone",
                record.run_dir.display()
            )),
            Err(e) => Err(format!("{what}: {}", testkit_engine::error_chain(&e))),
        });
    }
    done
}

/// How a machine pod's QEMU ended, `status` its exit as waited for: what
/// the guest's console says it did (powered off, panicked, rebooted: each
/// ends QEMU, which runs with `-no-reboot`), else QEMU died.
pub(crate) fn went_down(record: &MachineRecord, status: &str) -> String {
    let console = std::fs::read(record.console_log()).unwrap_or_default();
    let tail = String::from_utf8_lossy(&console[console.len().saturating_sub(64 * 1024)..]);
    let what = if tail.contains("Kernel panic") {
        "the guest panicked"
    } else if tail.contains("reboot: Power down") {
        "the guest powered off"
    } else if tail.contains("reboot: Restarting system") {
        "the guest rebooted (a machine pod runs with -no-reboot: a reboot ends it)"
    } else if status.starts_with("killed") {
        "QEMU was killed"
    } else {
        "QEMU exited, the guest's console saying nothing of why"
    };
    format!("{what}; QEMU (pid {}) {status}", record.qemu_pid)
}

/// `janitor`: ends the orphaned machines (of `run`, or of every run) and
/// prints what it did; whether all of them are gone.
pub(crate) async fn janitor_print(run: Option<&str>) -> bool {
    let swept = sweep_orphans(&std::env::temp_dir(), run).await;
    for item in &swept {
        match item {
            Ok(done) => println!("machines: {done}"),
            Err(left) => println!("machines: LEFT {left}"),
        }
    }
    let left = swept.iter().filter(|s| s.is_err()).count();
    println!(
        "machines: {} orphaned machine(s) found under {}, {} ended, {left} could not be",
        swept.len(),
        std::env::temp_dir().display(),
        swept.len() - left
    );
    left == 0
}

/// The residue verdict `of_kinds` with the run's orphaned machines: each
/// one (not the run's own pod, which its owner, this runner, holds) is a
/// leak, ended and named.
pub(crate) async fn with_machine_residue(
    of_kinds: (Verdict, String, Vec<String>, bool),
    run_id: &str,
) -> (Verdict, String, Vec<String>, bool) {
    let swept = sweep_orphans(&std::env::temp_dir(), Some(run_id)).await;
    if swept.is_empty() {
        return of_kinds;
    }
    let (_, mut evidence, mut leaks, unknown) = of_kinds;
    let machines: Vec<String> = swept
        .into_iter()
        .map(|item| match item {
            Ok(line) | Err(line) => line,
        })
        .collect();
    evidence.push_str(&format!(
        "; {} machine(s) of run {run_id} with no live owner: {}",
        machines.len(),
        machines.join("; ")
    ));
    leaks.extend(machines);
    (Verdict::Fail, evidence, leaks, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packages_are_the_deb_files_of_the_dir_and_an_empty_dir_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let e = debs_in(dir.path()).unwrap_err().to_string();
        assert!(e.contains("holds no .deb file"), "{e}");
        std::fs::write(dir.path().join("b_1_amd64.deb"), b"").unwrap();
        std::fs::write(dir.path().join("a_1_amd64.deb"), b"").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"").unwrap();
        std::fs::create_dir(dir.path().join("x.deb")).unwrap();
        let names: Vec<String> = debs_in(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a_1_amd64.deb", "b_1_amd64.deb"]);
        let e = debs_in(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(e, MachinesError::ReadDebs { .. }));
    }

    /// A machine recorded under `parent`, a `sleep` standing in for its
    /// QEMU, owned by `owner` (`None`: kept), for run `run`.
    fn recorded(
        parent: &Path,
        name: &str,
        owner: Option<(u32, Option<u64>)>,
        run: &str,
    ) -> (PathBuf, std::process::Child) {
        use std::os::unix::process::CommandExt;
        let run_dir = parent.join(format!("testkit-pod-{name}/testkit-machine-{name}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("overlay.qcow2"), b"x").unwrap();
        let child = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let record = serde_json::json!({
            "image": "debian-12", "qemu_pid": pid,
            "qemu_start_ticks": testkit_engine::process::start_ticks(pid), "pgid": pid,
            "ports": {}, "run_dir": run_dir, "run_id": run,
            "owner": owner.map(|(pid, start_ticks)| serde_json::json!({
                "pid": pid, "start_ticks": start_ticks,
            })),
        });
        std::fs::write(run_dir.join("machine.json"), record.to_string()).unwrap();
        (run_dir, child)
    }

    /// The janitor's sweep ends a machine whose owner died unkept, of the
    /// run asked for, and removes its overlay; a kept machine, one whose
    /// owner lives, and another run's are left alone.
    #[tokio::test]
    async fn the_sweep_ends_orphaned_machines_of_the_run_and_leaves_the_rest() {
        let parent = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = (
            gone.id(),
            testkit_engine::process::start_ticks(gone.id() as i32),
        );
        gone.wait().unwrap();
        let me = std::process::id();
        let live = (me, testkit_engine::process::start_ticks(me as i32));
        let (orphan, mut o) = recorded(parent.path(), "a", Some(dead), "r1");
        let (kept, mut k) = recorded(parent.path(), "b", None, "r1");
        let (owned, mut w) = recorded(parent.path(), "c", Some(live), "r1");
        let (other, mut x) = recorded(parent.path(), "d", Some(dead), "r2");
        let swept = sweep_orphans(parent.path(), Some("r1")).await;
        assert_eq!(swept.len(), 1, "{swept:?}");
        let line = swept[0].as_ref().unwrap();
        assert!(line.contains("QEMU ended, verified gone"), "{line}");
        assert!(o.try_wait().unwrap().is_some(), "the orphan runs on");
        assert!(!orphan.exists());
        for (dir, child) in [(&kept, &mut k), (&owned, &mut w), (&other, &mut x)] {
            assert!(dir.join("overlay.qcow2").exists(), "{}", dir.display());
            assert!(child.try_wait().unwrap().is_none());
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    #[test]
    fn the_cache_is_the_setting_then_xdg_then_home() {
        let mut s = Settings::defaults();
        assert_eq!(cache_dir(&s), None);
        s.home = Some("/h".into());
        assert_eq!(
            cache_dir(&s),
            Some(PathBuf::from("/h/.cache/testkit/machines"))
        );
        s.cache_home = Some("/c".into());
        assert_eq!(cache_dir(&s), Some(PathBuf::from("/c/testkit/machines")));
        s.machine_cache = Some("/m".into());
        assert_eq!(cache_dir(&s), Some(PathBuf::from("/m")));
    }
}
