//! A test binary as a spec author writes it, with every option, ending in
//! `testkit::main!()`.

use testkit::prelude::*;

/// A test with every option compiles and links into a harness binary.
#[testkit::test(
    ignore = "never runs in this check",
    timeout = "2m",
    known_issue = "SBX-1",
    fails_with = "boom",
    requires = ["exec"],
)]
async fn every_option(cx: &mut Cx) -> testkit::Result {
    let _ = cx;
    bail!("boom")
}

testkit::main!();
