//! `sandboxd`: the reference pod of testkit, a small sandbox gateway.
//!
//! Sandboxes are real directories under HOME; commands run in them as real
//! process groups; the API is JSON over HTTP on loopback, authenticated by a
//! token that opens a cookie session. `sandboxctl` is its command line client;
//! a small web UI at `/` signs in with the token and lists, creates and
//! deletes sandboxes and shows their files. Records (`/api/records`) are
//! named entries whose id the server assigns, looked up and deleted by id in
//! the path or in a JSON body: a resource kind with server ids for the
//! framework's own tests.
//!
//! ```text
//! $ sandboxd serve --home /tmp/pod --listen 127.0.0.1:0
//! {"name":"sandboxd-k3v9x0qa","base_url":"http://127.0.0.1:41234","port":41234,"token":"..."}
//! $ sandboxctl --handle handle.json sandbox create demo --label team=qa
//! $ sandboxctl --handle handle.json sandbox exec demo -- sh -c 'echo hi'
//! ```
//!
//! # Known limitations
//!
//! - Linux only (process groups are tracked through `/proc`; file paths are
//!   confined with `openat2`, Linux 5.6 or later).
//! - Without a writable cgroup v2 hierarchy (or with `--no-cgroup`), a
//!   process that left its group and whose parent exited within 50 ms of
//!   forking it is ended only at shutdown, not with its sandbox.
//! - Background processes are forgotten at restart (their groups are killed).
//! - Records are kept in memory: a restart forgets them.
//! - No isolation beyond the working directory and a clean environment:
//!   a sandbox is a test fixture, not a security boundary.
#![warn(missing_docs, unreachable_pub)]

pub mod api;
pub mod config;
pub mod ctl;
mod error;
mod gateway;
mod owner;
mod proc_table;
mod procs;
mod server;
mod state;

pub use owner::mount_cgroup2_privately;
pub use server::{serve, ServeError, FILE_BODY_LIMIT, JSON_BODY_LIMIT};
