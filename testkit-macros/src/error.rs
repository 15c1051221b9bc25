//! Every message `#[testkit::test]` can print, and the collector that lets one
//! expansion report all of them at once instead of stopping at the first.
//!
//! Messages are lowercase, say what is wrong and how to fix it, and list the
//! valid choices where there are any.

use proc_macro2::Span;
use quote::ToTokens;

/// Collects errors across parsing and validation (serde_derive's `Ctxt`).
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Option<syn::Error>,
}

impl Ctxt {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(errors) => errors.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Records the error of `result`, if any, and returns its value.
    pub(crate) fn ok<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.errors.map_or(Ok(()), Err)
    }
}

/// The shape every test has, quoted by messages that need to show it.
const SHAPE: &str = "async fn name(cx: &mut testkit::Cx) -> testkit::Result";

pub(crate) const OPTIONS: &str =
    "`ignore`, `timeout`, `known_issue`, `fails_with`, `intermittent`, `requires`, `trace`, `exclusive`";

pub(crate) const UNITS: &str = "`ms`, `s`, `m`, `h`";

/// How each option is written, for messages about a missing or malformed value.
pub(crate) fn option_example(name: &str) -> &'static str {
    match name {
        "ignore" => r#"ignore = "reason""#,
        "timeout" => r#"timeout = "90s""#,
        "known_issue" => r#"known_issue = "ID""#,
        "fails_with" => r#"fails_with = "text the failure must contain""#,
        "intermittent" => "intermittent = true",
        "requires" => r#"requires = ["capability"]"#,
        "trace" => r#"trace = "on""#,
        "exclusive" => "exclusive",
        _ => unreachable!("no option named `{name}`"),
    }
}

fn err(tokens: impl ToTokens, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new_spanned(tokens, message)
}

// ---- the attribute's options ----

pub(crate) fn not_an_option(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!(r#"expected an option such as `timeout = "90s"`; expected one of: {OPTIONS}"#),
    )
}

pub(crate) fn unknown_option(path: &syn::Path) -> syn::Error {
    err(
        path,
        format!(
            "unknown option `{}`; expected one of: {OPTIONS}",
            path_to_string(path)
        ),
    )
}

pub(crate) fn repeated_option(key: &syn::Ident) -> syn::Error {
    err(
        key,
        format!("`{key}` set multiple times; keep one `{key}` and remove the others"),
    )
}

pub(crate) fn exclusive_takes_no_value(meta: &syn::Meta) -> syn::Error {
    err(
        meta,
        "`exclusive` is a flag and takes no value: write `#[testkit::test(exclusive)]` \
         for a test that needs the pod to itself, or remove it",
    )
}

pub(crate) fn missing_value(meta: &syn::Meta, name: &str) -> syn::Error {
    err(
        meta,
        format!("`{name}` needs a value: write `{}`", option_example(name)),
    )
}

pub(crate) fn expected_string(value: &syn::Expr, name: &str) -> syn::Error {
    err(
        value,
        format!(
            "`{name}` expects a string literal: write `{}`",
            option_example(name)
        ),
    )
}

pub(crate) fn empty_ignore(lit: &syn::LitStr) -> syn::Error {
    err(
        lit,
        r#"`ignore` needs a reason: write `ignore = "why this test is skipped"`"#,
    )
}

pub(crate) fn unknown_trace_policy(lit: &syn::LitStr) -> syn::Error {
    err(
        lit,
        format!(
            "`trace` is {:?}: expected one of `off`, `retain-on-failure`, `on` (which this test keeps of its trace, over TESTKIT_TRACE)",
            lit.value()
        ),
    )
}

pub(crate) fn empty_known_issue(lit: &syn::LitStr) -> syn::Error {
    err(
        lit,
        r#"`known_issue` needs the id of an entry in KNOWN-ISSUES.md: write `known_issue = "ID"`"#,
    )
}

pub(crate) fn empty_fails_with(lit: &syn::LitStr) -> syn::Error {
    err(
        lit,
        "`fails_with` needs the text the failure must contain; to accept any failure, remove `fails_with`",
    )
}

