//! `testkit-runner janitor`: deletes the leftovers of one run (`--run ID`),
//! or of every run under a results root whose journals are older than an
//! age (`--older-than 1h`): first by exact name from the run's journals,
//! then by listing each resource kind by the run's prefix. A name that does
//! not carry the run id is never deleted, and a live run is never touched:
//! one whose runner still runs (as its results folder's
//! `runners/<ID>.json` says, or its claim on the run id: pid and start time, against `/proc`),
//! or whose journal a process that still runs wrote (a test holding a
//! resource for longer than `--older-than`, its reaper).
//!
//! With `--run`, it also asks the suite's witnesses what carries the run id
//! below the API. It cannot delete there: it names what they found, as
//! what each witness lists, and fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgGroup, Args};
use testkit_engine::config::SuiteConfig;
use testkit_engine::pod::{HandlePolicy, PodHandle};
use testkit_engine::resource::{
    check_witnesses, JanitorTarget, Kinds, PodHome, SweepReport, WitnessReport, WitnessSite,
};

use testkit_engine::settings::Settings;

use crate::errors::ExpectedError;
use crate::verbs::parse_age;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["run", "older_than"])))]
pub(crate) struct JanitorArgs {
    /// The suite whose `testkit.toml` declares the resource kinds.
    #[arg(long, default_value = ".")]
    suite: PathBuf,
    /// The pod's handle file (default: `TESTKIT_POD_HANDLE`, else
    /// `<results>/pod/handle.json`).
    #[arg(long, value_name = "FILE")]
    handle_json: Option<PathBuf>,
    /// Clean up this run; refused (exit 1) while it is live.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
    /// The run's results folder, whose journals name what it created, and
    /// whose `runners/<ID>.json` names its runner (default: `<results-root>/<ID>`,
    /// when it exists).
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
    /// Clean up every run under `--results-root` last journaled longer ago
    /// than this (e.g. `1h`, `30m`, `7d`; from `0s`, every run that is not
    /// live, to `365d`). A run that is live (its runner, or a process that
    /// wrote its journal, still runs) is skipped, saying so, however old its
    /// journal.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    older_than: Option<Duration>,
    /// The folder holding one results folder per run (default:
    /// `<target dir>/testkit/runs`); with `--run ID` and no `--results`, the
    /// run's is `<DIR>/<ID>`.
    #[arg(long, value_name = "DIR")]
    results_root: Option<PathBuf>,
    /// Only the Docker Engine: the run's containers, networks and volumes
    /// (`--run`), or those of every run of the engine whose newest one is
    /// older than `--older-than` and whose runner is gone, found by label;
    /// no pod handle needed.
    #[arg(long)]
    engine_only: bool,
    /// The pod's HOME on this machine, for the witnesses that look in it
    /// (`{home}`): a pod kept by `run --keep`, or one you started.
    #[arg(long, value_name = "DIR")]
    pod_home: Option<PathBuf>,
}

pub(crate) async fn run(args: JanitorArgs, settings: &Settings) -> Result<(), ExpectedError> {
    // Machines whose owner died unkept (their guard and watchdog gone with
    // it): ended, their overlays removed; a run's, or every run's.
    let machines_clean = crate::machines::janitor_print(args.run.as_deref()).await;
    let engine_clean = match (&args.run, args.older_than) {
        (Some(run), _) => {
            crate::containers::janitor_print(run, args.engine_only, true, settings).await
        }
        // Every run of the machine's engine: asked for by name only.
        (None, Some(age)) if args.engine_only => {
            crate::containers::janitor_older_print(age, settings).await
        }
        _ => true,
    };
    let engine_clean = engine_clean && machines_clean;
    if args.engine_only {
        return if engine_clean {
            Ok(())
        } else {
            Err(ExpectedError::ChecksReported)
        };
    }
    let config = SuiteConfig::load(&args.suite)
        .map_err(|e| ExpectedError::bad_args(format_args!("janitor: {e}")))?;
    let kinds = Kinds::from_config(
        &config,
        &args.suite.join(testkit_engine::config::CONFIG_FILE),
    )
    .map_err(|e| ExpectedError::bad_args(format_args!("janitor: {e}")))?;
    let handle = read_handle(
        &handle_path(&args, settings)?,
        &config,
        args.handle_json.is_none().then_some(settings),
    )?;
    let target = target(&args, settings);
    let session_dir = args
        .run
        .as_deref()
        .map(|run| testkit_engine::run::secrets_dir(settings, run));
    let pod = testkit_engine::pod::connect(handle, &config, session_dir.as_deref())
        .await
        .map_err(|e| ExpectedError::Incomplete(format!("janitor: {e}")))?;
    let pod = match &args.run {
        Some(run) => pod.for_run(run),
        None => pod,
    };
    let report = testkit_engine::resource::janitor_with(
        &pod,
        &kinds,
        &config.suite.name_prefix,
        &target,
        Some(settings),
    )
    .await;
    print_report(&report);
    // Asked for one run by name, the janitor did not do it: not a success.
    let refused_run = args.run.is_some() && !report.skipped_live.is_empty();
    let below_clean = match &args.run {
        Some(run) if !refused_run => witnesses(&args, &config, &kinds, &pod, run).await,
        None if !config.witnesses.is_empty() => {
            println!("witnesses: not asked: each looks for one run's names (use --run ID)");
            true
        }
        _ => true,
    };
    if report.is_clean() && !refused_run && engine_clean && below_clean {
        Ok(())
    } else {
        Err(ExpectedError::ChecksReported)
    }
}

