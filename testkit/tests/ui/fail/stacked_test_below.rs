/// `#[test]` below.
#[testkit::test]
#[test]
async fn test_below(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