pub(crate) fn expected_bool(value: &syn::Expr, name: &str) -> syn::Error {
    err(
        value,
        format!(
            "`{name}` expects `true` or `false`: write `{}`",
            option_example(name)
        ),
    )
}

pub(crate) fn intermittent_without_known_issue(key: &syn::Ident) -> syn::Error {
    err(
        key,
        r#"`intermittent` requires `known_issue`: add `known_issue = "ID"` naming the bug that fails this test only sometimes"#,
    )
}

pub(crate) fn intermittent_without_fails_with(key: &syn::Ident) -> syn::Error {
    err(
        key,
        r#"`intermittent = true` requires `fails_with`: a known issue that may pass must say how it fails, or no failure of this test could fail the run; add `fails_with = "text the failure must contain"`"#,
    )
}

pub(crate) fn fails_with_without_known_issue(key: &syn::Ident) -> syn::Error {
    err(
        key,
        r#"`fails_with` requires `known_issue`: add `known_issue = "ID"` naming the issue that causes this failure"#,
    )
}

/// Why a `timeout` string is not a duration; see `parse::parse_duration`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// No leading whole number (empty, a sign, a fraction, a space...).
    Malformed,
    MissingUnit,
    UnknownUnit(String),
    Zero,
    TooLarge,
}

pub(crate) fn invalid_timeout(lit: &syn::LitStr, error: DurationError) -> syn::Error {
    let value = lit.value();
    let message = match error {
        DurationError::Malformed => format!(
            r#"invalid timeout `{value}`: expected a whole number followed by a unit, one of: {UNITS} (e.g. `timeout = "90s"`)"#
        ),
        DurationError::MissingUnit => format!(
            r#"invalid timeout `{value}`: missing unit; expected one of: {UNITS} (e.g. `timeout = "{value}s"`)"#
        ),
        DurationError::UnknownUnit(unit) => {
            format!("invalid timeout `{value}`: unknown unit `{unit}`; expected one of: {UNITS}")
        }
        DurationError::Zero => {
            "`timeout` must be greater than zero; remove it to use the default timeout".to_owned()
        }
        DurationError::TooLarge => format!("invalid timeout `{value}`: too large"),
    };
    err(lit, message)
}

pub(crate) fn requires_not_a_list(value: &syn::Expr) -> syn::Error {
    err(
        value,
        r#"`requires` expects a list of capability names: write `requires = ["capability"]`"#,
    )
}

pub(crate) fn requires_empty(value: &syn::ExprArray) -> syn::Error {
    err(
        value,
        "`requires` is empty; list at least one capability, or remove the option",
    )
}

pub(crate) fn capability_not_a_string(value: &syn::Expr) -> syn::Error {
    err(
        value,
        r#"expected a capability name as a string literal, e.g. `"exec"`"#,
    )
}

pub(crate) fn capability_empty(lit: &syn::LitStr) -> syn::Error {
    err(lit, "capability names must not be empty")
}

pub(crate) fn capability_repeated(lit: &syn::LitStr) -> syn::Error {
    err(
        lit,
        format!(
            "capability `{}` is listed more than once in `requires`; remove the duplicate",
            lit.value()
        ),
    )
}

// ---- the function ----

pub(crate) fn not_a_function(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!("`#[testkit::test]` applies to a function of the form `{SHAPE}`"),
    )
}

pub(crate) fn missing_body(tokens: impl ToTokens) -> syn::Error {
    err(tokens, "a test function needs a body")
}

pub(crate) fn not_async(fn_token: &syn::Token![fn]) -> syn::Error {
    err(
        fn_token,
        format!("test functions must be `async`: write `{SHAPE}`"),
    )
}

pub(crate) fn qualifier(tokens: impl ToTokens, what: &str) -> syn::Error {
    err(
        tokens,
        format!("test functions cannot be `{what}`; remove `{what}`"),
    )
}

pub(crate) fn generic(generics: &syn::Generics) -> syn::Error {
    err(
        generics,
        "test functions cannot be generic; remove the generic parameters",
    )
}

pub(crate) fn lifetime_param(generics: &syn::Generics) -> syn::Error {
    err(
        generics,
        "test functions cannot declare lifetimes; remove them: `cx: &mut testkit::Cx` needs none",
    )
}

