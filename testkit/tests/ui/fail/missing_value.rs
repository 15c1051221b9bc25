/// Options without values.
#[testkit::test(ignore, timeout("90s"), known_issue, fails_with, requires)]
async fn bare(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
