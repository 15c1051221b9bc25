//! The engine under `testkit` and `testkit-runner`.
//!
//! This crate is for testkit and testkit-runner only. It makes no stability
//! promise: any release may change anything in it, and testkit depends on it
//! pinned exactly (`=0.1.0`), released with it under one version. A suite
//! depends on `testkit`, whose facade re-exports what a spec author needs (the
//! pod, the kind-plugin API, waits, templates).
//!
//! Everything here takes its inputs as arguments: no setting is read, no
//! config loaded and no pod connected behind the caller's back. A test
//! process's globals live in `testkit`'s wiring module; the runner holds its
//! own and passes them down.
//!
//! # Layers
//!
//! Imports point down only, and no file's imports lead back to it; a test
//! (`src/layers.rs`) keeps it so.
//!
//! 1. Facts that know nothing of tests: [`settings`] (every `TESTKIT_*`
//!    variable, parsed from a lookup), [`duration`] (the bounds of every
//!    duration a user sets), [`run`] (run ids, the results
//!    folder), [`config`] (`testkit.toml`), [`mod@redact`], [`process`] (process
//!    groups), [`files`] (files that hold secrets), [`json`] (JSON files read
//!    back), [`template`], [`wait`],
//!    [`history`] (operations a test's clients performed, and their checkers),
//!    [`machine`] (QEMU machines and their images),
//!    [`containers`] (the container engine and the packet filter of its
//!    host: the one module that calls them).
//! 2. [`report`] (records, summaries, known issues); [`pod`] (handle,
//!    session, launch); [`resource`] (kinds, journal, delete, sweep).
#![warn(missing_docs, unreachable_pub)]

pub mod browser;
pub mod config;
pub mod containers;
pub mod duration;
pub mod errors;
pub mod files;
pub mod history;
mod ids;
pub mod install;
pub mod json;
pub mod machine;
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

pub use errors::error_chain;
pub use redact::{redact, register_secret, REDACTED};
