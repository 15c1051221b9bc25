//! Faults: a worker stopped, frozen or cut off, the gateway restarted, the
//! nodes partitioned by each shape, and a register checked linearizable
//! under a partition and a lossy link. Each test has the pod to itself
//! (`exclusive`), and every fault it injects is undone, and proven undone,
//! when it ends.

mod support;

use std::time::{Duration, Instant};

use support::{create_sandbox, get, wait_worker_state, worker_of, DETECTION, REQUEST_TIMEOUT};
use testkit::prelude::*;
use testkit::wait::{Check, Wait};

/// Sandboxes until one lands on `worker`; all of them are the test's.
/// The gateway places only on a worker it sees live: after an earlier
/// test's fault on it was undone, its heartbeat may not have come yet.
async fn sandbox_on(cx: &Cx, worker: &str) -> testkit::Result<String> {
    wait_worker_state(cx, worker, "live", DETECTION).await?;
    for _ in 0..6 {
        let sandbox = create_sandbox(cx).await?;
        if worker_of(&sandbox)? == worker {
            return Ok(sandbox["name"].as_str().unwrap_or_default().to_owned());
        }
    }
    bail!("six sandboxes and none placed on {worker}")
}

/// Waits until the gateway reports the sandbox `name` in `state`.
async fn wait_sandbox_state(cx: &Cx, name: &str, state: &str) -> testkit::Result<Duration> {
    let started = Instant::now();
    let what = format!("sandbox {name} {state} on the gateway");
    let wait = Wait::new()
        .ceiling(DETECTION)
        .inactivity(DETECTION)
        .interval(Duration::from_millis(50));
    testkit::wait::until(cx, &what, wait, || async {
        let (status, body) = get(cx, &format!("/api/sandboxes/{name}")).await?;
        Ok(match body["state"].as_str() {
            Some(s) if s == state && status == 200 => Check::Done(()),
            _ => Check::pending(format!("{status} {body}")),
        })
    })
    .await?;
    Ok(started.elapsed())
}

/// A stopped worker's sandboxes are reported lost within the gateway's
/// bound, and new sandboxes all go to the other worker.
#[testkit::test(exclusive)]
async fn a_stopped_workers_sandboxes_are_lost_and_new_ones_go_elsewhere(
    cx: &mut Cx,
) -> testkit::Result {
    let on_worker_1 = sandbox_on(cx, "worker-1").await?;
    cx.faults().stop("worker-1").await?;
    let took = wait_sandbox_state(cx, &on_worker_1, "lost").await?;
    cx.log(format!(
        "reported lost {} ms after the stop",
        took.as_millis()
    ));
    for _ in 0..3 {
        let placed = worker_of(&create_sandbox(cx).await?)?;
        ensure!(
            placed == "worker-2",
            "a new sandbox went to {placed}, which is stopped"
        );
    }
    Ok(())
}

/// A frozen worker (its process paused, its connections open and silent)
/// is detected down, and its sandboxes lost.
#[testkit::test(exclusive)]
async fn a_frozen_worker_is_detected(cx: &mut Cx) -> testkit::Result {
    let on_worker_2 = sandbox_on(cx, "worker-2").await?;
    cx.faults().pause("worker-2").await?;
    wait_worker_state(cx, "worker-2", "down", DETECTION).await?;
    wait_sandbox_state(cx, &on_worker_2, "lost").await?;
    Ok(())
}

/// A worker cut off from the gateway is given no new sandboxes, and is
/// taken back once reconnected.
#[testkit::test(exclusive)]
async fn a_worker_cut_off_from_the_gateway_gets_nothing_new_and_rejoins(
    cx: &mut Cx,
) -> testkit::Result {
    cx.faults().cut_off("worker-1", &["gateway"]).await?;
    wait_worker_state(cx, "worker-1", "down", DETECTION).await?;
    // The tests still reach it: only the gateway lost it.
    let pod = cx.pod()?;
    let node = pod.node("worker-1")?;
    let health = node
        .client()
        .get(node.url("/api/health"))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await?;
    ensure!(
        health.status() == 200,
        "worker-1 answers the tests {}",
        health.status()
    );
    for _ in 0..3 {
        let placed = worker_of(&create_sandbox(cx).await?)?;
        ensure!(
            placed == "worker-2",
            "a new sandbox went to {placed}, cut off from the gateway"
        );
    }
    cx.faults().heal().await?;
    wait_worker_state(cx, "worker-1", "live", DETECTION).await?;
    let placed = worker_of(&create_sandbox(cx).await?)?;
    ensure!(
        placed == "worker-1",
        "worker-1 rejoined with fewer sandboxes, yet the next went to {placed}"
    );
    Ok(())
}

