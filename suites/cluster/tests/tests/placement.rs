//! Placement: the gateway spreads sandboxes over its workers, serves them
//! through its own API, and each node answers on a port of its own. These
//! tests share the pod, and run beside each other.

mod support;

use std::time::Duration;

use support::{create_sandbox, get, worker_of, worker_state, REQUEST_TIMEOUT};
use testkit::prelude::*;

/// Every node of the pod answers its health check on its own port.
#[testkit::test]
async fn every_node_answers_on_its_own_port(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let nodes = pod.nodes();
    ensure!(
        nodes == ["gateway", "worker-1", "worker-2"],
        "the pod's nodes are {nodes:?}"
    );
    let mut urls = Vec::new();
    for name in nodes {
        let node = pod.node(name)?;
        let resp = node
            .client()
            .get(node.url("/api/health"))
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await?;
        ensure!(resp.status() == 200, "{name} answered {}", resp.status());
        urls.push(node.base_url().to_owned());
    }
    urls.sort();
    urls.dedup();
    ensure!(urls.len() == 3, "two nodes share a port: {urls:?}");
    Ok(())
}

/// The gateway places new sandboxes on both workers, and says which.
#[testkit::test]
async fn new_sandboxes_are_spread_over_both_workers(cx: &mut Cx) -> testkit::Result {
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(worker_of(&create_sandbox(cx).await?)?);
    }
    for w in ["worker-1", "worker-2"] {
        ensure!(
            workers.iter().any(|x| x == w),
            "no sandbox was placed on {w}: {workers:?}"
        );
    }
    Ok(())
}

/// A sandbox created through the gateway is the worker's: the worker
/// itself lists it, and the gateway serves it.
#[testkit::test]
async fn a_sandbox_lives_on_the_worker_the_gateway_names(cx: &mut Cx) -> testkit::Result {
    let sandbox = create_sandbox(cx).await?;
    let name = sandbox["name"].as_str().unwrap_or_default().to_owned();
    let worker = worker_of(&sandbox)?;
    let pod = cx.pod()?;
    let node = pod.node(&worker)?;
    let resp = node
        .client()
        .get(node.url(&format!("/api/sandboxes/{name}")))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await?;
    ensure!(
        resp.status() == 200,
        "{worker} does not hold {name}: {}",
        resp.status()
    );
    let (status, body) = get(cx, &format!("/api/sandboxes/{name}")).await?;
    ensure!(
        status == 200 && body["state"] == "ready",
        "the gateway serves {name} as {status} {body}"
    );
    Ok(())
}

/// A command run through the gateway runs in the sandbox on its worker.
#[testkit::test]
async fn exec_is_forwarded_to_the_sandboxs_worker(cx: &mut Cx) -> testkit::Result {
    let sandbox = create_sandbox(cx).await?;
    let name = sandbox["name"].as_str().unwrap_or_default().to_owned();
    let pod = cx.pod()?;
    let resp = pod
        .client()
        .post(pod.url(&format!("/api/sandboxes/{name}/exec")))
        .timeout(Duration::from_secs(30))
        .json(&serde_json::json!({ "argv": ["echo", "hello from the worker"] }))
        .send()
        .await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await?;
    ensure!(status == 200, "exec answered {status}: {body}");
    ensure!(
        body["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("hello from the worker"),
        "exec's output: {body}"
    );
    Ok(())
}

/// With nothing wrong, the gateway calls both workers live.
#[testkit::test]
async fn both_workers_are_live(cx: &mut Cx) -> testkit::Result {
    for w in ["worker-1", "worker-2"] {
        let state = worker_state(cx, w).await?;
        ensure!(state == "live", "{w} is {state}");
    }
    Ok(())
}

testkit::main!();
