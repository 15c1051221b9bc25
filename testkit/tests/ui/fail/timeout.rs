/// No unit.
#[testkit::test(timeout = "90")]
async fn no_unit(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Unknown unit.
#[testkit::test(timeout = "5sec")]
async fn unknown_unit(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// A fraction.
#[testkit::test(timeout = "1.5s")]
async fn fraction(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Empty.
#[testkit::test(timeout = "")]
async fn empty(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Zero.
#[testkit::test(timeout = "0s")]
async fn zero(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Too large.
#[testkit::test(timeout = "99999999999999999999h")]
async fn too_large(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
