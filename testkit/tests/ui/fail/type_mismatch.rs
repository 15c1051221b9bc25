// Shapes the macro accepts but the type checker does not: each error points
// at the user's type.

/// Not testkit's `Result`.
#[testkit::test]
async fn io_result(cx: &mut testkit::Cx) -> std::io::Result<()> {
    let _ = cx;
    Ok(())
}

struct Cx;

/// Not testkit's `Cx`: the error points at the parameter's type.
#[testkit::test]
async fn own_cx(cx: &mut Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
