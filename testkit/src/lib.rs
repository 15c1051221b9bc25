//! testkit: end-to-end test suites that drive a live service as a black box.
//!
//! A test is a doc-commented async function; `testkit::main!()` runs every
//! test of its binary (`harness = false`) under libtest-mimic, so `cargo test`
//! and `cargo nextest` both work, with all their flags:
//!
//! ```no_run
//! use testkit::prelude::*;
//!
//! /// The pod lists a sandbox this test created.
//! #[testkit::test(timeout = "2m", requires = ["exec"])]
//! async fn create_and_list(cx: &mut Cx) -> testkit::Result {
//!     let pod = cx.pod()?; // a skip, with the reason, when no pod is configured
//!     let name = cx.unique_name(); // ct-<run id>-<test tag>-<nn>
//!     cx.create("sandbox", &name, async {
//!         // journaled before this request is sent; deleted and verified gone
//!         // when the test ends, whatever happens
//!         pod.client()
//!             .post(pod.url("/api/sandboxes"))
//!             .json(&serde_json::json!({ "name": name }))
//!             .send()
//!             .await?
//!             .error_for_status()
//!     })
//!     .await?;
//!     let listed = pod.client().get(pod.url("/api/sandboxes")).send().await?.text().await?;
//!     ensure!(listed.contains(&name), "{name} is not listed: {listed}");
//!     Ok(())
//! }
//!
//! testkit::main!();
//! ```
//!
//! What the harness guarantees each test, and how suites declare their pod
//! and resource kinds (`testkit.toml`), is in `TESTING.md`.
//!
//! # Known limitations
//!
//! - Linux only: process groups, `/proc` and `flock` are how pods are stopped,
//!   reapers find their parents gone, and budgets are shared between processes.
//! - A test body that blocks its thread (no `.await`) cannot be cancelled by
//!   its timeout; the harness reports the timeout only once it yields.
//! - Resource kinds are HTTP templates: a service whose resources cannot be
//!   listed, checked and deleted over HTTP by name needs a kind per endpoint
//!   it offers, or sub-resources that go away with a parent.
//! - UI tests (`browser` feature) need Chromium on the machine, and drive the
//!   page with JavaScript: `click` and `fill` dispatch DOM events, not input
//!   devices' events.
//! - `cx.cli` hands the CLI the raw token, so it stops working once the pod's
//!   token window has passed; HTTP calls through `cx.pod()` keep the session.
//!
//! # Layers
//!
//! Imports point down only; a test (`tests/layers.rs`) keeps it so.
//!
//! 1. Facts that know nothing of tests: [`settings`] (every `TESTKIT_*`
//!    variable, read once), [`run`] (run ids, the results folder),
//!    [`config`] (`testkit.toml`), redaction, [`process`] (process groups),
//!    files that hold secrets, the test log, the runtime, [`Skip`].
//! 2. [`wait`]; [`report`] (records, JUnit, known issues); [`pod`] (handle,
//!    session, launch); [`resource`] (kinds, journal, cleanup, reaper);
//!    the CLI runner. Each takes what it needs as arguments.
//!    Above them, the browser phase (`browser`, with the `browser` feature):
//!    Chromium as a process tree a test owns.
//! 3. [`Cx`]: the only `impl Cx`, what a test sees.
//! 4. The harness: the test list, libtest-mimic, each test's lifecycle.
//!
//! What `testkit-runner` shares with the library (the record schema, run
//! ids, setting names, the record reader) is public here and documented as
//! such, so that it lives once.
#![warn(missing_docs, unreachable_pub)]

#[doc(hidden)]
pub mod __private;
#[cfg(feature = "browser")]
pub mod browser;
mod cli;
pub mod config;
mod cx;
mod files;
mod harness;
#[cfg(test)]
mod layers;
mod log;
pub mod pod;
pub mod process;
mod redact;
pub mod report;
pub mod resource;
pub mod run;
mod run_id;
mod runtime;
pub mod settings;
mod skip;
pub mod template;
pub mod wait;

pub use cli::{CliCommand, CliOutput};
pub use cx::Cx;
pub use redact::{redact, register_secret, REDACTED};
pub use skip::Skip;
pub use testkit_macros::test;

/// The HTTP client `Pod::client` is, re-exported so suites use the same version.
pub use reqwest;

/// What a test returns: `Ok(())` or any error, with context.
pub type Result<T = (), E = anyhow::Error> = std::result::Result<T, E>;

pub use anyhow::{anyhow as format_err, bail, ensure, Context};

/// Everything a test file needs: `use testkit::prelude::*;`
pub mod prelude {
    pub use crate::wait::{Check, Wait};
    pub use crate::{bail, ensure, format_err, Cx, Skip};
    pub use anyhow::Context as _;
}

/// The entry point of a test binary (`harness = false`): runs every
/// `#[testkit::test]` of the binary under libtest-mimic.
#[macro_export]
macro_rules! main {
    () => {
        fn main() -> ::std::process::ExitCode {
            $crate::__private::main(::core::env!("CARGO_MANIFEST_DIR"))
        }
    };
}
