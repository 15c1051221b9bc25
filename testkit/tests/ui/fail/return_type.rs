/// No return type.
#[testkit::test]
async fn nothing(cx: &mut testkit::Cx) {
    let _ = cx;
}

/// Unit.
#[testkit::test]
async fn unit(cx: &mut testkit::Cx) -> () {
    let _ = cx;
}

/// Another error type.
#[testkit::test]
async fn other_error(cx: &mut testkit::Cx) -> Result<(), String> {
    let _ = cx;
    Ok(())
}

/// Another value type.
#[testkit::test]
async fn other_value(cx: &mut testkit::Cx) -> testkit::Result<u32> {
    let _ = cx;
    Ok(1)
}

fn main() {}
