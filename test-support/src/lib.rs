//! Starts the reference pod `sandboxd` for the tests of this workspace, the
//! same way from every crate, and stops it whatever the test did.
//!
//! ```
//! let mut pod = test_support::Sandboxd::start(&["--fault", "delete-fail=1"]);
//! assert!(pod.base_url().starts_with("http://127.0.0.1:"));
//! assert!(std::fs::read_to_string(pod.handle_file()).unwrap().contains(pod.name()));
//! let home = pod.home().to_owned();
//! assert!(pod.stop().success());
//! # let _ = home;
//! ```
//!
//! - [`sandboxd_bin`] builds `sandboxd` and `sandboxctl` with cargo once per
//!   process (a no-op when fresh), into the target dir the running test was
//!   built in, so every crate's tests, whatever their working directory and
//!   however `CARGO_TARGET_DIR` is set, run the binaries of this checkout.
//! - [`Sandboxd::start`] runs it in a temporary home, [`Sandboxd::start_in`]
//!   on a home the caller keeps across restarts; both take extra `serve`
//!   arguments (faults, `--token-window`, ...), and
//!   [`Sandboxd::start_in_env`] extra environment variables. A start waits, within
//!   bounds, for the handle and then for `GET /api/health`; a failure panics
//!   with what happened and the tail of the server's log.
//! - [`sandboxd_deb`] packages those binaries as `sandboxd_<version>_amd64.deb`
//!   (`sandboxd/packaging/deb/build-deb.sh`), for the machine pod.
//! - Dropping (or [`Sandboxd::stop`]) sends SIGTERM to its process group,
//!   SIGKILL after a grace period, reaps it and checks the group is gone.
//!
//! # Known limitations
//!
//! - cargo must be available (the first use builds), so tests built into a
//!   nextest archive and run elsewhere cannot start a pod.
//! - Two checkouts that share one target dir share `debug/sandboxd`: a build
//!   of the other checkout replaces it for the next start.

#![warn(missing_docs, unreachable_pub)]

mod binary;
mod deb;
pub mod http;
pub mod layers;
mod python;
mod server;

pub use binary::{sandboxctl_bin, sandboxd_bin, target_dir};
pub use deb::sandboxd_deb;
pub use python::python_with;
pub use server::{Frozen, Sandboxd};
