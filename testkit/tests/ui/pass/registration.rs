//! Every accepted form registers a test whose `TestDef` carries what the
//! attribute and the doc comment say. Checked by walking the inventory rather
//! than by running the harness.

use testkit::__private::{inventory, TestDef};
use testkit::Cx;

/// Every option at once.
///
/// This second paragraph is not part of the description.
#[testkit::test(
    ignore = "needs a GPU pod",
    timeout = "90s",
    known_issue = "SBX-12",
    fails_with = "exit status 137",
    intermittent = true,
    requires = ["exec", "gpu"],
    exclusive,
)]
async fn every_option(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

///   A description that spans
///   two lines.
#[testkit::test]
#[allow(unused_variables)]
pub async fn no_options(cx: &mut Cx) -> testkit::Result<()> {
    Ok(())
}

mod nested {
    use testkit::{Cx, Result};

    /** A block doc comment. */
    #[testkit::test(timeout = "250ms", known_issue = "SBX-7")]
    async fn r#match(_cx: &mut ::testkit::Cx) -> Result {
        Ok(())
    }

    #[doc = "An attribute doc."]
    #[testkit::test(requires = ["exec"], timeout = "2h",)]
    pub(crate) async fn attribute_doc(mut cx: &mut Cx) -> ::testkit::Result {
        let _ = &mut cx;
        Ok(())
    }

    /// Ignored without a pattern name.
    #[testkit::test(timeout = "1m")]
    async fn wildcard(_: &mut testkit::Cx) -> testkit::Result {
        Ok(())
    }
}

fn find(name: &str) -> &'static TestDef {
    inventory::iter::<TestDef>
        .into_iter()
        .find(|def| def.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not registered"))
}

fn main() {
    assert_eq!(inventory::iter::<TestDef>.into_iter().count(), 5);

    let def = find("every_option");
    assert_eq!(def.module_path, module_path!());
    assert_eq!(def.description, "Every option at once.");
    assert!(def.file.ends_with("registration.rs"), "{}", def.file);
    assert_eq!(def.line, 20);
    assert_eq!(def.options.ignore, Some("needs a GPU pod"));
    assert_eq!(def.options.timeout_ms, Some(90_000));
    assert_eq!(def.options.known_issue, Some("SBX-12"));
    assert_eq!(def.options.fails_with, Some("exit status 137"));
    assert!(def.options.intermittent);
    assert_eq!(def.options.requires, ["exec", "gpu"]);
    assert!(def.options.exclusive);

    let def = find("no_options");
    assert_eq!(def.description, "A description that spans two lines.");
    assert_eq!(def.line, 29);
    assert_eq!(def.options.ignore, None);
    assert_eq!(def.options.timeout_ms, None);
    assert_eq!(def.options.known_issue, None);
    assert_eq!(def.options.fails_with, None);
    assert!(!def.options.intermittent);
    assert!(def.options.requires.is_empty());
    assert!(!def.options.exclusive);
    // A test without options shares the one static of none.
    assert!(std::ptr::eq(def.options, &testkit::__private::NO_OPTIONS));
    assert!(!std::ptr::eq(find("wildcard").options, &testkit::__private::NO_OPTIONS));

    let def = find("match");
    assert_eq!(def.module_path, concat!(module_path!(), "::nested"));
    assert_eq!(def.description, "A block doc comment.");
    assert_eq!(def.options.timeout_ms, Some(250));
    assert_eq!(def.options.known_issue, Some("SBX-7"));

    let def = find("attribute_doc");
    assert_eq!(def.description, "An attribute doc.");
    assert_eq!(def.options.timeout_ms, Some(7_200_000));
    assert_eq!(def.options.requires, ["exec"]);

    assert_eq!(find("wildcard").options.timeout_ms, Some(60_000));

    // The registered function is the test itself.
    let _: for<'a> fn(&'a mut Cx) -> testkit::__private::BoxFuture<'a> = find("wildcard").run;
}
