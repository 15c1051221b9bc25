//! Turns the attribute's arguments into [`Options`] and the annotated item
//! into [`TestFn`], and reads the description out of the doc comment.
//!
//! Nothing here looks at what the function's signature means; that is
//! `validate`'s job.

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{
    Attribute, Expr, ExprLit, Ident, Lit, LitBool, LitStr, Meta, Signature, Token, Visibility,
};

use crate::error::{self, Ctxt, DurationError};

/// The options of one `#[testkit::test(..)]`, each already checked on its own.
/// Checks that involve two options (`fails_with` needs `known_issue`) happen in
/// `validate`.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) ignore: Option<LitStr>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) known_issue: Option<LitStr>,
    /// The key is kept to point at it when `known_issue` is missing.
    pub(crate) fails_with: Option<(Ident, LitStr)>,
    /// The key is kept to point at it when `known_issue` or `fails_with`
    /// is missing.
    pub(crate) intermittent: Option<(Ident, LitBool)>,
    pub(crate) requires: Option<Vec<LitStr>>,
    /// `trace = "on"`: this test's trace policy, over `TESTKIT_TRACE`.
    pub(crate) trace: Option<LitStr>,
    /// `exclusive`: the test has the pod to itself. The key is kept to
    /// point at a repeat.
    pub(crate) exclusive: Option<Ident>,
}

impl Options {
    /// Whether the attribute set no option at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.ignore.is_none()
            && self.timeout_ms.is_none()
            && self.known_issue.is_none()
            && self.fails_with.is_none()
            && self.intermittent.is_none()
            && self.requires.is_none()
            && self.trace.is_none()
            && self.exclusive.is_none()
    }

    /// `intermittent = true`.
    pub(crate) fn is_intermittent(&self) -> bool {
        self.intermittent.as_ref().is_some_and(|(_, b)| b.value)
    }

    fn set_intermittent(&mut self, key: &Ident, value: &Expr) -> syn::Result<()> {
        check_unset(&self.intermittent, key)?;
        let Expr::Lit(ExprLit {
            lit: Lit::Bool(flag),
            ..
        }) = value
        else {
            return Err(error::expected_bool(value, "intermittent"));
        };
        self.intermittent = Some((key.clone(), flag.clone()));
        Ok(())
    }

    /// `exclusive` is a bare flag: `exclusive = true` would suggest that
    /// `exclusive = false` means something, and it would mean nothing.
    fn set_exclusive(&mut self, key: &Ident, meta: &Meta) -> syn::Result<()> {
        check_unset(&self.exclusive, key)?;
        if !matches!(meta, Meta::Path(_)) {
            return Err(error::exclusive_takes_no_value(meta));
        }
        self.exclusive = Some(key.clone());
        Ok(())
    }

    fn set_ignore(&mut self, key: &Ident, reason: LitStr) -> syn::Result<()> {
        check_unset(&self.ignore, key)?;
        if reason.value().trim().is_empty() {
            return Err(error::empty_ignore(&reason));
        }
        self.ignore = Some(reason);
        Ok(())
    }

    fn set_timeout(&mut self, key: &Ident, value: LitStr) -> syn::Result<()> {
        check_unset(&self.timeout_ms, key)?;
        let ms = parse_duration(&value.value()).map_err(|e| error::invalid_timeout(&value, e))?;
        self.timeout_ms = Some(ms);
        Ok(())
    }

    fn set_known_issue(&mut self, key: &Ident, id: LitStr) -> syn::Result<()> {
        check_unset(&self.known_issue, key)?;
        if id.value().trim().is_empty() {
            return Err(error::empty_known_issue(&id));
        }
        self.known_issue = Some(id);
        Ok(())
    }

    fn set_trace(&mut self, key: &Ident, policy: LitStr) -> syn::Result<()> {
        check_unset(&self.trace, key)?;
        if !TRACE_POLICIES.contains(&policy.value().as_str()) {
            return Err(error::unknown_trace_policy(&policy));
        }
        self.trace = Some(policy);
        Ok(())
    }

    fn set_fails_with(&mut self, key: &Ident, text: LitStr) -> syn::Result<()> {
        check_unset(&self.fails_with, key)?;
        if text.value().trim().is_empty() {
            return Err(error::empty_fails_with(&text));
        }
        self.fails_with = Some((key.clone(), text));
        Ok(())
    }

    fn set_requires(&mut self, key: &Ident, value: &Expr) -> syn::Result<()> {
        check_unset(&self.requires, key)?;
        let Expr::Array(array) = value else {
            return Err(error::requires_not_a_list(value));
        };
        if array.elems.is_empty() {
            return Err(error::requires_empty(array));
        }
        let mut errors = Ctxt::default();
        let mut capabilities: Vec<LitStr> = Vec::with_capacity(array.elems.len());
        for elem in &array.elems {
            let Some(lit) = string_literal(elem) else {
                errors.push(error::capability_not_a_string(elem));
                continue;
            };
            let name = lit.value();
            if name.trim().is_empty() {
                errors.push(error::capability_empty(lit));
            } else if capabilities.iter().any(|seen| seen.value() == name) {
                errors.push(error::capability_repeated(lit));
            } else {
                capabilities.push(lit.clone());
            }
        }
        errors.finish()?;
        self.requires = Some(capabilities);
        Ok(())
    }
}

