//! Used by code that `#[testkit::test]` and `testkit::main!()` generate; not
//! a public API.

use std::future::Future;
use std::pin::Pin;

pub use inventory;

/// The boxed future of one test body. Not `Send`: each test runs on its own
/// harness thread, driven by `Handle::block_on`, so tests may hold anything
/// across an await.
pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = crate::Result> + 'a>>;

/// One registered test, as `#[testkit::test]` records it.
#[derive(Debug)]
pub struct TestDef {
    /// `module_path!()` where the test is defined.
    pub module_path: &'static str,
    /// The function's name.
    pub name: &'static str,
    /// The first paragraph of the doc comment, lines joined by one space.
    pub description: &'static str,
    /// `file!()` of the test function.
    pub file: &'static str,
    /// Line of the test function's name.
    pub line: u32,
    /// `ignore = "reason"`.
    pub ignore: Option<&'static str>,
    /// `timeout = "90s"`, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `known_issue = "ID"`.
    pub known_issue: Option<&'static str>,
    /// `fails_with = "text"`: what the failure of a known issue must contain.
    pub fails_with: Option<&'static str>,
    /// `requires = [..]`: pod capabilities the test needs.
    pub requires: &'static [&'static str],
    /// Calls the test function.
    pub run: for<'a> fn(&'a mut crate::Cx) -> BoxFuture<'a>,
}

inventory::collect!(TestDef);

/// `testkit::main!()` calls this.
pub fn main() -> std::process::ExitCode {
    crate::harness::main()
}
