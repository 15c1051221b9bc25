//! The web UI at `/`, in a real headless Chromium against the live pod: it
//! keeps anonymous visitors out, shows the pod and its sandboxes, creates and
//! deletes through the same API the suite checks, and tells the user when the
//! API refuses. Every test leaves screenshots in its artifacts folder.

use conformance_support::{Sandbox, SandboxSpec, SANDBOX};
use testkit::browser::Page;
use testkit::prelude::*;

/// The row of sandbox `name` in the list, as a CSS selector.
fn row(name: &str) -> String {
    format!("#sandbox-list tr[data-sandbox=\"{name}\"]")
}

/// A JavaScript string literal of `s`.
fn js(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Waits until the page has loaded its sandbox list (some rows, or the
/// "no sandboxes" line).
async fn list_loaded(page: &Page) -> testkit::Result {
    page.wait_for(
        "the sandbox list to load",
        "document.querySelector('#sandbox-list tr') !== null \
         || !document.querySelector('#sandbox-empty').hidden",
    )
    .await?;
    Ok(())
}

/// Waits until the row of `name` is listed, clicking Refresh while it is not.
async fn wait_listed(page: &Page, name: &str, listed: bool) -> testkit::Result {
    let what = if listed {
        format!("{name} to be listed")
    } else {
        format!("{name} to leave the list")
    };
    let want = if listed { "" } else { "!" };
    page.wait_for(
        &what,
        &format!(
            "(() => {{ if ({want}document.querySelector({row})) return true; \
               document.querySelector('#refresh').click(); return false; }})()",
            row = js(&row(name))
        ),
    )
    .await?;
    Ok(())
}

/// An anonymous visitor gets the sign-in form, not the sandboxes, and the
/// API refuses the page's own requests without the session.
#[testkit::test(timeout = "2m")]
async fn the_ui_refuses_an_unauthenticated_visitor(cx: &mut Cx) -> testkit::Result {
    let page = cx.browser_signed_out().await?;
    let view: String = page.eval("document.body.dataset.view").await?;
    ensure!(
        view == "sign-in",
        "an anonymous visitor got the `{view}` view"
    );
    let list_shown: bool = page
        .eval("document.querySelector('#app').offsetParent !== null")
        .await?;
    ensure!(
        !list_shown,
        "the sandbox list is shown to an anonymous visitor"
    );
    let status: u16 = page
        .eval("fetch('/api/sandboxes').then((r) => r.status)")
        .await?;
    ensure!(
        status == 401,
        "the API answered an anonymous page with {status}, expected 401"
    );
    page.screenshot("signed-out").await?;
    // A wrong token is refused, and the form says so.
    page.fill("#sign-in-token", "not-the-token").await?;
    page.click("#sign-in-submit").await?;
    let error = page
        .wait_for(
            "the sign-in error",
            "document.querySelector('#sign-in-error')?.textContent",
        )
        .await?;
    let view: String = page.eval("document.body.dataset.view").await?;
    ensure!(
        view == "sign-in",
        "a wrong token got the `{view}` view ({error})"
    );
    page.screenshot("wrong-token").await?;
    Ok(())
}

/// Signed in, the page shows the pod's name and lists its sandboxes with
/// their state.
#[testkit::test(timeout = "2m")]
async fn the_ui_renders_the_pod_name_and_its_sandboxes(cx: &mut Cx) -> testkit::Result {
    let first = Sandbox::create(cx, SandboxSpec::new()).await?;
    let second = Sandbox::create(cx, SandboxSpec::new()).await?;
    let page = cx.browser().await?;
    list_loaded(&page).await?;
    let view: String = page.eval("document.body.dataset.view").await?;
    ensure!(view == "app", "a signed-in visitor got the `{view}` view");
    let pod_name = page.text("#pod-name").await?;
    ensure!(
        pod_name == cx.pod()?.name(),
        "the page names the pod {pod_name:?}, the pod is {:?}",
        cx.pod()?.name()
    );
    for sb in [&first, &second] {
        wait_listed(&page, sb.name(), true).await?;
        let state = page.text(&format!("{} td.state", row(sb.name()))).await?;
        let api = Sandbox::get(cx, sb.name()).await?.state;
        ensure!(
            state == api,
            "the page shows {} as {state:?}, the API says {api:?}",
            sb.name()
        );
    }
    page.screenshot("sandboxes").await?;
    Ok(())
}

/// A sandbox created with the page's form exists through the API, and is
/// tracked and cleaned up like any other.
#[testkit::test(timeout = "2m")]
async fn a_sandbox_created_in_the_ui_appears_through_the_api(cx: &mut Cx) -> testkit::Result {
    let page = cx.browser().await?;
    list_loaded(&page).await?;
    let name = cx.unique_name();
    cx.create(SANDBOX, &name, async {
        page.fill("#create-name", &name).await?;
        page.click("#create-submit").await?;
        wait_listed(&page, &name, true).await
    })
    .await?;
    let info = Sandbox::get(cx, &name).await?;
    ensure!(info.name == name, "the API answered {info:?} for {name}");
    let error = page.text("#error").await?;
    ensure!(error.is_empty(), "the page shows an error: {error}");
    page.screenshot("created").await?;
    Ok(())
}

/// A sandbox deleted through the API leaves the page's list.
#[testkit::test(timeout = "2m")]
async fn a_sandbox_deleted_through_the_api_disappears_from_the_ui(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let page = cx.browser().await?;
    wait_listed(&page, sb.name(), true).await?;
    page.screenshot("before-delete").await?;
    Sandbox::delete(cx, sb.name()).await?;
    Sandbox::wait_gone(cx, sb.name()).await?;
    cx.forget(SANDBOX, sb.name());
    wait_listed(&page, sb.name(), false).await?;
    page.screenshot("after-delete").await?;
    Ok(())
}

/// When the API refuses (creating a name that is taken), the page shows
/// the API's error code and message to the user.
#[testkit::test(timeout = "2m")]
async fn an_error_from_the_api_is_shown_to_the_user(cx: &mut Cx) -> testkit::Result {
    let taken = Sandbox::create(cx, SandboxSpec::new()).await?;
    // What the API itself answers to the same request.
    let pod = cx.pod()?;
    let answer = pod
        .client()
        .post(pod.url("/api/sandboxes"))
        .json(&serde_json::json!({ "name": taken.name() }))
        .send()
        .await?;
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await?;
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        status == 409 && !code.is_empty(),
        "creating a taken name answered {status} {body}, expected 409 with an error code"
    );
    let page = cx.browser().await?;
    list_loaded(&page).await?;
    page.fill("#create-name", taken.name()).await?;
    page.click("#create-submit").await?;
    let shown = page
        .wait_for(
            "the error to be shown",
            "(() => { const e = document.querySelector('#error'); \
               return !e.hidden && e.offsetParent !== null && e.textContent; })()",
        )
        .await?;
    let shown = shown.as_str().unwrap_or_default();
    ensure!(
        shown.starts_with(&format!("{code}: ")),
        "the page shows {shown:?}, expected the API's `{code}: …`"
    );
    page.screenshot("api-error").await?;
    // The list still holds the one sandbox of that name.
    let rows: usize = page
        .eval(&format!(
            "document.querySelectorAll({}).length",
            js(&row(taken.name()))
        ))
        .await?;
    ensure!(rows == 1, "{rows} rows for {}", taken.name());
    Ok(())
}

/// Loading the page, listing, refreshing and opening a sandbox's files log
/// no error to the browser console.
#[testkit::test(timeout = "2m")]
async fn the_page_has_no_console_errors(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let page = cx.browser().await?;
    wait_listed(&page, sb.name(), true).await?;
    page.click("#refresh").await?;
    page.click(&format!("{} button.show-files", row(sb.name())))
        .await?;
    page.wait_for(
        "the files panel",
        &format!(
            "!document.querySelector('#files').hidden \
             && document.querySelector('#files-sandbox').textContent === {}",
            js(sb.name())
        ),
    )
    .await?;
    page.screenshot("files").await?;
    let errors = page.console_errors();
    ensure!(
        errors.is_empty(),
        "the console logged {} error(s): {}",
        errors.len(),
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(())
}

/// A file written into a sandbox through the API is listed in its file
/// panel, and clicking it shows its content.
#[testkit::test(timeout = "2m")]
async fn a_sandbox_file_is_shown_in_the_ui(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "notes.txt", b"written through the API\n")
        .await?;
    let page = cx.browser().await?;
    wait_listed(&page, sb.name(), true).await?;
    page.click(&format!("{} button.show-files", row(sb.name())))
        .await?;
    let item = "#file-list li[data-path=\"notes.txt\"]";
    page.wait_for(
        "notes.txt to be listed",
        &format!("document.querySelector({}) !== null", js(item)),
    )
    .await?;
    page.click(item).await?;
    let shown = page
        .wait_for(
            "the file's content",
            "document.querySelector('#file-view').textContent",
        )
        .await?;
    ensure!(
        shown == "written through the API\n",
        "the page shows {shown} for notes.txt"
    );
    page.screenshot("file").await?;
    Ok(())
}

testkit::main!();
