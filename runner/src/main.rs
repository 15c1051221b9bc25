//! `testkit-runner`: boots a pod, runs a suite, sweeps for residue, tears the
//! pod down and verifies it.

mod exit;
mod janitor;
mod known_issues;
mod merge;
mod pod_cmd;
mod run;
mod summary;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "testkit-runner",
    version,
    about = "Boots a pod, runs a suite, tears the pod down and verifies it.",
    after_help = exit::HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a suite: boot the pod, check health and auth, run the tests,
    /// sweep for residue, tear the pod down; a verdict for each phase.
    #[command(after_help = exit::HELP)]
    Run(Box<run::RunArgs>),
    /// Find and delete the leftovers of a run, or of runs older than an age.
    #[command(after_help = exit::HELP)]
    Janitor(janitor::JanitorArgs),
    /// Merge the results of several shards or binaries into one junit.xml.
    #[command(after_help = exit::HELP)]
    Merge(merge::MergeArgs),
    /// Check a suite's KNOWN-ISSUES.md against the ids its tests pin.
    #[command(after_help = exit::HELP)]
    CheckKnownIssues(known_issues::CheckArgs),
    /// Start, inspect and stop pods by hand.
    #[command(subcommand)]
    Pod(pod_cmd::PodCommand),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::BAD_ARGS
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("testkit-runner: failed to start the runtime: {e}");
            return ExitCode::from(exit::INCOMPLETE);
        }
    };
    let code = match cli.command {
        Command::Run(args) => rt.block_on(run::run(*args)),
        Command::Janitor(args) => rt.block_on(janitor::run(args)),
        Command::Merge(args) => merge::run(args),
        Command::CheckKnownIssues(args) => known_issues::run(args),
        Command::Pod(cmd) => rt.block_on(pod_cmd::run(cmd)),
    };
    ExitCode::from(code)
}
