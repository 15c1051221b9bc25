//! The command line: the verbs and what each one runs.

use clap::{Parser, Subcommand};

use testkit_engine::settings::Settings;

use crate::errors::ExpectedError;
use crate::exit;
use crate::verbs::block_on;
use crate::verbs::{check, janitor, known_issues, merge, new, pod, report, run};

#[derive(Debug, Parser)]
#[command(
    name = "testkit-runner",
    version,
    about = "Boots a pod, runs a suite, tears the pod down and verifies it.",
    after_help = exit::help(exit::RUN)
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a suite: boot the pod, check health and auth, run the tests,
    /// sweep for residue, tear the pod down; a verdict for each phase.
    #[command(after_help = exit::help(exit::RUN))]
    Run(Box<run::RunArgs>),
    /// Find and delete the leftovers of a run, or of runs older than an age.
    #[command(after_help = exit::help(exit::JANITOR))]
    Janitor(janitor::JanitorArgs),
    /// Merge the results of several shards or binaries into one junit.xml,
    /// one ctrf.json, one report.html and one summary.
    #[command(after_help = exit::help(exit::MERGE))]
    Merge(merge::MergeArgs),
    /// Build junit.xml, the summary and report.html for one run of a results
    /// folder (of a plain `cargo test` or `cargo nextest run`, or of a run;
    /// its latest, or `--run ID`), or one report.html for several merged.
    #[command(after_help = exit::help(exit::REPORT))]
    Report(report::ReportArgs),
    /// Create a suite workspace that runs green against the default pod
    /// at once, or against your service with --pod-command.
    #[command(after_help = exit::help(exit::NEW))]
    New(new::NewArgs),
    /// Check a suite without building or running it: testkit.toml, its
    /// resource kinds, KNOWN-ISSUES.md and the ids its tests pin.
    #[command(after_help = exit::help(exit::CHECK))]
    Check(check::CheckArgs),
    /// Check a suite's KNOWN-ISSUES.md against the ids its tests pin.
    #[command(after_help = exit::help(exit::CHECK_KNOWN_ISSUES))]
    CheckKnownIssues(known_issues::CheckArgs),
    /// Start, inspect and stop pods by hand.
    #[command(subcommand, after_help = exit::help(exit::POD))]
    Pod(pod::PodCommand),
    /// The dead-man's switch of a pod `run` started (internal).
    #[command(hide = true)]
    WatchPod(run::WatchArgs),
}

/// The settings of the runner's environment (the `TESTKIT_*` variables and
/// what else testkit reads: see [`testkit_engine::settings`]), read once,
/// here, for the verbs that use them, and handed down. A value that does
/// not parse is a usage error (exit 64) naming the variable, its value and
/// what to give, never a silent default. The verbs that only read files
/// (`report`, `merge`, `check`, `new`) and the watchdog, which must stop
/// its pod whatever the environment, do not read them.
fn settings() -> Result<Settings, ExpectedError> {
    Settings::from_env().map_err(ExpectedError::bad_args)
}

/// [`settings`], for a verb that may start the default pod (`run`, `pod
/// up`): `TESTKIT_SOURCES`, the runner's own, is checked with the rest,
/// so that a bad one is refused before anything starts, not when (or
/// whether) the default pod is looked for. The verbs that only list or
/// stop pods do not read it: a bad one must not keep a pod from stopping.
fn settings_to_start() -> Result<Settings, ExpectedError> {
    crate::checkout::Sources::from_env().map_err(ExpectedError::bad_args)?;
    settings()
}

/// Parses the arguments and runs the verb; the exit code of the process.
pub(crate) fn main_impl() -> u8 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` come this way too, and exit 0.
            let code = if e.use_stderr() {
                exit::BAD_ARGS
            } else {
                exit::OK
            };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Run(args) => settings_to_start().and_then(|s| block_on(run::run(*args, s))),
        Command::Janitor(args) => settings().and_then(|s| block_on(janitor::run(args, &s))),
        Command::Merge(args) => merge::run(args),
        Command::Report(args) => report::run(args),
        Command::New(args) => new::run(args),
        Command::Check(args) => check::run(args),
        Command::CheckKnownIssues(args) => known_issues::run(args),
        Command::Pod(cmd) => {
            let settings = match cmd {
                pod::PodCommand::Up(_) => settings_to_start(),
                _ => settings(),
            };
            settings.and_then(|s| pod::run(cmd, &s))
        }
        Command::WatchPod(args) => return run::watchdog(args),
    };
    if let Err(e) = &result {
        e.display_to_stderr();
    }
    crate::errors::exit_code(&result)
}
