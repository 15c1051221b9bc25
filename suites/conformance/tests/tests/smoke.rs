//! Smoke: the pod answers, authenticates, advertises its capabilities, and
//! does the basic create / get / list / delete of sandboxes.

use std::time::Duration;

use conformance_support::{expect_error, ListQuery, Sandbox, SandboxSpec};
use testkit::prelude::*;

/// A client with no credentials at all.
fn anonymous() -> testkit::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// `GET /api/health` answers `ok` with the pod's name, without credentials.
#[testkit::test]
async fn health_answers_without_credentials(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let resp = anonymous()?.get(pod.url("/api/health")).send().await?;
    ensure!(resp.status() == 200, "health answered {}", resp.status());
    let body: serde_json::Value = resp.json().await?;
    ensure!(body["status"] == "ok", "health status is not ok: {body}");
    ensure!(
        body["name"] == pod.name(),
        "health names the pod {}, the handle says {}",
        body["name"],
        pod.name()
    );
    Ok(())
}

/// The API refuses a request without credentials with 401 `unauthorized`.
#[testkit::test]
async fn api_refuses_requests_without_credentials(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let resp = anonymous()?.get(pod.url("/api/sandboxes")).send().await?;
    let status = resp.status().as_u16();
    let body: serde_json::Value = resp.json().await?;
    ensure!(status == 401, "an anonymous list answered {status}: {body}");
    ensure!(
        body["error"]["code"] == "unauthorized",
        "unexpected error body: {body}"
    );
    Ok(())
}

/// The API refuses a wrong bearer token with 401 `unauthorized`.
#[testkit::test]
async fn api_refuses_a_wrong_token(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let resp = anonymous()?
        .get(pod.url("/api/capabilities"))
        .bearer_auth("not-the-token")
        .send()
        .await?;
    let status = resp.status().as_u16();
    let body: serde_json::Value = resp.json().await?;
    ensure!(status == 401, "a wrong token answered {status}: {body}");
    ensure!(
        body["error"]["code"] == "unauthorized",
        "unexpected error body: {body}"
    );
    Ok(())
}

/// `GET /api/capabilities` lists exec, files, processes and signals, as the
/// pod handle's connection saw them.
#[testkit::test]
async fn capabilities_lists_every_feature(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let body: serde_json::Value = pod
        .client()
        .get(pod.url("/api/capabilities"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let caps: Vec<&str> = body["capabilities"]
        .as_array()
        .context("`capabilities` is not an array")?
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    for want in ["exec", "files", "processes", "signals"] {
        ensure!(
            caps.contains(&want),
            "capability `{want}` missing from {caps:?}"
        );
        ensure!(
            pod.has_capability(want),
            "the connection did not record `{want}`"
        );
    }
    ensure!(body["limits"].is_object(), "`limits` missing: {body}");
    Ok(())
}

/// Creating a sandbox answers it as ready, with its labels and env.
#[testkit::test]
async fn create_returns_the_sandbox(cx: &mut Cx) -> testkit::Result {
    let spec = SandboxSpec::new().label("team", "qa").env("MODE", "test");
    let sb = Sandbox::create(cx, spec).await?;
    let info = sb.info();
    ensure!(info.state == "ready", "a new sandbox is {}", info.state);
    ensure!(
        info.labels.get("team").map(String::as_str) == Some("qa"),
        "labels: {:?}",
        info.labels
    );
    ensure!(
        info.env.get("MODE").map(String::as_str) == Some("test"),
        "env: {:?}",
        info.env
    );
    ensure!(info.created_at > 0, "created_at is 0");
    Ok(())
}

/// A created sandbox can be read back by name with what it was created with.
#[testkit::test]
async fn get_returns_what_create_returned(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().label("k", "v")).await?;
    let got = Sandbox::get(cx, sb.name()).await?;
    ensure!(
        &got == sb.info(),
        "get answered {got:?}, create answered {:?}",
        sb.info()
    );
    Ok(())
}

/// A created sandbox is listed by name and is gone after delete.
#[testkit::test]
async fn create_list_delete(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let names = Sandbox::list_names(cx, &ListQuery::new().prefix(sb.name())).await?;
    ensure!(names == [sb.name()], "listing by its name gave {names:?}");
    sb.delete_and_wait(cx).await?;
    let names = Sandbox::list_names(cx, &ListQuery::new().prefix(sb.name())).await?;
    ensure!(names.is_empty(), "still listed after delete: {names:?}");
    Ok(())
}

/// Getting a sandbox that does not exist answers 404 `not_found`.
#[testkit::test]
async fn get_unknown_sandbox_is_404(cx: &mut Cx) -> testkit::Result {
    // Named like the test's own, never created.
    let name = cx.unique_name();
    let e = expect_error(Sandbox::get(cx, &name).await, 404, "not_found")?;
    ensure!(
        e.message.contains(&name),
        "the message does not name the sandbox: {e}"
    );
    Ok(())
}

/// Creating a sandbox under a name in use answers 409 `already_exists`.
#[testkit::test]
async fn duplicate_name_is_refused(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    // The name is tracked already: a wrongly accepted second create changes nothing to clean up.
    let again = conformance_support::request(
        cx,
        reqwest::Method::POST,
        "/api/sandboxes",
        conformance_support::Body::Json(serde_json::json!({ "name": sb.name() })),
        Duration::from_secs(30),
    )
    .await?;
    ensure!(
        again.0 == 409,
        "a second create of {} answered {}",
        sb.name(),
        again.0
    );
    let body: serde_json::Value = serde_json::from_slice(&again.1)?;
    ensure!(
        body["error"]["code"] == "already_exists",
        "unexpected error body: {body}"
    );
    Ok(())
}

/// A name that is not a DNS label is refused with 400 `invalid_name`.
#[testkit::test]
async fn invalid_name_is_refused(cx: &mut Cx) -> testkit::Result {
    for bad in [
        format!("{}-", cx.unique_name()),
        format!("{}_x", cx.unique_name()),
        "UPPER".to_owned(),
    ] {
        let result = conformance_support::request(
            cx,
            reqwest::Method::POST,
            "/api/sandboxes",
            conformance_support::Body::Json(serde_json::json!({ "name": bad })),
            Duration::from_secs(30),
        )
        .await?;
        if result.0.is_success() {
            // Should never exist; take it away so it does not outlive the test.
            let _ = Sandbox::delete(cx, &bad).await;
            bail!("the invalid name {bad:?} was accepted ({})", result.0);
        }
        let body: serde_json::Value = serde_json::from_slice(&result.1)?;
        ensure!(
            result.0 == 400 && body["error"]["code"] == "invalid_name",
            "{bad:?} answered {}: {body}",
            result.0
        );
    }
    Ok(())
}

/// Every error answer has the JSON shape `{"error": {"code", "message"}}`,
/// even for a route that does not exist.
#[testkit::test]
async fn unknown_route_answers_the_json_error_shape(cx: &mut Cx) -> testkit::Result {
    let (status, body) = conformance_support::request(
        cx,
        reqwest::Method::GET,
        "/api/no-such-route",
        conformance_support::Body::Empty,
        Duration::from_secs(30),
    )
    .await?;
    let text = String::from_utf8_lossy(&body);
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?;
    ensure!(
        status == 404 && v["error"]["code"] == "not_found" && v["error"]["message"].is_string(),
        "expected 404 with {{\"error\": {{\"code\": \"not_found\", \"message\": ..}}}}, got {status}: {text}"
    );
    Ok(())
}

testkit::main!();
