//! `testkit-runner`: boots a pod, runs a suite, sweeps for residue, tears the
//! pod down and verifies it.
//!
//! The binary is [`main_impl`]; the library exists so that testkit's own
//! tests build JUnit from records the way the runner does ([`junit`], of
//! the run [`runs`] chooses). It makes no stability promise.
#![warn(unreachable_pub)]

mod cli;
mod errors;
mod exit;
mod html;
mod janitor;
pub mod junit;
mod killed;
mod known_issues;
mod merge;
mod pod_cmd;
mod report_cmd;
mod run;
pub mod runs;
mod summary;
mod verb;

/// Parses the command line, runs the verb, and returns the exit code.
pub fn main_impl() -> u8 {
    cli::main_impl()
}
