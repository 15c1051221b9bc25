//! What a run will do, decided from its arguments and its settings (read
//! and validated once, before the verb) before anything starts: every
//! other usage error (exit 64) is found here, so a run that gets past this
//! point has a suite, a config, a run id it holds alone and a results
//! folder.

use std::path::{Path, PathBuf};

use testkit_engine::config::SuiteConfig;
use testkit_engine::pod::{HandlePolicy, PodHandle};
use testkit_engine::resource::Kinds;
use testkit_engine::settings::Settings;

use super::suite::Engine;
use super::RunArgs;
use crate::errors::ExpectedError;

/// What `testkit-runner run` will do.
pub(super) enum Planned {
    /// Run.
    Run(Box<Plan>),
    /// Nothing: a rerun found nothing to rerun; what to say.
    NothingToRerun(String),
}

/// A validated `testkit-runner run`.
pub(super) struct Plan {
    pub(super) suite_dir: PathBuf,
    pub(super) config: SuiteConfig,
    pub(super) kinds: Kinds,
    pub(super) engine: Engine,
    pub(super) archive: Option<PathBuf>,
    pub(super) filters: Vec<String>,
    /// In nextest's form (`count:k/n`, `hash:k/n`).
    pub(super) partition: Option<String>,
    /// The caller's pod and the file its handle came from.
    pub(super) caller_handle: Option<(PodHandle, PathBuf)>,
    pub(super) keep: bool,
    /// A machine pod's environment and installer (`None` for other pods).
    pub(super) machine: Option<crate::machines::MachineChoice>,
    /// A process, a container or a machine pod.
    pub(super) pod_mode: crate::containers::PodMode,
    pub(super) run_id: String,
    /// Created and canonical.
    pub(super) results_dir: PathBuf,
    pub(super) show_output: bool,
    pub(super) extra: Vec<String>,
    /// The run id, held for as long as the run goes on: no other runner
    /// can run with it meanwhile.
    pub(super) claim: testkit_engine::run::RunClaim,
    /// The runner's settings, read once in `main` and validated.
    pub(super) settings: Settings,
    /// What a rerun (`--last-failed`, `--from`) reruns, its run id this
    /// run's.
    pub(super) rerun: Option<crate::rerun::Rerun>,
}

impl Plan {
    pub(super) fn from_args(args: RunArgs, settings: Settings) -> Result<Planned, ExpectedError> {
        let suite_dir = suite_dir(&args.suite)?;
        check_environment(&settings)?;
        let config = SuiteConfig::load(&suite_dir).map_err(ExpectedError::bad_args)?;
        let kinds = Kinds::from_config(
            &config,
            &suite_dir.join(testkit_engine::config::CONFIG_FILE),
        )
        .map_err(ExpectedError::bad_args)?;
        let partition = engine_selection(&args)?;
        if args.runner == Engine::Nextest {
            nextest(settings.install)?;
        }
        let archive = archive(args.archive_file.as_deref())?;
        let caller_handle = match &args.handle_json {
            Some(path) => Some(read_handle(path, &HandlePolicy::from_suite(&config))?),
            None => None,
        };
        let pod_mode = crate::containers::check_mode(args.pod, &config)
            .map_err(|e| ExpectedError::BadArgs(e.to_string()))?;
        let machine = crate::machines::choose(
            pod_mode,
            &config,
            args.environment.as_deref(),
            args.installer,
        )
        .map_err(|e| ExpectedError::BadArgs(e.to_string()))?;
        if args.keep && caller_handle.is_some() {
            return Err(ExpectedError::bad_args(
                "--keep applies to a pod the runner starts, not to --handle-json",
            ));
        }
        // After every other argument is checked, before the run id is
        // claimed and its folder made: nothing to rerun leaves nothing
        // behind.
        let (rerun, filters) = match rerun_selection(&args, &suite_dir, &settings)? {
            Rerunning::No => (None, args.filters.clone()),
            Rerunning::Nothing(why) => return Ok(Planned::NothingToRerun(why)),
            Rerunning::Yes { rerun, filter } => {
                (Some(rerun), with_rerun_filter(&args.filters, filter))
            }
        };
        let run_id = run_id(args.run_id)?;
        let results_dir = results_dir(args.results, &run_id, &settings)?;
        check_handed_on(
            &settings,
            &suite_dir,
            &results_dir,
            args.handle_json.as_deref(),
        )?;
        // Last, so that no other mistake leaves a claim behind; before the
        // run writes anything, so that a run id in use has nothing of the
        // live run's overwritten (its results folder may be this one).
        let claim = claim_run_id(&settings, &run_id, &results_dir)?;
        // Two live runs in one folder would write each other's
        // verdict.jsonl, JUnit and page: the later one is refused.
        if let Some(other) = live_run_in(&results_dir, &run_id) {
            return Err(ExpectedError::bad_args(format_args!(
                "the results folder {} is in use by run {} (testkit-runner pid {}, still \
                 running): give this run a folder of its own with --results DIR, or wait",
                results_dir.display(),
                other.run_id,
                other.pid
            )));
        }
        // What tells a janitor in any environment that this run is live:
        // the claim's folder depends on the caller's XDG_RUNTIME_DIR.
        testkit_engine::run::record_runner(&results_dir, &run_id).map_err(|e| {
            ExpectedError::bad_args(format_args!(
                "cannot write {}: {e}; give a folder you can write with --results DIR",
                testkit_engine::run::runner_file(&results_dir, &run_id).display()
            ))
        })?;
        let rerun = rerun.map(|rerun| crate::rerun::Rerun {
            run_id: run_id.clone(),
            ..rerun
        });
        Ok(Planned::Run(Box::new(Plan {
            suite_dir,
            config,
            kinds,
            engine: args.runner,
            archive,
            filters,
            partition,
            caller_handle,
            keep: args.keep,
            pod_mode,
            machine,
            run_id,
            results_dir,
            show_output: args.show_output,
            extra: args.extra,
            claim,
            settings,
            rerun,
        })))
    }
}