fn check_unset<T>(slot: &Option<T>, key: &Ident) -> syn::Result<()> {
    match slot {
        Some(_) => Err(error::repeated_option(key)),
        None => Ok(()),
    }
}

fn string_literal(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit),
        _ => None,
    }
}

/// Parses the attribute's arguments. A syntax error stops parsing (nothing
/// after it can be trusted); an invalid option is recorded in `errors` and
/// parsing goes on, so every bad option is reported at once.
pub(crate) fn options(args: TokenStream, errors: &mut Ctxt) -> Options {
    let mut options = Options::default();
    let parser = |input: ParseStream<'_>| -> syn::Result<()> {
        while !input.is_empty() {
            if !input.peek(Ident) {
                return Err(error::not_an_option(input.span()));
            }
            let meta: Meta = input.parse()?;
            errors.ok(option(&mut options, &meta));
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(())
    };
    let result = parser.parse2(args);
    errors.ok(result);
    options
}

const NAMES: [&str; 8] = [
    "ignore",
    "timeout",
    "known_issue",
    "fails_with",
    "intermittent",
    "requires",
    "trace",
    "exclusive",
];

/// The values of `trace`, as `TESTKIT_TRACE` takes them.
const TRACE_POLICIES: [&str; 3] = ["off", "retain-on-failure", "on"];

fn option(options: &mut Options, meta: &Meta) -> syn::Result<()> {
    let path = meta.path();
    let key = match path.get_ident() {
        Some(key) if NAMES.contains(&key.to_string().as_str()) => key,
        _ => return Err(error::unknown_option(path)),
    };
    let name = key.to_string();
    if name == "exclusive" {
        return options.set_exclusive(key, meta);
    }
    let Meta::NameValue(name_value) = meta else {
        return Err(error::missing_value(meta, &name));
    };
    let value = &name_value.value;
    if name == "requires" {
        return options.set_requires(key, value);
    }
    if name == "intermittent" {
        return options.set_intermittent(key, value);
    }
    let Some(lit) = string_literal(value).cloned() else {
        return Err(error::expected_string(value, &name));
    };
    match name.as_str() {
        "ignore" => options.set_ignore(key, lit),
        "timeout" => options.set_timeout(key, lit),
        "known_issue" => options.set_known_issue(key, lit),
        "fails_with" => options.set_fails_with(key, lit),
        "trace" => options.set_trace(key, lit),
        _ => unreachable!("`{name}` is in NAMES"),
    }
}

/// `"90s"` → 90 000. A whole number directly followed by one of the units
/// `ms`, `s`, `m`, `h`; zero is rejected.
pub(crate) fn parse_duration(text: &str) -> Result<u64, DurationError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(DurationError::Malformed);
    }
    let per_unit: u64 = match unit {
        "" => return Err(DurationError::MissingUnit),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ if unit.starts_with(|c: char| c.is_ascii_alphabetic()) => {
            return Err(DurationError::UnknownUnit(unit.to_owned()))
        }
        _ => return Err(DurationError::Malformed),
    };
    let number: u64 = number.parse().map_err(|_| DurationError::TooLarge)?;
    match number.checked_mul(per_unit) {
        Some(0) => Err(DurationError::Zero),
        Some(ms) => Ok(ms),
        None => Err(DurationError::TooLarge),
    }
}

/// The annotated function, with its body left as unparsed tokens: a suite has
/// hundreds of tests, and the macro never needs to look inside a body.
pub(crate) struct TestFn {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    /// The `{ .. }` of the body.
    pub(crate) body: Group,
}

impl TestFn {
    pub(crate) fn parse(item: TokenStream) -> syn::Result<TestFn> {
        let parser = |input: ParseStream<'_>| -> syn::Result<TestFn> {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis: Visibility = input.parse()?;
            let sig: Signature = input.parse().map_err(|e| error::not_a_function(e.span()))?;
            let rest: TokenStream = input.parse()?;
            let mut rest = rest.into_iter();
            let body = match (rest.next(), rest.next()) {
                (Some(TokenTree::Group(group)), None) if group.delimiter() == Delimiter::Brace => {
                    group
                }
                (Some(first), _) => return Err(error::missing_body(first)),
                (None, _) => return Err(error::missing_body(&sig)),
            };
            Ok(TestFn {
                attrs,
                vis,
                sig,
                body,
            })
        };
        parser.parse2(item)
    }
}

