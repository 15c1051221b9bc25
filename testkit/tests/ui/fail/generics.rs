/// Generic over a type.
#[testkit::test]
async fn generic<T>(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Generic over a lifetime.
#[testkit::test]
async fn with_lifetime<'a>(cx: &'a mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// A where clause.
#[testkit::test]
async fn with_where(cx: &mut testkit::Cx) -> testkit::Result
where
    u8: Copy,
{
    let _ = cx;
    Ok(())
}

fn main() {}