/// Whether a run reruns the failures of another, and which.
enum Rerunning {
    No,
    Nothing(String),
    Yes {
        rerun: crate::rerun::Rerun,
        /// The filter expression that selects them; none to rerun every
        /// test.
        filter: Option<String>,
    },
}

/// `--last-failed` or `--from DIR`: the tests to rerun. They need
/// nextest, whose filter expressions select them.
fn rerun_selection(
    args: &RunArgs,
    suite_dir: &Path,
    settings: &Settings,
) -> Result<Rerunning, ExpectedError> {
    use super::select::{select, Origin, Selected};
    let root = default_results_root(settings);
    let from = match (&args.from, args.last_failed) {
        (Some(dir), _) => Origin::Folder(dir),
        (None, true) => Origin::LastOf {
            suite_dir,
            root: &root,
        },
        (None, false) => return Ok(Rerunning::No),
    };
    if args.runner == Engine::CargoTest {
        return Err(ExpectedError::bad_args(
            "--last-failed and --from need nextest, whose filter expressions select the tests \
             to rerun: drop `--runner cargo-test`",
        ));
    }
    Ok(match select(from)? {
        Selected::Nothing(why) => Rerunning::Nothing(why),
        Selected::Every { rerun } => Rerunning::Yes {
            rerun,
            filter: None,
        },
        Selected::Tests { rerun, filter } => Rerunning::Yes {
            rerun,
            filter: Some(filter),
        },
    })
}

/// The run's filter expressions with a rerun's: the tests to rerun among
/// those the given expressions select (nextest takes the union of several
/// `-E`, so they become one).
fn with_rerun_filter(given: &[String], rerun: Option<String>) -> Vec<String> {
    match (given, rerun) {
        (_, None) => given.to_vec(),
        ([], Some(rerun)) => vec![rerun],
        (given, Some(rerun)) => {
            let given: Vec<String> = given.iter().map(|g| format!("({g})")).collect();
            vec![format!("({}) & ({rerun})", given.join(" | "))]
        }
    }
}

/// The suite's folder, canonical: a directory holding a Cargo workspace.
fn suite_dir(suite: &Path) -> Result<PathBuf, ExpectedError> {
    let suite_dir = match suite.canonicalize() {
        Ok(d) if d.is_dir() => d,
        Ok(d) => {
            return Err(ExpectedError::bad_args(format_args!(
                "the suite {} is not a directory",
                d.display()
            )))
        }
        Err(e) => {
            return Err(ExpectedError::bad_args(format_args!(
                "cannot use the suite dir {}: {e}",
                suite.display()
            )))
        }
    };
    if !suite_dir.join("Cargo.toml").is_file() {
        return Err(ExpectedError::bad_args(format_args!(
            "{} has no Cargo.toml: a suite is a Cargo workspace",
            suite_dir.display()
        )));
    }
    Ok(suite_dir)
}

