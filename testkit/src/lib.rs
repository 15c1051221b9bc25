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
//! and resource kinds (`testkit.toml`), is in the book, `book/src/` (start
//! at `book/src/first-suite.md`; `mdbook build book` renders it).
//!
//! # Versions
//!
//! testkit follows semantic versioning: within `0.1.x` nothing a suite uses
//! breaks. A suite says `testkit = "0.1"` and runs under a `testkit-runner`
//! of the same minor version. testkit depends on `testkit-engine` and
//! `testkit-macros` pinned exactly (`=0.1.0`): they make no stability promise
//! of their own and are released with testkit, under one version.
//!
//! # Known limitations
//!
//! - Linux only: process groups, `/proc` and `flock` are how pods are stopped,
//!   reapers find their parents gone, and budgets are shared between processes.
//! - A test body that blocks its thread (no `.await`) cannot be cancelled by
//!   its timeout; the harness reports the timeout only once it yields.
//! - A resource kind is HTTP templates or Rust code (`resource_kind!`); a
//!   kind in Rust is swept by the suite's own test binaries, since the
//!   runner links no suite code.
//! - The check for processes a test left running opens an entry of `/proc`
//!   for each pid the machine gave out while the test ran: on a busy
//!   machine, a binary of a thousand trivial tests runs a few times slower
//!   than plain `#[test]` (see `bench/`).
//! - UI tests (`browser` feature) need Chromium on the machine, and drive the
//!   page with JavaScript: `click` and `fill` dispatch DOM events, not input
//!   devices' events.
//! - `cx.cli` hands the CLI the raw token, so it stops working once the pod's
//!   token window has passed; HTTP calls through `cx.pod()` keep the session.
//!
//! # Layers
//!
//! Imports point down only, and no file's imports lead back to it; a test
//! (`src/layers.rs`) keeps it so.
//!
//! 1. The engine (`testkit-engine`): config, settings, run ids, pods,
//!    resource kinds, journal, records; every function takes its inputs as
//!    arguments. testkit re-exports the part a spec author uses.
//! 2. `globals`: what a test process reads once (its settings, run, config,
//!    kinds, pod) and the record files it writes, handed down as arguments.
//!    The state of one mechanism (the runtime, the tracker's counts, the
//!    reaper child) stays private beside its code: `globals`' doc lists where.
//! 3. What a test owns: the resource tracker, the CLI runner, the browser
//!    phase (`browser` feature), the reaper and the signal handler.
//! 4. [`Cx`]: the only `impl Cx`, what a test sees.
//! 5. The harness: the test list, libtest-mimic, each test's lifecycle, and
//!    the process roles a test binary can be started in (test, reaper,
//!    sweeper).
#![warn(missing_docs, unreachable_pub)]

/// The book's pages (`book/src/`), as doc tests: every Rust example of the
/// book compiles (`cargo test --doc`). A page with Rust blocks is listed
/// here; `testkit-engine/tests/book.rs` fails on one that is not.
#[cfg(doctest)]
mod book {
    macro_rules! pages {
        ($($module:ident = $page:literal),* $(,)?) => {
            // `toml,over=PATH` is the book's own annotation, which rustdoc
            // does not know: `testkit-engine/tests/book.rs` checks those.
            $(#[allow(rustdoc::invalid_codeblock_attributes)]
            #[doc = include_str!($page)]
            mod $module {})*
        };
    }
    pages! {
        writing_tests = "../../book/src/writing-tests.md",
        concurrency = "../../book/src/concurrency.md",
        resources = "../../book/src/resources.md",
        pod_process = "../../book/src/pod-process.md",
        faults = "../../book/src/faults.md",
        history = "../../book/src/history.md",
    }
    // Its example opens a page in Chromium: compiled with the feature.
    #[cfg(feature = "browser")]
    pages! {
        ui_tests = "../../book/src/ui-tests.md",
    }
}

#[doc(hidden)]
pub mod __private;
#[cfg(feature = "browser")]
pub mod browser;
mod cli;
mod cx;
mod faults;
mod globals;
mod harness;
#[cfg(test)]
mod layers;
mod leftovers;
mod log;
mod reaper;
mod runtime;
mod signals;
mod skip;
mod sweeper;
mod trace;
mod tracker;

use testkit_engine as engine;

pub use cli::{CliCommand, CliOutput};
pub use cx::Cx;
pub use engine::redact::{redact, register_secret, REDACTED};
pub use faults::{Faults, Link, Partition, Runs};
pub use skip::Skip;
pub use testkit_macros::test;

/// Waits that tell you what they saw: poll until a condition holds, with an
/// inactivity timeout (reset whenever what is observed changes) and a hard
/// ceiling; a timeout names what it waited for, how long, and the last
/// observation.
///
/// ```no_run
/// # async fn f(cx: &testkit::Cx) -> testkit::Result {
/// use std::time::Duration;
/// use testkit::wait::{self, Check, Wait};
///
/// let wait = Wait::new().inactivity(Duration::from_secs(10));
/// let state = wait::until(cx, "sandbox ct-x to be ready", wait, || async {
///     let state = String::from("ready"); // ask the pod here
///     Ok(if state == "ready" { Check::Done(state) } else { Check::pending(format!("state={state}")) })
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub mod wait {
    pub use crate::engine::wait::{until, Check, TimeoutReason, Wait, WaitError};
}

/// Values in request templates: what a Rust kind needs to build the same
/// paths and queries a `testkit.toml` template does.
pub mod template {
    pub use crate::engine::template::{encode, json_escape};
}

/// The pod a test drives: [`Cx::pod`] hands it out.
pub mod pod {
    pub use crate::engine::pod::{Client, NoSuchNode, Node, Pod, RequestBuilder};
}

/// Resource kinds in Rust, for what `testkit.toml`'s HTTP templates cannot
/// say: implement [`ResourceKind`](resource::ResourceKind) and register it
/// with [`resource_kind!`](crate::resource_kind).
pub mod resource {
    pub use crate::engine::resource::{KindFuture, OpError, Presence, ResourceKind, ResourceRef};
}

/// Histories of the operations a test's clients perform, and the checkers
/// that judge them: [`Cx::history`] hands out the test's own.
pub mod history {
    pub use crate::engine::history::check::{
        Check, CheckError, Checked, CounterAnomalies, CounterRead, Drawing, DrawnOp, DuplicateIds,
        Model, NotLinearizable, SetAnomalies, UnknownReason, DEFAULT_BOUND,
    };
    pub use crate::engine::history::{
        FailedCheck, History, HistorySnapshot, Op, Operation, Outcome, PendingOp, Value, FILE_NAME,
        MAX_OPS,
    };
}

/// What a test returns: `Ok(())` or any error, with context.
pub type Result<T = (), E = anyhow::Error> = std::result::Result<T, E>;

pub use anyhow::{anyhow as format_err, bail, ensure, Context};

/// Everything a test file needs: `use testkit::prelude::*;`
pub mod prelude {
    pub use crate::engine::wait::{Check, Wait};
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

/// Registers a [`ResourceKind`](resource::ResourceKind) under the name
/// `testkit.toml` declares it by (`[resources.record] rust = true`):
///
/// ```text
/// struct Records;
/// impl testkit::resource::ResourceKind for Records { /* … */ }
/// testkit::resource_kind!("record", Records);
/// ```
#[macro_export]
macro_rules! resource_kind {
    ($name:literal, $kind:expr) => {
        $crate::__private::inventory::submit! {
            $crate::__private::RustKind::new($name, &$kind)
        }
    };
}