pub(crate) fn where_clause(clause: &syn::WhereClause) -> syn::Error {
    err(
        clause,
        "test functions cannot have a `where` clause; remove it",
    )
}

pub(crate) fn variadic(variadic: &syn::Variadic) -> syn::Error {
    err(variadic, "test functions cannot be variadic")
}

pub(crate) fn receiver(receiver: &syn::Receiver) -> syn::Error {
    err(
        receiver,
        "test functions cannot take `self`; write a free function taking `cx: &mut testkit::Cx`",
    )
}

pub(crate) fn no_parameter(parens: Span) -> syn::Error {
    syn::Error::new(
        parens,
        "test functions take exactly one parameter: add `cx: &mut testkit::Cx`",
    )
}

pub(crate) fn extra_parameter(arg: &syn::FnArg) -> syn::Error {
    err(
        arg,
        "test functions take exactly one parameter, `cx: &mut testkit::Cx`; remove this one",
    )
}

pub(crate) fn parameter_pattern(pat: &syn::Pat) -> syn::Error {
    err(
        pat,
        "the parameter must be a plain name such as `cx` or `_cx`",
    )
}

pub(crate) fn parameter_type(ty: &syn::Type) -> syn::Error {
    err(ty, "the parameter must be `&mut testkit::Cx`")
}

pub(crate) fn parameter_lifetime(lifetime: &syn::Lifetime) -> syn::Error {
    err(
        lifetime,
        "remove this lifetime: the parameter must be `&mut testkit::Cx`",
    )
}

pub(crate) fn missing_return_type(after: Span) -> syn::Error {
    syn::Error::new(
        after,
        "test functions must return `testkit::Result`: add `-> testkit::Result`",
    )
}

pub(crate) fn return_type(ty: &syn::Type) -> syn::Error {
    err(
        ty,
        "test functions must return `testkit::Result` (or `testkit::Result<()>`)",
    )
}

pub(crate) fn stacked_test_attribute(attr: &syn::Attribute) -> syn::Error {
    let path = attr.path();
    // `#[tokio::test]` above ours has already expanded into a function marked
    // `#[::core::prelude::v1::test]`, spanned at the `#[tokio::test]`.
    if path.segments.iter().any(|s| s.ident == "prelude") {
        return err(
            attr,
            "`#[testkit::test]` cannot be combined with `#[test]` or an attribute that adds it, such as `#[tokio::test]`; remove it: testkit registers and runs the test itself",
        );
    }
    let path = path_to_string(path);
    err(
        attr,
        format!(
            "`#[testkit::test]` cannot be combined with `#[{path}]`; remove `#[{path}]`: testkit registers and runs the test itself"
        ),
    )
}

pub(crate) fn ignore_attribute(attr: &syn::Attribute) -> syn::Error {
    err(
        attr,
        r#"`#[ignore]` has no effect on a testkit test; write `#[testkit::test(ignore = "reason")]` instead"#,
    )
}

pub(crate) fn should_panic_attribute(attr: &syn::Attribute) -> syn::Error {
    err(
        attr,
        r#"`#[should_panic]` has no effect on a testkit test; pin an expected failure with `#[testkit::test(known_issue = "ID")]` instead"#,
    )
}

pub(crate) fn missing_doc(name: &syn::Ident) -> syn::Error {
    err(
        name,
        "missing doc comment: every test must state in a doc comment what it verifies; add `/// <what this test verifies>` above the function",
    )
}

pub(crate) fn unreadable_doc(attr: &syn::Attribute) -> syn::Error {
    err(
        attr,
        "every test must state in a doc comment what it verifies, and `#[testkit::test]` cannot read this doc attribute; write the description as a `///` comment",
    )
}

/// `a::b`, `::a::b`: a path as the user would write it, without the spaces
/// `to_token_stream().to_string()` puts around `::`.
fn path_to_string(path: &syn::Path) -> String {
    let mut out = String::new();
    if path.leading_colon.is_some() {
        out.push_str("::");
    }
    for (i, segment) in path.segments.iter().enumerate() {
        if i > 0 {
            out.push_str("::");
        }
        out.push_str(&segment.ident.to_string());
    }
    out
}
