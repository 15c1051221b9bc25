//! Glues parsing and validation together and writes the test and its
//! registration.
//!
//! While the attribute is wrong, the function is re-emitted exactly as
//! written, next to the errors, so IDEs keep working. Once it is right, the
//! `async fn` becomes a plain function of the same name and parameter that
//! returns its body as a boxed `async move` block, as `#[tokio::test]` and
//! `async-trait` rewrite theirs: the harness calls it as it is, with no
//! wrapper, and the compiler has no opaque `impl Future` type per test to
//! check (bench/README.md has what that saved a 200-test suite). What is
//! generated per test is kept that small (a suite has hundreds):
//! the function and one `inventory::submit!`.

use proc_macro2::{Group, Ident, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{FnArg, LitStr, ReturnType, Signature, Type};

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
        Ok(()) => registration.unwrap_or_default(),
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
    let TestFn {
        attrs,
        vis,
        sig,
        body,
    } = test;
    let ident = &sig.ident;
    let name = LitStr::new(&ident.unraw().to_string(), ident.span());
    let description = LitStr::new(description, Span::call_site());
    let line = quote_spanned!(ident.span()=> ::core::line!());
    let inputs = &sig.inputs;
    let boxed = boxed_body(sig, body);
    let run = run_ident(sig);
    let test_options = test_options(options);

    quote! {
        #(#attrs)*
        #vis fn #ident(#inputs) -> ::testkit::__private::BoxFuture<'_> {
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
                run: #run,
            }
        }
    }
}

/// The body as the boxed `async move` block the rewritten function returns.
fn boxed_body(sig: &Signature, body: &Group) -> TokenStream {
    // The declared type stays the type of the body, so that a `Result` that
    // is not testkit's is reported on it, where the coercion to the
    // harness's future fails.
    let ret = Ident::new("__testkit_ret", Span::mixed_site());
    let (ret_ty, boxed_span) = match &sig.output {
        ReturnType::Type(_, ty) => (quote!(#ty), type_span(ty)),
        ReturnType::Default => (quote!(()), Span::call_site()),
    };
    quote_spanned! {boxed_span=>
        ::std::boxed::Box::pin(async move {
            // A body that always returns (`bail!`, `todo!`) diverges here,
            // and its value is unreachable: as `#[tokio::test]` does, say
            // nothing of either.
            #[allow(clippy::diverging_sub_expression)]
            let #ret: #ret_ty = #body;
            #[allow(unreachable_code)]
            #ret
        })
    }
}

/// The function as the harness's `run`, named at the parameter's type,
/// so that a `Cx` that is not testkit's is reported there.
fn run_ident(sig: &Signature) -> Ident {
    let mut run = sig.ident.clone();
    if let Some(FnArg::Typed(arg)) = sig.inputs.first() {
        run.set_span(type_span(&arg.ty));
    }
    run
}

/// The test's `TestOptions`.
fn test_options(options: &Options) -> TokenStream {
    // Most tests set no option: they share one static, so that what the
    // compiler evaluates per test stays small.
    if options.is_empty() {
        return quote!(::testkit::__private::NO_OPTIONS);
    }
    let ignore = option(options.ignore.as_ref());
    let known_issue = option(options.known_issue.as_ref());
    let fails_with = option(options.fails_with.as_ref().map(|(_, text)| text));
    let trace = option(options.trace.as_ref());
    let timeout_ms = match options.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let intermittent = options.is_intermittent();
    let exclusive = options.exclusive.is_some();
    let requires = options.requires.as_deref().unwrap_or_default();
    quote! {
        ::testkit::__private::TestOptions {
            ignore: #ignore,
            timeout_ms: #timeout_ms,
            known_issue: #known_issue,
            fails_with: #fails_with,
            intermittent: #intermittent,
            requires: &[#(#requires),*],
            trace: #trace,
            exclusive: #exclusive,
        }
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
