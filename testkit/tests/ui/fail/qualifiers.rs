/// Const.
#[testkit::test]
const fn constant(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Unsafe.
#[testkit::test]
async unsafe fn dangerous(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Extern.
#[testkit::test]
async extern "C" fn foreign(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
