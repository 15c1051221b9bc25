//! Typed helpers for the sandboxd API, used by every conformance test.
//!
//! - [`Sandbox`] is the only resource kind (`[resources.sandbox]` in
//!   `testkit.toml`): [`Sandbox::create`] names it from the run and creates it
//!   through `cx.create`, so it is journaled before the request and deleted and
//!   verified gone when the test ends.
//! - Background [`Process`]es and files live inside a sandbox and go away with
//!   it, so they need no cleanup of their own.
//! - Every non-2xx answer becomes an [`ApiError`] (method, path, status, and
//!   the API's `error.code` and `error.message`); [`expect_error`] checks that
//!   a call failed the way the API documents.
//!
//! The types here describe the wire format as the suite expects it; they are
//! deliberately not shared with the server, so a change of the API shows up as
//! a failing test rather than a silent recompile.
//!
//! The modules follow the API: `error`, `api` (raw calls), `sandbox`, `cmd`
//! (commands and exec output) and `process`; everything is used from the
//! crate root.

mod api;
mod cmd;
mod error;
mod process;
mod sandbox;

use std::time::Duration;

use testkit::wait::Wait;

pub use api::{encode, request, Body};
pub use cmd::{Cmd, ExecOutput};
pub use error::{expect_error, ApiError};
pub use process::{Process, ProcessInfo};
pub use sandbox::{ListQuery, Sandbox, SandboxInfo, SandboxPage, SandboxSpec};

/// The resource kind of sandboxes, as declared in `testkit.toml`.
pub const SANDBOX: &str = "sandbox";

/// What the suite waits for by default: asynchronous work must show progress
/// within 20 s and finish within 2 min.
pub fn default_wait() -> Wait {
    Wait::new()
        .inactivity(Duration::from_secs(20))
        .ceiling(Duration::from_secs(120))
        .interval(Duration::from_millis(50))
}
