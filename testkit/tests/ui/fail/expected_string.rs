/// Values that are not string literals.
#[testkit::test(ignore = true, timeout = 90s, known_issue = SBX_1, fails_with = concat!("a", "b"))]
async fn not_strings(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
