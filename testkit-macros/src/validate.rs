//! Checks that the annotated function has the one shape a test may have,
//! `async fn name(cx: &mut testkit::Cx) -> testkit::Result`, that it is
//! documented, and that the options agree with each other. Every problem is
//! recorded; none stops the others from being found.

use syn::{
    Attribute, FnArg, GenericArgument, GenericParam, Pat, PathArguments, ReturnType, Signature,
    Type,
};

use crate::error::{self, Ctxt};
use crate::parse::{self, Options, TestFn};

/// Records every problem with `test` and `options` in `errors` and returns
/// the description (empty if the doc comment is missing).
pub(crate) fn test(test: &TestFn, options: &Options, errors: &mut Ctxt) -> String {
    let stacked = attributes(&test.attrs, errors);
    signature(&test.sig, stacked, errors);
    if let (Some((key, _)), None) = (&options.fails_with, &options.known_issue) {
        errors.push(error::fails_with_without_known_issue(key));
    }
    if let Some((key, _)) = options
        .intermittent
        .as_ref()
        .filter(|_| options.is_intermittent())
    {
        if options.known_issue.is_none() {
            errors.push(error::intermittent_without_known_issue(key));
        } else if options.fails_with.is_none() {
            errors.push(error::intermittent_without_fails_with(key));
        }
    }
    let doc = parse::doc(&test.attrs);
    if doc.description.is_empty() {
        errors.push(match doc.unreadable {
            Some(attr) => error::unreadable_doc(attr),
            None => error::missing_doc(&test.sig.ident),
        });
    }
    doc.description
}

/// `stacked`: another test attribute is present, and may have rewritten the
/// function already (`#[tokio::test]` above ours removes `async`).
fn signature(sig: &Signature, stacked: bool, errors: &mut Ctxt) {
    if let Some(token) = &sig.constness {
        errors.push(error::qualifier(token, "const"));
    }
    if let Some(token) = &sig.unsafety {
        errors.push(error::qualifier(token, "unsafe"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(error::qualifier(abi, "extern"));
    }
    if sig.asyncness.is_none() && !stacked {
        errors.push(error::not_async(&sig.fn_token));
    }
    let generics = &sig.generics;
    if generics
        .params
        .iter()
        .any(|p| !matches!(p, GenericParam::Lifetime(_)))
    {
        errors.push(error::generic(generics));
    } else if !generics.params.is_empty() {
        errors.push(error::lifetime_param(generics));
    }
    if let Some(clause) = &generics.where_clause {
        errors.push(error::where_clause(clause));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(error::variadic(variadic));
    }

    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        None if sig.variadic.is_none() => {
            errors.push(error::no_parameter(sig.paren_token.span.join()))
        }
        None => {}
        Some(FnArg::Receiver(receiver)) => errors.push(error::receiver(receiver)),
        Some(FnArg::Typed(arg)) => {
            match &*arg.pat {
                Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => {}
                Pat::Wild(_) => {}
                pat => errors.push(error::parameter_pattern(pat)),
            }
            parameter_type(&arg.ty, errors);
        }
    }
    for extra in inputs {
        errors.push(error::extra_parameter(extra));
    }

    match &sig.output {
        ReturnType::Default => {
            errors.push(error::missing_return_type(sig.paren_token.span.close()))
        }
        ReturnType::Type(_, ty) if !is_result(ty) => errors.push(error::return_type(ty)),
        ReturnType::Type(..) => {}
    }
}

/// `&mut Cx`, `&mut testkit::Cx` or `&mut ::testkit::Cx`. Whether `Cx` is
/// really testkit's is left to the type checker: the generated code hands the
/// function to the harness as taking a `&mut ::testkit::Cx`, spanned at this
/// type.
fn parameter_type(ty: &Type, errors: &mut Ctxt) {
    let Type::Reference(reference) = ty else {
        return errors.push(error::parameter_type(ty));
    };
    let is_cx = match &*reference.elem {
        Type::Path(path) if path.qself.is_none() => {
            let segments: Vec<String> = path
                .path
                .segments
                .iter()
                .map(|s| match s.arguments {
                    PathArguments::None => s.ident.to_string(),
                    _ => String::new(),
                })
                .collect();
            match segments.as_slice() {
                [cx] => cx == "Cx" && path.path.leading_colon.is_none(),
                [krate, cx] => krate == "testkit" && cx == "Cx",
                _ => false,
            }
        }
        _ => false,
    };
    if !is_cx || reference.mutability.is_none() {
        errors.push(error::parameter_type(ty));
    } else if let Some(lifetime) = &reference.lifetime {
        errors.push(error::parameter_lifetime(lifetime));
    }
}

/// A path ending in `Result`, with no generic arguments or with `<()>` only.
/// Which `Result` it is is left to the type checker, as for `Cx`.
fn is_result(ty: &Type) -> bool {
    let Type::Path(path) = ty else {
        return false;
    };
    if path.qself.is_some() {
        return false;
    }
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    if last.ident != "Result" {
        return false;
    }
    match &last.arguments {
        PathArguments::None => true,
        PathArguments::AngleBracketed(args) => {
            args.args.len() == 1
                && matches!(
                    args.args.first(),
                    Some(GenericArgument::Type(Type::Tuple(unit))) if unit.elems.is_empty()
                )
        }
        PathArguments::Parenthesized(_) => false,
    }
}

/// Attributes that mean the user expects another harness to run the function.
/// Returns whether a test attribute (`#[test]`, `#[tokio::test]`, ...) is
/// among them.
fn attributes(attrs: &[Attribute], errors: &mut Ctxt) -> bool {
    let mut stacked = false;
    for attr in attrs {
        let Some(last) = attr.path().segments.last() else {
            continue;
        };
        if last.ident == "test" {
            stacked = true;
            errors.push(error::stacked_test_attribute(attr));
        } else if attr.path().is_ident("ignore") {
            errors.push(error::ignore_attribute(attr));
        } else if attr.path().is_ident("should_panic") {
            errors.push(error::should_panic_attribute(attr));
        }
    }
    stacked
}