/// Asks the suite's witnesses what of the run `run` is left below the API,
/// and prints it: whether they all looked and found nothing.
async fn witnesses(
    args: &JanitorArgs,
    config: &SuiteConfig,
    kinds: &Kinds,
    pod: &testkit_engine::pod::Pod,
    run: &str,
) -> bool {
    if config.witnesses.is_empty() {
        return true;
    }
    let home = match &args.pod_home {
        Some(dir) => PodHome::Here(dir),
        None => PodHome::Unknown(
            "the janitor does not know the pod's HOME: pass --pod-home DIR".to_owned(),
        ),
    };
    let site = WitnessSite::new(pod, &config.suite.name_prefix, run)
        .home(home)
        .public_fields(&config.pod.public_fields)
        .namings_of(kinds)
        .dir(&args.suite);
    let reports = check_witnesses(&config.witnesses, &site).await;
    print_witnesses(&reports);
    reports
        .iter()
        .all(|r| !r.failed() && r.residue().is_empty())
}

fn print_witnesses(reports: &[WitnessReport]) {
    for report in reports {
        for name in report.residue() {
            println!(
                "LEFT BELOW THE API {}: {name}: the janitor cannot delete {}; remove it by hand, and mend what forgot it",
                report.label(),
                report.what
            );
        }
        println!("witness: {}", report.summary());
    }
}

/// Which pod: `--handle-json`, else `TESTKIT_POD_HANDLE`, else the handle a
/// run still going keeps in its secrets dir (found by `--run`).
fn handle_path(args: &JanitorArgs, settings: &Settings) -> Result<PathBuf, ExpectedError> {
    args.handle_json
        .clone()
        .or_else(|| settings.pod_handle.clone())
        .or_else(|| {
            args.run
                .as_deref()
                .map(|run| testkit_engine::run::secrets_dir(settings, run).join("handle.json"))
                .filter(|h| h.is_file())
        })
        .ok_or_else(|| ExpectedError::bad_args("janitor: which pod? pass --handle-json FILE (or set TESTKIT_POD_HANDLE; a run still going keeps its handle in its secrets dir, found by --run)"))
}

/// Reads the handle at `path`; `from_env`, the settings when it was not
/// given with `--handle-json`: the error names `TESTKIT_POD_HANDLE` if that
/// is where it came from.
fn read_handle(
    path: &Path,
    config: &SuiteConfig,
    from_env: Option<&Settings>,
) -> Result<PodHandle, ExpectedError> {
    let var = testkit_engine::pod::HANDLE_ENV;
    let named = from_env.is_some_and(|s| s.pod_handle.as_deref() == Some(path));
    let text = std::fs::read_to_string(path).map_err(|e| {
        if named {
            ExpectedError::bad_args(format_args!(
                "janitor: {var}={:?} is invalid: {e}; give a pod handle file, or pass \
                 --handle-json FILE",
                path.as_os_str()
            ))
        } else {
            ExpectedError::bad_args(format_args!(
                "janitor: cannot read the handle {}: {e}",
                path.display()
            ))
        }
    })?;
    PodHandle::parse(&text, &HandlePolicy::from_suite(config))
        .map_err(|e| ExpectedError::bad_args(format_args!("janitor: {}: {e}", path.display())))
}

/// One run by name, or every run older than the age.
fn target(args: &JanitorArgs, settings: &Settings) -> JanitorTarget {
    match (&args.run, args.older_than) {
        (Some(run), _) => JanitorTarget::Run {
            run_id: run.clone(),
            // Else the run's folder under the results root, when there is
            // one: its journals, and the runner that says the run is live.
            results_dir: args.results.clone().or_else(|| {
                let dir = args
                    .results_root
                    .clone()
                    .unwrap_or_else(|| crate::verbs::run::default_results_root(settings))
                    .join(run);
                dir.is_dir().then_some(dir)
            }),
        },
        (None, Some(age)) => JanitorTarget::OlderThan {
            results_root: args
                .results_root
                .clone()
                .unwrap_or_else(|| crate::verbs::run::default_results_root(settings)),
            age,
        },
        (None, None) => unreachable!("clap requires one of them"),
    }
}

fn print_report(report: &SweepReport) {
    for (run, why) in &report.skipped_live {
        println!(
            "skipped run {run}: it is live ({why}); the janitor leaves a live run alone: run it again once that run has ended"
        );
    }
    for item in &report.deleted {
        println!("deleted {} `{}` (verified gone)", item.kind, item.name);
    }
    for (item, why) in &report.leaked {
        println!("LEAKED {} `{}`: {why}", item.kind, item.name);
    }
    for item in &report.refused {
        println!(
            "left alone {} `{}`: it does not carry the run id",
            item.kind, item.name
        );
    }
    for e in &report.errors {
        println!("error: {e}");
    }
    println!(
        "janitor: {} found, {} deleted, {} could not be deleted, {} left alone, {} live runs skipped",
        report.found.len(),
        report.deleted.len(),
        report.leaked.len(),
        report.refused.len(),
        report.skipped_live.len()
    );
}
