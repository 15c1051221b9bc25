/// `exclusive` with a value.
#[testkit::test(exclusive = true)]
async fn with_value(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `exclusive` with a string.
#[testkit::test(exclusive = "yes")]
async fn with_string(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `exclusive` as a list.
#[testkit::test(exclusive(pod))]
async fn as_a_list(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `exclusive` twice.
#[testkit::test(exclusive, timeout = "1s", exclusive)]
async fn twice(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
