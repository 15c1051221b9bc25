/// By value.
#[testkit::test]
async fn by_value(cx: testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Shared reference.
#[testkit::test]
async fn shared(cx: &testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Something else.
#[testkit::test]
async fn other(cx: &mut String) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// An explicit lifetime.
#[testkit::test]
async fn static_cx(cx: &'static mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// A pattern.
#[testkit::test]
async fn pattern(ref cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
