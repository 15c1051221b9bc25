//! Used by code that `#[testkit::test]` and `testkit::main!()` generate; not
//! a public API. Re-exports only: what generated code calls lives in the
//! module that owns it.

pub use crate::globals::RustKind;
pub use crate::harness::{main, BoxFuture, TestDef, TestOptions, NO_OPTIONS};
pub use inventory;
