//! A test binary as a spec author writes it, with every option, ending in
//! `testkit::main!()`. What the attribute generates warns about nothing,
//! whatever the body.
#![deny(warnings)]

use testkit::prelude::*;

/// A test with every option compiles and links into a harness binary.
#[testkit::test(
    ignore = "never runs in this check",
    timeout = "2m",
    known_issue = "SBX-1",
    fails_with = "boom",
    requires = ["exec"],
    exclusive,
)]
async fn every_option(cx: &mut Cx) -> testkit::Result {
    let _ = cx;
    bail!("boom")
}

/// Never returns normally: the body's value is unreachable.
#[testkit::test(ignore = "never runs in this check")]
async fn unfinished(_cx: &mut Cx) -> testkit::Result {
    todo!()
}

/// A test function is still a function that another can await.
#[testkit::test(ignore = "never runs in this check")]
async fn awaits_another(cx: &mut Cx) -> testkit::Result {
    every_option(cx).await?;
    unfinished(cx).await
}

testkit::main!();
