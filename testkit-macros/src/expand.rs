//! Glues parsing and validation together and writes the registration.
//!
//! The function is re-emitted exactly as written, errors or not, so IDEs keep
//! working while the attribute is wrong. What is generated per test is kept
//! small (a suite has hundreds): one wrapper function and one
//! `inventory::submit!`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{FnArg, LitStr, ReturnType, Type};

use crate::error::Ctxt;
use crate::parse::{self, Options, TestFn};
use crate::validate;

pub(crate) fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Ctxt::default();
    let options = parse::options(args, &mut errors);
    let registration = errors.ok(TestFn::parse(item.clone())).map(|test| {
        let description = validate::test(&test, &options, &mut errors);
        register(&test, &options, &description)
    });
    match errors.finish() {
        Ok(()) => quote!(#item #registration),
        // The function as written, so that it still resolves in IDEs, and
        // every error next to it.
        Err(error) => {
            let mut tokens = item;
            tokens.extend(error.into_compile_error());
            tokens
        }
    }
}

fn register(test: &TestFn, options: &Options, description: &str) -> TokenStream {
    let sig = &test.sig;
    let ident = &sig.ident;
    let name = LitStr::new(&ident.unraw().to_string(), ident.span());
    let description = LitStr::new(description, Span::call_site());
    let line = quote_spanned!(ident.span()=> ::core::line!());

    // Spanned at the user's tokens, so that a `Cx` or `Result` that is not
    // testkit's is reported on the parameter or return type.
    let cx = match sig.inputs.first() {
        Some(FnArg::Typed(arg)) => quote_spanned!(type_span(&arg.ty)=> cx),
        _ => quote!(cx),
    };
    let boxed = match &sig.output {
        ReturnType::Type(_, ty) => {
            quote_spanned!(type_span(ty)=> ::std::boxed::Box::pin(#ident(#cx)))
        }
        ReturnType::Default => quote!(::std::boxed::Box::pin(#ident(#cx))),
    };

    // Most tests set no option: they share one static, so that what the
    // compiler evaluates per test stays small.
    let test_options = if options.is_empty() {
        quote!(::testkit::__private::NO_OPTIONS)
    } else {
        let ignore = option(options.ignore.as_ref());
        let known_issue = option(options.known_issue.as_ref());
        let fails_with = option(options.fails_with.as_ref().map(|(_, text)| text));
        let timeout_ms = match options.timeout_ms {
            Some(ms) => quote!(::core::option::Option::Some(#ms)),
            None => quote!(::core::option::Option::None),
        };
        let requires = options.requires.as_deref().unwrap_or_default();
        quote! {
            ::testkit::__private::TestOptions {
                ignore: #ignore,
                timeout_ms: #timeout_ms,
                known_issue: #known_issue,
                fails_with: #fails_with,
                requires: &[#(#requires),*],
            }
        }
    };

    quote! {
        const _: () = {
            fn __testkit_run(cx: &mut ::testkit::Cx) -> ::testkit::__private::BoxFuture<'_> {
                #boxed
            }
            ::testkit::__private::inventory::submit! {
                ::testkit::__private::TestDef {
                    module_path: ::core::module_path!(),
                    name: #name,
                    description: #description,
                    file: ::core::file!(),
                    line: #line,
                    options: &#test_options,
                    run: __testkit_run,
                }
            }
        };
    }
}

/// The name in `&mut testkit::Cx` or `std::io::Result<()>` (`Cx`, `Result`):
/// a span covering the whole type needs nightly, and the name is what is wrong.
fn type_span(ty: &Type) -> Span {
    match ty {
        Type::Reference(reference) => type_span(&reference.elem),
        Type::Path(path) => match path.path.segments.last() {
            Some(last) => last.ident.span(),
            None => Span::call_site(),
        },
        _ => syn::spanned::Spanned::span(ty),
    }
}

fn option(value: Option<&LitStr>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}