/// What the settings (validated when `main` read them) cannot say alone:
/// the roles testkit gives a binary are never set by hand (and never handed
/// on: see build.rs), and the pods folder is one the runner can write in.
fn check_environment(settings: &Settings) -> Result<(), ExpectedError> {
    if let Some((role, value)) = settings.roles.first() {
        return Err(ExpectedError::bad_args(format_args!(
            "{role}={value:?} is invalid here: testkit sets it on a test binary it starts as \
             a reaper or a sweeper, never on the runner; unset it"
        )));
    }
    crate::verbs::pod::check_pods_dir(settings)
}

/// `cargo-nextest`, the default engine, installed from crates.io where it
/// is missing (unless `TESTKIT_INSTALL=never`: then the error names the
/// install command and `--runner cargo-test`; the runner never falls back
/// to `cargo test` by itself, whose results say less). Before the pod
/// starts, so that a missing engine costs no pod.
fn nextest(install: testkit_engine::settings::Install) -> Result<(), ExpectedError> {
    use testkit_engine::install::{ensure_installed, find_nextest, What};
    ensure_installed(What::Nextest, install, find_nextest)
        .map(drop)
        .map_err(|e| ExpectedError::Incomplete(testkit_engine::error_chain(&e)))
}

/// `--partition` in nextest's form, refusing what needs nextest under
/// `--runner cargo-test`.
fn engine_selection(args: &RunArgs) -> Result<Option<String>, ExpectedError> {
    let partition = args.partition.as_deref().map(parse_partition).transpose()?;
    if partition.is_some() && args.runner == Engine::CargoTest {
        return Err(ExpectedError::bad_args(
            "--partition needs nextest: drop `--runner cargo-test`",
        ));
    }
    if args.runner == Engine::CargoTest && !args.filters.is_empty() {
        return Err(ExpectedError::bad_args("filter expressions (-E) need nextest: drop `--runner cargo-test`, or pass name filters after `--`"));
    }
    Ok(partition)
}

/// `--archive-file`, canonical, when it is a file.
fn archive(archive_file: Option<&Path>) -> Result<Option<PathBuf>, ExpectedError> {
    let Some(a) = archive_file else {
        return Ok(None);
    };
    match a.canonicalize() {
        Ok(a) if a.is_file() => Ok(Some(a)),
        _ => Err(ExpectedError::bad_args(format_args!(
            "--archive-file {}: no such file",
            a.display()
        ))),
    }
}

/// `--run-id`, validated, else a fresh one.
fn run_id(given: Option<String>) -> Result<String, ExpectedError> {
    match given {
        Some(id) => match testkit_engine::run::validate_run_id(&id) {
            Ok(()) => Ok(id),
            Err(why) => Err(ExpectedError::bad_args(format_args!(
                "--run-id {id:?}: {why}"
            ))),
        },
        None => Ok(testkit_engine::run::generate_run_id()),
    }
}

/// `--results` (else the run's folder under the default root), created,
/// proven writable, canonical: a folder the run cannot write in is an
/// error now, not outputs lost at the end.
fn results_dir(
    given: Option<PathBuf>,
    run_id: &str,
    settings: &Settings,
) -> Result<PathBuf, ExpectedError> {
    let results_dir = given.unwrap_or_else(|| default_results_root(settings).join(run_id));
    if let Err(e) = crate::verbs::writable_dir(&results_dir) {
        return Err(ExpectedError::bad_args(format_args!(
            "cannot write in the results folder {}: {e}; give a folder you can write with \
             --results DIR",
            results_dir.display()
        )));
    }
    Ok(results_dir.canonicalize().unwrap_or(results_dir))
}

