//! `testkit-runner`: boots a pod, runs a suite, sweeps for residue, tears the
//! pod down and verifies it.
//!
//! The binary is [`main_impl`]; the library exists so that testkit's own
//! tests build JUnit from records the way the runner does ([`junit`], of
//! the run [`runs`] chooses). It makes no stability promise.
#![warn(unreachable_pub)]

mod args;
mod checkout;
mod containers;
mod ctrf;
mod errors;
mod exit;
mod html;
pub mod junit;
mod killed;
#[cfg(test)]
mod layers;
mod machines;
mod rerun;
pub mod runs;
pub mod seal;
mod summary;
mod timeline;
mod verbs;
mod verdict;

/// Parses the command line, runs the verb, and returns the exit code.
pub fn main_impl() -> u8 {
    args::main_impl()
}
