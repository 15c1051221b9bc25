// A shape the macro accepts but the type checker does not: the error points at
// the user's return type.

/// Not testkit's `Result`.
#[testkit::test]
async fn io_result(cx: &mut testkit::Cx) -> std::io::Result<()> {
    let _ = cx;
    Ok(())
}

fn main() {}
