struct Suite;

impl Suite {
    /// A method.
    #[testkit::test]
    async fn method(&mut self) -> testkit::Result {
        Ok(())
    }
}

fn main() {}