/// The suite, the results folder and the pod's handle are the run's own,
/// handed to its tests as `TESTKIT_SUITE_DIR`, `TESTKIT_RESULTS_DIR` and
/// `TESTKIT_POD_HANDLE`: one of these in the runner's environment that
/// names something else would be silently overridden (the tests run
/// against another pod, the results go to another folder), so it is
/// refused, naming what the run uses and how to say it.
fn check_handed_on(
    settings: &Settings,
    suite_dir: &Path,
    results_dir: &Path,
    handle_json: Option<&Path>,
) -> Result<(), ExpectedError> {
    use testkit_engine::settings::var;
    let handle = handle_json.map(|h| h.canonicalize().unwrap_or_else(|_| h.to_owned()));
    let checks = [
        (
            var::SUITE_DIR,
            &settings.suite_dir,
            Some(suite_dir.to_owned()),
            "the suite the run is given (`testkit-runner run SUITE_DIR`)",
        ),
        (
            var::RESULTS_DIR,
            &settings.results_dir,
            Some(results_dir.to_owned()),
            "the run's results folder (`--results DIR`)",
        ),
        (
            var::POD_HANDLE,
            &settings.pod_handle,
            handle,
            "the handle of the pod the run starts, or of the caller's pod \
             (`--handle-json FILE`)",
        ),
    ];
    for (name, given, used, accepts) in checks {
        let Some(given) = given else {
            continue;
        };
        let value = given.as_os_str();
        let found = given.canonicalize();
        if found.as_ref().ok() == used.as_ref() {
            continue;
        }
        let what = match (&found, &used) {
            (Err(e), _) => format!("{}: {e}", given.display()),
            (Ok(_), Some(used)) => format!("the run uses {}", used.display()),
            (Ok(_), None) => "the run starts a pod of its own".to_owned(),
        };
        return Err(ExpectedError::bad_args(format_args!(
            "{name}={value:?} is invalid here ({what}): testkit-runner run hands its tests \
             {accepts} as {name}; give it that way, or unset {name}"
        )));
    }
    Ok(())
}

/// Claims `run_id` for this runner. Two runs of one id would share its
/// secrets dir (the pod handle the tests read, their session) and its
/// resource names, and the first to end would delete the other's handle: a
/// run id a live runner holds is refused. Test processes under plain
/// nextest share a run id without claiming it: only runners are exclusive.
fn claim_run_id(
    settings: &Settings,
    run_id: &str,
    results_dir: &Path,
) -> Result<testkit_engine::run::RunClaim, ExpectedError> {
    use testkit_engine::run::ClaimError;
    match testkit_engine::run::claim_run(settings, run_id, results_dir) {
        Ok(claim) => Ok(claim),
        Err(ClaimError::InUse { holder, dir }) => {
            let results = holder
                .results_dir
                .as_deref()
                .map(|d| format!(", results {}", d.display()))
                .unwrap_or_default();
            Err(ExpectedError::bad_args(format_args!(
                "--run-id {run_id} is in use: testkit-runner pid {}{results} is running with it, and two runs of one id would share its secrets dir {} and its resource names; pick another run id (or drop --run-id for a fresh one), or wait for that run to end",
                holder.pid,
                dir.display()
            )))
        }
        Err(ClaimError::Io { dir, error }) => {
            let set = settings
                .secrets_dir
                .as_ref()
                .map(|d| {
                    format!(
                        " ({}={:?}: give a folder of your own, made with mode 0700 if \
                         missing, or unset it)",
                        testkit_engine::settings::var::SECRETS_DIR,
                        d.as_os_str()
                    )
                })
                .unwrap_or_default();
            Err(ExpectedError::bad_args(format_args!(
                "cannot claim run id {run_id} in its private folder {}: {error}{set}",
                dir.display()
            )))
        }
    }
}

/// Reads and validates a caller's handle file. The error names the file and
/// the field at fault, never the token.
fn read_handle(path: &Path, policy: &HandlePolicy) -> Result<(PodHandle, PathBuf), ExpectedError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ExpectedError::bad_args(format_args!(
            "--handle-json {}: cannot read it: {e}",
            path.display()
        ))
    })?;
    let handle = PodHandle::parse(&text, policy).map_err(|e| {
        ExpectedError::bad_args(format_args!("--handle-json {}: {e}", path.display()))
    })?;
    handle.register_secrets();
    Ok((handle, path.to_owned()))
}

