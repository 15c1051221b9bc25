/// `#[ignore]`.
#[testkit::test]
#[ignore]
async fn ignored(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `#[should_panic]`.
#[testkit::test]
#[should_panic]
async fn panics(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
