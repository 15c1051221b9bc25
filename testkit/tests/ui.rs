//! Compile-time checks of `#[testkit::test]`: every error it reports has a
//! case in `ui/fail/` with the exact output in a `.stderr` beside it, and the
//! accepted forms are in `ui/pass/`. Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p testkit --test ui`, then review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