/// `k/n` → nextest's `count:k/n`; `count:`/`hash:` forms pass as given.
fn parse_partition(p: &str) -> Result<String, ExpectedError> {
    let (scheme, rest) = match p.split_once(':') {
        Some((s @ ("count" | "hash"), rest)) => (s, rest),
        Some(_) => {
            return Err(ExpectedError::bad_args(format_args!(
                "--partition {p:?}: expected `k/n`, `count:k/n` or `hash:k/n`"
            )))
        }
        None => ("count", p),
    };
    let ok = rest
        .split_once('/')
        .and_then(|(k, n)| Some((k.parse::<u32>().ok()?, n.parse::<u32>().ok()?)));
    match ok {
        Some((k, n)) if k >= 1 && k <= n => Ok(format!("{scheme}:{k}/{n}")),
        _ => Err(ExpectedError::bad_args(format_args!(
            "--partition {p:?}: expected `k/n` with 1 <= k <= n, e.g. 1/2"
        ))),
    }
}

/// `<target dir>/testkit/runs`: `CARGO_TARGET_DIR`, else the target dir this
/// binary was built in, else the temp dir; the same rules as the library's.
pub(crate) fn default_results_root(settings: &Settings) -> PathBuf {
    testkit_engine::run::default_results_root(settings.target_dir.as_deref()).join("runs")
}

/// The target dir, as the library finds it.
pub(crate) fn target_dir(settings: &Settings) -> Option<PathBuf> {
    testkit_engine::run::target_dir_of(settings.target_dir.as_deref())
}

/// A live runner of another run than `run_id` that the results folder's
/// runner files name.
fn live_run_in(results_dir: &Path, run_id: &str) -> Option<testkit_engine::run::Claimant> {
    let dir = results_dir.join(testkit_engine::run::RUNNERS_DIR);
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_owned)
        })
        .filter(|id| id != run_id)
        .filter_map(|id| testkit_engine::run::runner_of(results_dir, &id))
        .find(|c| c.is_live())
}

#[cfg(test)]
mod unit {
    use super::*;

    /// Set in the copy of this test that [`without_nextest_the_opt_out_names_the_command`]
    /// starts: that copy looks for nextest where there is none, and prints
    /// what it found for the test to check. One test plays both parts, so
    /// no test passes without checking anything.
    const CHILD: &str = "TESTKIT_TEST_NEXTEST_CHILD";

    #[test]
    fn without_nextest_the_opt_out_names_the_command() {
        if std::env::var_os(CHILD).is_some() {
            let settings = Settings::from_env().unwrap();
            match nextest(settings.install) {
                Ok(()) => println!("found"),
                Err(e) => println!("error: {e:?}"),
            }
            return;
        }
        let empty = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "verbs::run::plan::unit::without_nextest_the_opt_out_names_the_command",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("TESTKIT_INSTALL", "never")
            .env("CARGO_HOME", empty.path())
            .env("PATH", empty.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains("error: Incomplete(\"cargo-nextest not found"),
            "{stdout}"
        );
        assert!(
            stdout.contains("cargo install --locked cargo-nextest"),
            "{stdout}"
        );
        assert!(
            stdout.contains("not installed: TESTKIT_INSTALL=never"),
            "{stdout}"
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains("installing"));
    }

    #[test]
    fn a_rerun_selects_its_tests_among_those_the_runs_own_filters_select() {
        let rerun = Some("(binary(=a) & test(=a::x))".to_owned());
        assert_eq!(with_rerun_filter(&[], None), Vec::<String>::new());
        assert_eq!(
            with_rerun_filter(&[], rerun.clone()),
            ["(binary(=a) & test(=a::x))"]
        );
        assert_eq!(
            with_rerun_filter(&["binary(a)".into(), "test(y)".into()], rerun),
            ["((binary(a)) | (test(y))) & ((binary(=a) & test(=a::x)))"]
        );
    }

    #[test]
    fn partitions() {
        assert_eq!(parse_partition("1/2").unwrap(), "count:1/2");
        assert_eq!(parse_partition("hash:2/3").unwrap(), "hash:2/3");
        assert!(parse_partition("0/2").is_err());
        assert!(parse_partition("3/2").is_err());
        assert!(parse_partition("x:1/2").is_err());
        assert!(parse_partition("1").is_err());
    }

    #[test]
    fn run_ids() {
        let id = testkit_engine::run::generate_run_id();
        assert_eq!(id.len(), 10);
        assert!(testkit_engine::run::validate_run_id(&id).is_ok());
        assert!(id.as_bytes()[0].is_ascii_lowercase());
        assert!(testkit_engine::run::validate_run_id("Abc").is_err());
    }
}
