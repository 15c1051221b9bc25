/// No parameter.
#[testkit::test]
async fn none() -> testkit::Result {
    Ok(())
}

/// Two parameters.
#[testkit::test]
async fn two(cx: &mut testkit::Cx, retries: u32) -> testkit::Result {
    let _ = (cx, retries);
    Ok(())
}

fn main() {}
