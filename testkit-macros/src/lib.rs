//! The `#[testkit::test]` attribute. Spec authors use it through the
//! `testkit` crate, which re-exports it; depend on `testkit`, not on this
//! crate. It makes no stability promise: testkit depends on it pinned
//! exactly (`=0.1.0`), released with it under one version.
//!
//! ```text
//! use testkit::prelude::*;
//!
//! /// A created sandbox is listed by name and is gone after delete.
//! #[testkit::test(timeout = "2m", requires = ["exec"])]
//! async fn create_list_delete(cx: &mut Cx) -> testkit::Result {
//!     Ok(())
//! }
//!
//! testkit::main!();
//! ```
//!
//! The macro only parses (`parse`), validates (`validate`) and expands
//! (`expand`); every message it can print lives in `error`.
//!
//! # Known limitations
//!
//! - The description is read from literal doc comments only. A
//!   `#[doc = include_str!(..)]` attribute cannot be read by a macro: it counts
//!   as a paragraph break, and a test whose only documentation is such an
//!   attribute is rejected with an error that says so.
//! - When `#[test]` is written *above* `#[testkit::test]`, rustc expands it
//!   first. In a test binary with `harness = false` (every testkit suite) that
//!   removes the function before this macro runs, so the test silently
//!   disappears and nothing can be reported. Written *below*, or with
//!   `#[tokio::test]` in either order, the combination is an error.
#![warn(missing_docs, unreachable_pub)]

extern crate proc_macro;

mod error;
mod expand;
#[cfg(test)]
mod layers;
mod parse;
mod validate;

use proc_macro::TokenStream;

/// Registers an `async fn name(cx: &mut testkit::Cx) -> testkit::Result` as a
/// testkit test. Its doc comment is required: the first paragraph describes
/// the test in listings and reports.
///
/// Options, each at most once, separated by commas (the book has them all
/// in detail: `book/src/writing-tests.md#options`):
///
/// | option | meaning |
/// | --- | --- |
/// | `ignore = "reason"` | do not run unless `--ignored`/`--include-ignored`; reports say why |
/// | `timeout = "90s"` | cancel the test after this long (`ms`, `s`, `m`, `h`) |
/// | `known_issue = "ID"` | pinned to a known product bug of `KNOWN-ISSUES.md`: it must fail |
/// | `fails_with = "text"` | with `known_issue`: the failure must contain this text |
/// | `intermittent = true` | with `known_issue` and `fails_with`: a pass is a pass |
/// | `trace = "on"` | keep this test's trace: `on`, `retain-on-failure` or `off` |
/// | `requires = ["exec", ..]` | pod capabilities the test needs; missing ones skip it |
/// | `exclusive` | the test has the pod to itself: no other test of the run (thread or nextest process) uses the pod while its body and cleanup run; for tests that inject faults |
///
/// ```text
/// /// Stopping a node fails over to the other.
/// #[testkit::test(exclusive, timeout = "5m")]
/// async fn node_failover(cx: &mut Cx) -> testkit::Result {
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::test(args.into(), item.into()).into()
}
