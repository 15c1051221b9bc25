/// A typo.
#[testkit::test(tiemout = "90s")]
async fn typo(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// A path.
#[testkit::test(testkit::timeout = "90s")]
async fn path(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Not an option at all.
#[testkit::test("90s")]
async fn literal(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