/// What the doc comment of a test says.
pub(crate) struct Doc<'a> {
    /// The first paragraph of the literal doc text: lines trimmed and joined
    /// by one space. Empty when there is no literal text.
    pub(crate) description: String,
    /// The first doc attribute whose value is not a string literal (say
    /// `#[doc = include_str!("..")]`), which a macro cannot read.
    pub(crate) unreadable: Option<&'a Attribute>,
}

/// Reads `#[doc = ".."]` attributes (what `///` and `/** */` become). An
/// attribute that is not a string literal ends the paragraph, as its text,
/// whatever it is, would.
pub(crate) fn doc(attrs: &[Attribute]) -> Doc<'_> {
    let mut text = String::new();
    let mut unreadable = None;
    for attr in attrs {
        let Meta::NameValue(meta) = &attr.meta else {
            continue;
        };
        if !meta.path.is_ident("doc") {
            continue;
        }
        match string_literal(&meta.value) {
            Some(lit) => {
                text.push_str(&strip_block_stars(&lit.value()));
                text.push('\n');
            }
            None => {
                unreadable.get_or_insert(attr);
                text.push_str("\n\n");
            }
        }
    }
    Doc {
        description: first_paragraph(&text),
        unreadable,
    }
}

/// A `/** .. */` comment keeps the ` * ` that starts each of its lines; drop
/// it when every non-blank line has one.
fn strip_block_stars(text: &str) -> std::borrow::Cow<'_, str> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if !text.contains('\n') || !lines.all(|l| l.starts_with('*')) {
        return text.into();
    }
    text.lines()
        .map(|l| l.trim().strip_prefix('*').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        .into()
}

pub(crate) fn first_paragraph(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            if out.is_empty() {
                continue;
            }
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1ms"), Ok(1));
        assert_eq!(parse_duration("90s"), Ok(90_000));
        assert_eq!(parse_duration("2m"), Ok(120_000));
        assert_eq!(parse_duration("1h"), Ok(3_600_000));
        assert_eq!(parse_duration("007s"), Ok(7_000));
    }

    #[test]
    fn bad_durations() {
        use DurationError::*;
        assert_eq!(parse_duration(""), Err(Malformed));
        assert_eq!(parse_duration("s"), Err(Malformed));
        assert_eq!(parse_duration("-1s"), Err(Malformed));
        assert_eq!(parse_duration(" 1s"), Err(Malformed));
        assert_eq!(parse_duration("1 s"), Err(Malformed));
        assert_eq!(parse_duration("1.5s"), Err(Malformed));
        assert_eq!(parse_duration("1s "), Err(UnknownUnit("s ".into())));
        assert_eq!(parse_duration("90"), Err(MissingUnit));
        assert_eq!(parse_duration("5sec"), Err(UnknownUnit("sec".into())));
        assert_eq!(parse_duration("1m30s"), Err(UnknownUnit("m30s".into())));
        assert_eq!(parse_duration("0s"), Err(Zero));
        assert_eq!(parse_duration("0ms"), Err(Zero));
        assert_eq!(parse_duration("99999999999999999999ms"), Err(TooLarge));
        assert_eq!(parse_duration("18446744073709551615h"), Err(TooLarge));
    }

    fn doc_of(item: &str) -> (String, bool) {
        let test = TestFn::parse(item.parse().unwrap()).unwrap_or_else(|e| panic!("{e}"));
        let doc = doc(&test.attrs);
        (doc.description, doc.unreadable.is_some())
    }

    const BODY: &str = "async fn t(cx: &mut Cx) -> Result {}";

    #[test]
    fn description_is_the_first_paragraph() {
        let item =
            format!("/// \n///   First line,\n/// second   line.\n///\n/// More detail.\n{BODY}");
        assert_eq!(doc_of(&item), ("First line, second   line.".into(), false));
    }

    #[test]
    fn description_from_doc_attributes_and_blocks() {
        let item = format!(
            "#[doc = \"One.\"] #[doc = r\"Two.\"] #[allow(dead_code)] #[doc(hidden)] {BODY}"
        );
        assert_eq!(doc_of(&item).0, "One. Two.");
        let item = format!("/**\n * Block\n * doc.\n *\n * Rest.\n */\n{BODY}");
        assert_eq!(doc_of(&item).0, "Block doc.");
        let item = format!("/** Inline * star. */\n{BODY}");
        assert_eq!(doc_of(&item).0, "Inline * star.");
    }

    #[test]
    fn whitespace_only_doc_is_empty() {
        assert_eq!(doc_of(&format!("///\n///   \n{BODY}")).0, "");
        assert_eq!(doc_of(BODY).0, "");
    }

    #[test]
    fn unreadable_doc_ends_the_paragraph() {
        let item = format!("/// Summary.\n#[doc = include_str!(\"x.md\")]\n/// Not here.\n{BODY}");
        assert_eq!(doc_of(&item), ("Summary.".into(), true));
        let item = format!("#[doc = include_str!(\"x.md\")]\n{BODY}");
        assert_eq!(doc_of(&item), (String::new(), true));
    }
}