/// Each partition shape over the three nodes, seen from the gateway: the
/// workers kept apart from it are down, the others live, and all live
/// again once healed. A ring of three cuts nothing and is refused.
#[testkit::test(exclusive, timeout = "2m")]
async fn each_partition_shape_is_what_the_gateway_sees(cx: &mut Cx) -> testkit::Result {
    use testkit::Partition;
    let Err(ring) = cx.faults().partition(Partition::Ring).await else {
        bail!("a ring of 3 nodes was injected, though it cuts nothing");
    };
    ensure!(format!("{ring:#}").contains("4 nodes or more"), "{ring:#}");
    let nodes: Vec<String> = cx.pod()?.nodes().into_iter().map(str::to_owned).collect();
    for shape in [
        Partition::Bridge {
            via: "worker-1".into(),
        },
        Partition::Minority {
            nodes: vec!["worker-1".into()],
        },
        Partition::RandomHalves { seed: Some(7) },
    ] {
        let (_, apart) = shape.draw(&nodes)?;
        let cut = |w: &str| {
            apart
                .iter()
                .any(|[a, b]| (a == "gateway" && b == w) || (b == "gateway" && a == w))
        };
        cx.log(format!("{}: apart {apart:?}", shape.describe()));
        cx.faults().partition(shape.clone()).await?;
        for w in ["worker-1", "worker-2"].into_iter().filter(|w| cut(w)) {
            wait_worker_state(cx, w, "down", DETECTION).await?;
        }
        for w in ["worker-1", "worker-2"].into_iter().filter(|w| !cut(w)) {
            let state = support::worker_state(cx, w).await?;
            ensure!(
                state == "live",
                "{}: {w} is not kept apart from the gateway, yet {state}",
                shape.describe()
            );
        }
        cx.faults().heal().await?;
        for w in ["worker-1", "worker-2"] {
            wait_worker_state(cx, w, "live", DETECTION).await?;
        }
    }
    Ok(())
}

/// The gateway restarted keeps serving the sandboxes placed before.
#[testkit::test(exclusive)]
async fn the_gateway_restarted_keeps_serving(cx: &mut Cx) -> testkit::Result {
    let before = create_sandbox(cx).await?;
    let name = before["name"].as_str().unwrap_or_default().to_owned();
    cx.faults().restart("gateway").await?;
    // The restart's undo proves it healthy; heal here to go on after it.
    cx.faults().heal().await?;
    let (status, body) = get(cx, &format!("/api/sandboxes/{name}")).await?;
    ensure!(
        status == 200 && body["state"] == "ready",
        "after the restart the gateway serves {name} as {status} {body}"
    );
    ensure!(
        body["worker"] == before["worker"],
        "{name} moved from {} to {}",
        before["worker"],
        body["worker"]
    );
    Ok(())
}

