//! `testkit-runner`: boots a pod, runs a suite, sweeps for residue, tears the
//! pod down and verifies it.

mod cli;
mod errors;
mod exit;
mod html;
mod janitor;
mod known_issues;
mod merge;
mod pod_cmd;
mod report_cmd;
mod run;
mod summary;
mod verb;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::main_impl())
}
