//! The engine under `testkit` and `testkit-runner`.
//!
//! This crate is for testkit and testkit-runner only. It makes no stability
//! promise: a suite depends on `testkit`, whose facade re-exports what a spec
//! author needs (the pod, the kind-plugin API, waits, templates).
//!
//! Everything here takes its inputs as arguments: no setting is read, no
//! config loaded and no pod connected behind the caller's back. A test
//! process's globals live in `testkit`'s wiring module; the runner holds its
//! own and passes them down.
//!
//! # Layers
//!
//! Imports point down only; a test (`src/layers.rs` of `testkit`) keeps it
//! so.
//!
//! 1. Facts that know nothing of tests: [`settings`] (every `TESTKIT_*`
//!    variable, parsed from a lookup), [`duration`] (the bounds of every
//!    duration a user sets), [`run`] (run ids, the results
//!    folder), [`config`] (`testkit.toml`), [`mod@redact`], [`process`] (process
//!    groups), [`files`] (files that hold secrets), [`template`], [`wait`].
//! 2. [`report`] (records, summaries, known issues); [`pod`] (handle,
//!    session, launch); [`resource`] (kinds, journal, delete, sweep).
#![warn(missing_docs, unreachable_pub)]

pub mod config;
pub mod duration;
mod errors;
pub mod files;
mod ids;
pub mod install;
pub mod pod;
pub mod process;
pub mod redact;
pub mod report;
pub mod resource;
pub mod run;
pub mod settings;
pub mod template;
pub mod trace;
pub mod wait;

#[cfg(test)]
mod layers;

pub use redact::{redact, register_secret, REDACTED};