/// A sandbox deleted, and gone from its worker, before the worker stops is
/// gone, not lost: the gateway must not report it `lost`.
#[testkit::test(exclusive, known_issue = "GW-1", fails_with = "reported lost")]
async fn a_sandbox_deleted_before_its_worker_stops_is_not_reported_lost(
    cx: &mut Cx,
) -> testkit::Result {
    let name = sandbox_on(cx, "worker-1").await?;
    let pod = cx.pod()?;
    let resp = pod
        .client()
        .delete(pod.url(&format!("/api/sandboxes/{name}")))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await?;
    ensure!(
        resp.status().is_success(),
        "deleting {name} answered {}",
        resp.status()
    );
    // Gone from the worker itself, asked directly: the delete is done.
    let worker = pod.node("worker-1")?;
    let wait = Wait::new().ceiling(Duration::from_secs(30));
    testkit::wait::until(cx, &format!("{name} gone from worker-1"), wait, || async {
        let resp = worker
            .client()
            .get(worker.url(&format!("/api/sandboxes/{name}")))
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await?;
        Ok(match resp.status().as_u16() {
            404 => Check::Done(()),
            s => Check::pending(s),
        })
    })
    .await?;
    cx.forget("sandbox", &name);
    cx.faults().stop("worker-1").await?;
    wait_worker_state(cx, "worker-1", "down", DETECTION).await?;
    let (status, body) = get(cx, &format!("/api/sandboxes/{name}")).await?;
    ensure!(
        body["state"] != "lost",
        "the deleted sandbox {name} is reported lost ({status} {body})"
    );
    Ok(())
}

testkit::main!();

/// How many operations each client of the register test performs.
const REGISTER_OPS: u32 = 50;

/// Three clients read and write one file of a sandbox on worker-1, a
/// register, while worker-2 is partitioned off and a loss degrades the
/// link between the gateway and worker-1: client 0 writes on worker-1
/// directly and reads through the gateway, clients 1 and 2 do both through
/// the gateway. Every read must return what a legal order of the writes
/// left: the history is linearizable. A gateway that answers file reads
/// from a cache of its own (`--fault stale-file-reads`) is caught here,
/// with the operations that conflict
/// (`runner/tests/integration/cluster.rs`).
#[testkit::test(exclusive, timeout = "3m")]
async fn a_register_under_a_partition_and_a_lossy_link_stays_linearizable(
    cx: &mut Cx,
) -> testkit::Result {
    use testkit::history::{Check, Op};
    use testkit::{Link, Partition};
    let sandbox = sandbox_on(cx, "worker-1").await?;
    let pod = cx.pod()?;
    let path = format!("/api/sandboxes/{sandbox}/files/register");
    let through_gateway = pod.url(&path);
    let on_worker = pod.node("worker-1")?.url(&path);
    let history = cx.history();
    let first = history.invoke(0, Op::write("register", 0));
    let put = pod.client().put(&on_worker).body("0").send().await?;
    ensure!(
        put.status().is_success(),
        "the first write answered {}",
        put.status()
    );
    first.ok(());
    cx.faults()
        .partition(Partition::Minority {
            nodes: vec!["worker-2".into()],
        })
        .await?;
    cx.faults()
        .degrade_link("worker-1", "gateway", Link::loss(0.05))
        .await?;
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..3u32 {
        let (h, client_http) = (history.clone(), pod.client());
        let read_url = through_gateway.clone();
        let write_url = if client == 0 {
            on_worker.clone()
        } else {
            through_gateway.clone()
        };
        clients.spawn(async move {
            for i in 0..REGISTER_OPS {
                if i % 2 == 0 {
                    let value = i64::from(client * 1000 + i + 1);
                    let op = h.invoke(client, Op::write("register", value));
                    let sent = client_http
                        .put(&write_url)
                        .timeout(REQUEST_TIMEOUT)
                        .body(value.to_string())
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status().is_success() => op.ok(()),
                        // Refused before anything was written.
                        Ok(r) if r.status().is_client_error() => op.fail(),
                        // A timeout, a 503 of a relay in flight: unknown.
                        _ => op.info(),
                    }
                } else {
                    let op = h.invoke(client, Op::read("register"));
                    let sent = client_http
                        .get(&read_url)
                        .timeout(REQUEST_TIMEOUT)
                        .send()
                        .await;
                    let Ok(r) = sent else {
                        op.fail(); // a read that got no answer changed nothing
                        continue;
                    };
                    if !r.status().is_success() {
                        op.fail();
                        continue;
                    }
                    match r.text().await.map(|t| t.trim().parse::<i64>()) {
                        Ok(Ok(v)) => op.ok(v),
                        _ => op.fail(),
                    }
                }
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done?;
    }
    cx.faults().heal().await?;
    let checked = history.check(Check::register()).await?;
    cx.log(checked);
    Ok(())
}
