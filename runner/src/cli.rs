//! The command line: the verbs, what each one runs, and the argument
//! parsers they share.

use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::errors::ExpectedError;
use crate::{exit, janitor, known_issues, merge, pod_cmd, report_cmd, run};

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
    /// one report.html and one summary.
    #[command(after_help = exit::help(exit::MERGE))]
    Merge(merge::MergeArgs),
    /// Build junit.xml, the summary and report.html for a results folder (of
    /// a plain `cargo test` or `cargo nextest run`, or of a run), or one
    /// report.html for several merged.
    #[command(after_help = exit::help(exit::REPORT))]
    Report(report_cmd::ReportArgs),
    /// Check a suite's KNOWN-ISSUES.md against the ids its tests pin.
    #[command(after_help = exit::help(exit::CHECK_KNOWN_ISSUES))]
    CheckKnownIssues(known_issues::CheckArgs),
    /// Start, inspect and stop pods by hand.
    #[command(subcommand, after_help = exit::help(exit::POD))]
    Pod(pod_cmd::PodCommand),
    /// The dead-man's switch of a pod `run` started (internal).
    #[command(hide = true)]
    WatchPod(run::WatchArgs),
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
        Command::Run(args) => block_on(run::run(*args)),
        Command::Janitor(args) => block_on(janitor::run(args)),
        Command::Merge(args) => merge::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::CheckKnownIssues(args) => known_issues::run(args),
        Command::Pod(cmd) => pod_cmd::run(cmd),
        Command::WatchPod(args) => return run::watchdog(args),
    };
    if let Err(e) = &result {
        e.display_to_stderr();
    }
    crate::errors::exit_code(&result)
}

/// Runs an async verb on a runtime of its own. Only the verbs that need one
/// start it, so that the others cannot fail for want of one.
pub(crate) fn block_on(
    verb: impl std::future::Future<Output = Result<(), ExpectedError>>,
) -> Result<(), ExpectedError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ExpectedError::Incomplete(format!("failed to start the runtime: {e}")))?
        .block_on(verb)
}

/// A duration argument: `500ms`, `10s`, `30m`, `2h`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (expected e.g. 500ms, 10s, 30m, 2h)"))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration(" 10s ").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        let e = parse_duration("soon").unwrap_err();
        assert!(e.contains("\"soon\"") && e.contains("expected e.g."), "{e}");
    }
}
