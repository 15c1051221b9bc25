//! What the cluster tests share: sandboxes created through the gateway,
//! and the gateway's view of its workers.

#![allow(dead_code)] // each test binary uses a part

use std::time::Duration;

use serde_json::{json, Value};
use testkit::prelude::*;

/// How long one request may take: a frozen or cut-off node never answers.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The gateway's documented bound: a worker gone is reported down, and its
/// sandboxes lost, within 1 s. Waits allow twice that.
pub const DETECTION: Duration = Duration::from_secs(2);

/// Creates a sandbox through the gateway (the pod's base URL), tracked
/// from before the request; the gateway's answer, naming its worker.
pub async fn create_sandbox(cx: &Cx) -> testkit::Result<Value> {
    let pod = cx.pod()?;
    let name = cx.unique_name();
    let request = async {
        let resp = pod
            .client()
            .post(pod.url("/api/sandboxes"))
            .timeout(REQUEST_TIMEOUT)
            .json(&json!({ "name": name }))
            .send()
            .await?;
        let status = resp.status();
        let body: Value = resp.json().await?;
        ensure!(status == 201, "creating {name} answered {status}: {body}");
        Ok(body)
    };
    cx.create("sandbox", &name, request).await
}

/// The worker a sandbox answer names.
pub fn worker_of(sandbox: &Value) -> testkit::Result<String> {
    sandbox["worker"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format_err!("the gateway's answer names no worker: {sandbox}"))
}

/// `GET path` on the gateway: status and JSON body.
pub async fn get(cx: &Cx, path: &str) -> testkit::Result<(u16, Value)> {
    let pod = cx.pod()?;
    let resp = pod
        .client()
        .get(pod.url(path))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await?))
}

/// The state (`live` or `down`) the gateway gives the worker `name`.
pub async fn worker_state(cx: &Cx, name: &str) -> testkit::Result<String> {
    let (status, body) = get(cx, "/api/cluster").await?;
    ensure!(status == 200, "GET /api/cluster answered {status}: {body}");
    body["workers"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["name"] == name))
        .and_then(|w| w["state"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| format_err!("GET /api/cluster does not list worker {name}: {body}"))
}

/// Waits until the gateway gives worker `name` the state `state`, for at
/// most `within`.
pub async fn wait_worker_state(
    cx: &Cx,
    name: &str,
    state: &str,
    within: Duration,
) -> testkit::Result {
    let what = format!("worker {name} {state} on the gateway");
    let wait = Wait::new()
        .ceiling(within)
        .inactivity(within)
        .interval(Duration::from_millis(50));
    testkit::wait::until(cx, &what, wait, || async {
        Ok(match worker_state(cx, name).await {
            Ok(s) if s == state => Check::Done(()),
            Ok(s) => Check::pending(format!("it is {s}")),
            Err(e) => Check::pending(e),
        })
    })
    .await?;
    Ok(())
}
