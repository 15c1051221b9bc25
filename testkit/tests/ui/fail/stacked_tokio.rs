/// `#[tokio::test]` below.
#[testkit::test]
#[tokio::test]
async fn tokio_below(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `#[tokio::test]` above.
#[tokio::test]
#[testkit::test]
async fn tokio_above(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
