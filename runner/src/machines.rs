//! Machine pods, the runner's side (`--pod vm`, `[pod.vm]`): the suite's
//! `prepare` commands, the packages they leave, and the machine image,
//! from the cache or built into it, made ready for the pod launcher,
//! which boots the machine.
//!
//! Images are built by the runner only (a build needs root and Debian's
//! mirror, and test processes never start pods).

use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit_engine::config::SuiteConfig;
use testkit_engine::machine::{ImageCache, ImageRecipe, MachineError, Provenance, DEFAULT_MIRROR};
use testkit_engine::pod::{MachineLaunch, StopReport};
use testkit_engine::settings::Settings;

use crate::containers::RunError;
use crate::verdict::Verdict;

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
pub(crate) async fn spec(
    config: &SuiteConfig,
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
    let debs = debs_in(&suite_dir.join(&section.debs))?;
    let recipe =
        ImageRecipe::named(&section.image, DEFAULT_MIRROR).map_err(MachinesError::Image)?;
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
    Ok(MachineLaunch::new(section, image, note, debs))
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
