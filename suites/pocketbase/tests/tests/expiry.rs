//! A credential that expires during the run is renewed.
//!
//! Alone in its binary: it shortens the superusers' token lifetime, which
//! every process of the run shares. The lifetime is baked into a token when
//! it is issued, so the test shortens it only for the one login it makes and
//! restores it at once; the short token it leaves in the run's session is
//! renewed by `pod.send` in whichever process finds it expired, and the test
//! logs in again at the end so that later processes start with a long one.

use std::time::Duration;

use pocketbase_support::call;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use testkit::pod::Pod;
use testkit::prelude::*;

const SUPERUSERS: &str = "/api/collections/_superusers";
const PROBE: &str = "/api/collections?perPage=1";
/// PocketBase's shortest token lifetime, in seconds.
const SHORT: u64 = 10;

/// After the superusers' token lifetime is cut to 10 s and the run logs in
/// again, the token expires (401 to a request that does not renew), and a
/// request through `pod.send` still succeeds, with a new credential.
///
/// It holds the pod to itself: a test of another process that picked the
/// short token up from the run's session would renew it when it expires,
/// and the client here would then never see it refused.
#[testkit::test(requires = ["collections"], timeout = "3m", exclusive)]
async fn expired_token_is_renewed(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let original = duration(&call(pod, Method::GET, SUPERUSERS, None).await?)?;
    let outcome = expire_and_renew(cx, pod, original).await;
    // Whatever happened: the lifetime as it was, and a token that has it.
    let restored = set_duration(pod, original).await;
    let renewed = pod.renew().await;
    outcome?;
    restored.context("restoring the superusers' token lifetime")?;
    renewed.context("logging in again with the restored lifetime")?;
    let now = duration(&call(pod, Method::GET, SUPERUSERS, None).await?)?;
    ensure!(
        now == original,
        "the token lifetime is {now} s, expected {original} s again"
    );
    Ok(())
}

async fn expire_and_renew(cx: &Cx, pod: &Pod, original: u64) -> testkit::Result {
    let set = set_duration(pod, SHORT).await?;
    ensure!(
        set == SHORT,
        "PATCH {SUPERUSERS} answered a lifetime of {set} s, expected {SHORT}"
    );
    let before = pod.credential_generation();
    pod.renew().await?;
    let short = pod.credential_generation();
    ensure!(short > before, "renew() left the generation at {short}");
    // Only the login above gets the short lifetime.
    set_duration(pod, original).await?;
    cx.log(format!("generation {short} holds a {SHORT} s token"));

    // The pod's client as it is now holds the short token and never renews.
    let client = pod.client();
    let wait = Wait::new()
        .inactivity(Duration::from_secs(6 * SHORT))
        .ceiling(Duration::from_secs(9 * SHORT))
        .interval(Duration::from_millis(500));
    testkit::wait::until(cx, "the short token to expire", wait, || {
        let client = client.clone();
        async move {
            let status = client.get(pod.url(PROBE)).send().await?.status();
            Ok(if status == StatusCode::UNAUTHORIZED {
                Check::Done(())
            } else {
                Check::pending(format!("GET {PROBE} answered {status}"))
            })
        }
    })
    .await?;

    let answer = pod.send(|c| c.get(pod.url(PROBE))).await?;
    let status = answer.status();
    ensure!(
        status == StatusCode::OK,
        "after the token expired, GET {PROBE} through pod.send answered {status}, expected 200"
    );
    let after = pod.credential_generation();
    ensure!(
        after > short,
        "pod.send succeeded but the credential generation is still {after}: nothing was renewed"
    );
    Ok(())
}

/// Sets the superusers' `authToken.duration`; answers the one now set.
async fn set_duration(pod: &Pod, seconds: u64) -> testkit::Result<u64> {
    let body = json!({"authToken": {"duration": seconds}});
    duration(&call(pod, Method::PATCH, SUPERUSERS, Some(&body)).await?)
}

fn duration(collection: &Value) -> testkit::Result<u64> {
    collection["authToken"]["duration"]
        .as_u64()
        .with_context(|| format!("{SUPERUSERS} has no authToken.duration: {collection}"))
}

testkit::main!();
