//! Authentication: what the handle holds, and what PocketBase refuses.

use pocketbase_support::request;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use testkit::prelude::*;

/// The listing every other test makes; superusers only.
const PROBE: &str = "/api/collections?perPage=1";

/// A request without a credential is refused with 401.
#[testkit::test(requires = ["collections"])]
async fn unauthenticated_refused(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    // A client of its own: the pod's carries the credential.
    let answer = reqwest::Client::new().get(pod.url(PROBE)).send().await?;
    ensure!(
        answer.status() == StatusCode::UNAUTHORIZED,
        "GET {PROBE} without a credential answered {}, expected 401",
        answer.status()
    );
    Ok(())
}

/// A garbage token is refused with the same 401 as no token at all.
#[testkit::test(requires = ["collections"])]
async fn garbage_token_refused(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let client = reqwest::Client::new();
    let none: Value = client.get(pod.url(PROBE)).send().await?.json().await?;
    let answer = client
        .get(pod.url(PROBE))
        .header("Authorization", "not-a-token")
        .send()
        .await?;
    let status = answer.status();
    let garbage: Value = answer.json().await?;
    ensure!(
        status == StatusCode::UNAUTHORIZED && garbage == none,
        "a garbage token answered {status} {garbage}; without a token: {none}"
    );
    Ok(())
}

/// The handle's credentials are a user and a password, not a token: the
/// user is the configured superuser, and the password logs in.
#[testkit::test(requires = ["collections"])]
async fn handle_holds_user_and_password(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let handle = pod.handle();
    ensure!(
        handle.field("token").is_none() && handle.token().is_empty(),
        "the handle carries a token; PocketBase's handle should hold a user and a password"
    );
    let user = handle.field("user").context("the handle has no `user`")?;
    ensure!(
        user == "admin@testkit.test",
        "the handle's user is {user:?}, expected admin@testkit.test (testkit.toml [pod] fields)"
    );
    let password = handle
        .field("password")
        .context("the handle has no `password`")?;
    // PocketBase takes 8 to 71 characters.
    ensure!(
        (8..=71).contains(&password.len()),
        "the handle's password has {} characters; PocketBase takes 8 to 71",
        password.len()
    );
    let answer = reqwest::Client::new()
        .post(pod.url("/api/collections/_superusers/auth-with-password"))
        .json(&json!({"identity": user, "password": password}))
        .send()
        .await?;
    let status = answer.status();
    let body: Value = answer.json().await?;
    ensure!(
        status == StatusCode::OK
            && body["record"]["email"] == json!(user)
            && body["token"].as_str().is_some_and(|t| !t.is_empty()),
        "logging in with the handle's user and password answered {status}: {}",
        body["message"]
    );
    Ok(())
}

/// A wrong method on an existing API route should answer 405 Method Not
/// Allowed; PocketBase answers 404 "File not found." instead.
#[testkit::test(
    requires = ["collections"],
    known_issue = "PB-1",
    fails_with = "answered 404 \"File not found.\""
)]
async fn wrong_method_is_405(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let path = "/api/collections/_superusers/auth-refresh";
    // The route exists for POST.
    let (post, _) = request(pod, Method::POST, path, None).await?;
    ensure!(post == 200, "POST {path} answered {post}, expected 200");
    let (get, body) = request(pod, Method::GET, path, None).await?;
    ensure!(
        get == 405,
        "GET {path} answered {get} {}, expected 405 Method Not Allowed",
        body["message"]
    );
    Ok(())
}

testkit::main!();
