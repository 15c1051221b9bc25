//! `--role gateway` in front of two real workers, all with `--token-env`
//! and one shared token: placement, forwarding, and what the gateway shows
//! when a worker is killed, frozen or restarted, or when it restarts itself.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::{err_code, Server};

const TOKEN_VAR: &str = "SANDBOXD_CLUSTER_TOKEN";
/// The gateway's bound (600 ms) plus room for a loaded machine: a 2-core
/// machine running a whole test suite can hold a process off the CPU for
/// seconds. What the tests prove is that a dead worker is seen within a
/// bound, not that the machine is quiet.
const DETECT_LIMIT: Duration = Duration::from_secs(6);

/// How long a worker that came back may take to be taken back.
const RETURN_LIMIT: Duration = Duration::from_secs(30);

fn shared_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("cluster-{}-{nanos}", std::process::id())
}

/// A worker on `home`, on `port` if given (a restart keeps its URL).
fn worker(home: &Arc<TempDir>, port: Option<u16>, token: &str) -> Server {
    let listen = format!("127.0.0.1:{}", port.unwrap_or(0));
    Server::start_in_env(
        Arc::clone(home),
        &["--token-env", TOKEN_VAR, "--listen", &listen],
        &[(TOKEN_VAR, token)],
    )
}

/// Two workers `w1`, `w2` and their gateway.
struct Cluster {
    token: String,
    homes: Vec<Arc<TempDir>>,
    gw_home: Arc<TempDir>,
    workers: Vec<Server>,
    gateway: Server,
}

impl Cluster {
    fn start() -> Cluster {
        let token = shared_token();
        let homes: Vec<Arc<TempDir>> = (0..2).map(|_| Arc::new(TempDir::new().unwrap())).collect();
        let workers: Vec<Server> = homes.iter().map(|h| worker(h, None, &token)).collect();
        let gw_home = Arc::new(TempDir::new().unwrap());
        let gateway = gateway(&gw_home, &workers, &token);
        Cluster {
            token,
            homes,
            gw_home,
            workers,
            gateway,
        }
    }

    /// Stops worker `i` (SIGTERM) and starts it again on its home and port.
    fn restart_worker(&mut self, i: usize) {
        let port = self.workers[i].port();
        self.workers[i].terminate();
        self.workers[i] = worker(&self.homes[i], Some(port), &self.token);
    }
}

fn gateway(home: &Arc<TempDir>, workers: &[Server], token: &str) -> Server {
    gateway_with(home, workers, token, &[])
}

/// A gateway of `workers` given `extra` arguments too.
fn gateway_with(home: &Arc<TempDir>, workers: &[Server], token: &str, extra: &[&str]) -> Server {
    let specs: Vec<String> = workers
        .iter()
        .enumerate()
        .map(|(i, w)| format!("w{}={}", i + 1, w.handle.base_url))
        .collect();
    let mut args = vec!["--role", "gateway", "--token-env", TOKEN_VAR];
    for s in &specs {
        args.extend(["--worker", s.as_str()]);
    }
    args.extend(extra);
    Server::start_in_env(Arc::clone(home), &args, &[(TOKEN_VAR, token)])
}

async fn create(gw: &Server, name: &str) -> String {
    let (st, v) = gw.post("/api/sandboxes", json!({ "name": name })).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["name"], name, "{v}");
    v["worker"].as_str().expect("a worker field").to_string()
}

async fn state_of(gw: &Server, name: &str) -> (StatusCode, Value) {
    gw.get(&format!("/api/sandboxes/{name}")).await
}

/// Polls until `check` holds for the sandbox `name` seen through the
/// gateway; answers how long that took, failing after `limit`.
async fn wait_for(
    gw: &Server,
    name: &str,
    limit: Duration,
    check: impl Fn(StatusCode, &Value) -> bool,
) -> Duration {
    let t0 = Instant::now();
    loop {
        let (st, v) = state_of(gw, name).await;
        if check(st, &v) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < limit,
            "{name} not as expected within {limit:?}: {st} {v}\n--- gateway log:\n{}",
            gw.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn is_lost(st: StatusCode, v: &Value) -> bool {
    st == StatusCode::OK && v["state"] == "lost"
}

fn is_ready(st: StatusCode, v: &Value) -> bool {
    st == StatusCode::OK && v["state"] == "ready"
}

/// Polls `GET /api/cluster` (which forwards nothing: only the heartbeat
/// can change it) until worker `name` is in `state`; answers how long that took.
async fn wait_worker(gw: &Server, name: &str, state: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    while worker_state(gw, name).await != state {
        assert!(
            t0.elapsed() < limit,
            "{name} not {state} within {limit:?}\n--- gateway log:\n{}",
            gw.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t0.elapsed()
}

async fn worker_state(gw: &Server, name: &str) -> String {
    let (st, v) = gw.get("/api/cluster").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let row = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"));
    row["state"].as_str().unwrap().to_string()
}

/// Uploads a file through the gateway and reads it back (raw bodies both ways).
async fn file_round_trip(gw: &Server, name: &str) {
    let url = gw.url(&format!("/api/sandboxes/{name}/files/dir/hello.txt"));
    let resp = gw
        .client
        .put(&url)
        .body("hello\0bytes")
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let resp = gw.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(&resp.bytes().await.unwrap()[..], b"hello\0bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_are_spread_and_served_through_the_gateway() {
    let c = Cluster::start();
    let gw = &c.gateway;
    let mut placed = Vec::new();
    for n in ["sp-a", "sp-b", "sp-c", "sp-d"] {
        placed.push(create(gw, n).await);
    }
    assert_eq!(
        placed,
        ["w1", "w2", "w1", "w2"],
        "fewest first, ties by name"
    );
    // Each sandbox really is on the worker the gateway named.
    for (n, w) in ["sp-a", "sp-b", "sp-c", "sp-d"].iter().zip(&placed) {
        let i: usize = w[1..].parse::<usize>().unwrap() - 1;
        let (st, v) = c.workers[i].get(&format!("/api/sandboxes/{n}")).await;
        assert_eq!(st, StatusCode::OK, "{n} not on {w}: {v}");
    }
    let (st, v) = gw
        .post(
            "/api/sandboxes/sp-b/exec",
            json!({"argv": ["sh", "-c", "echo via-gateway; pwd"]}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(
        v["stdout"].as_str().unwrap().starts_with("via-gateway\n"),
        "{v}"
    );
    file_round_trip(gw, "sp-c").await;
    let (st, v) = gw.get("/api/sandboxes?prefix=sp-&limit=3").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sp-a", "sp-b", "sp-c"], "{v}");
    assert_eq!(v["items"][1]["worker"], "w2", "{v}");
    let token = v["next_page_token"]
        .as_str()
        .expect("a next page")
        .to_string();
    let (_, v) = gw
        .get(&format!(
            "/api/sandboxes?prefix=sp-&limit=3&page_token={token}"
        ))
        .await;
    assert_eq!(v["items"][0]["name"], "sp-d", "{v}");
    assert!(v["next_page_token"].is_null(), "{v}");
    let (_, v) = gw.get("/api/cluster").await;
    assert_eq!(v["workers"][0]["state"], "live", "{v}");
    assert_eq!(v["workers"][1]["sandboxes"], 2, "{v}");
    // A wrong token is refused by the gateway itself.
    let (st, _) = crate::call(
        &crate::authed_client("nope"),
        reqwest::Method::GET,
        &gw.url("/api/sandboxes"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, v) = gw.delete("/api/sandboxes/sp-a").await;
    assert_eq!(
        st,
        StatusCode::ACCEPTED,
        "{v}\n--- gateway log:\n{}",
        gw.log_text()
    );
    gw.wait_gone("sp-a", Duration::from_secs(10)).await;
}

/// What a file read through the gateway returns after it was written
/// through the gateway, then on its worker directly.
async fn read_after_a_write_behind_the_gateway(extra: &[&str]) -> String {
    let token = shared_token();
    let home = Arc::new(TempDir::new().unwrap());
    let w = worker(&home, None, &token);
    let gw = gateway_with(
        &Arc::new(TempDir::new().unwrap()),
        std::slice::from_ref(&w),
        &token,
        extra,
    );
    create(&gw, "reg").await;
    let path = "/api/sandboxes/reg/files/register";
    let put = |server: &Server, body: &'static str| {
        let (client, url) = (server.client.clone(), server.url(path));
        async move {
            let resp = client.put(&url).body(body).send().await.unwrap();
            assert!(resp.status().is_success(), "{}", resp.status());
        }
    };
    put(&gw, "1").await;
    let read = || async {
        gw.client
            .get(gw.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(read().await, "1");
    put(&w, "2").await;
    read().await
}

/// The planted bug `--fault stale-file-reads`: the gateway answers a file
/// read from its cache, and a write on the worker directly leaves it
/// stale; without the switch every read is the worker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_file_reads_serves_a_gateway_cache_a_write_behind_it_leaves_stale() {
    assert_eq!(read_after_a_write_behind_the_gateway(&[]).await, "2");
    let planted = ["--fault", "stale-file-reads"];
    assert_eq!(read_after_a_write_behind_the_gateway(&planted).await, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_lost_within_the_bound_and_skipped() {
    let c = Cluster::start();
    let gw = &c.gateway;
    for n in ["k-a", "k-b"] {
        create(gw, n).await;
    }
    kill(Pid::from_raw(c.workers[0].pid()), Signal::SIGKILL).unwrap();
    let took = wait_worker(gw, "w1", "down", DETECT_LIMIT).await;
    eprintln!("killed worker down after {took:?}");
    let (st, v) = state_of(gw, "k-a").await;
    assert!(is_lost(st, &v), "{st} {v}");
    assert_eq!(v["worker"], "w1", "{v}");
    let (st, v) = gw.get("/api/sandboxes").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["items"][0]["state"], "lost", "{v}");
    assert_eq!(v["items"][1]["state"], "ready", "{v}");
    let (st, v) = gw.delete("/api/sandboxes/k-a").await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["worker"], "w1", "{v}");
    let (st, v) = gw
        .post("/api/sandboxes/k-a/exec", json!({"argv": ["true"]}))
        .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::SERVICE_UNAVAILABLE, "worker_down")
    );
    for n in ["k-c", "k-d", "k-e"] {
        assert_eq!(
            create(gw, n).await,
            "w2",
            "a create went to the killed worker"
        );
    }
    assert_eq!(worker_state(gw, "w1").await, "down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_is_down_then_taken_back() {
    let c = Cluster::start();
    let gw = &c.gateway;
    create(gw, "f-a").await;
    let pid = Pid::from_raw(c.workers[0].pid());
    kill(pid, Signal::SIGSTOP).unwrap();
    // Reads fail over to `lost` within the bound (one may block until
    // then), and the heartbeat alone reports the worker down.
    let lost = wait_for(gw, "f-a", DETECT_LIMIT, is_lost).await;
    let took = wait_worker(gw, "w1", "down", DETECT_LIMIT).await + lost;
    let (st, v) = state_of(gw, "f-a").await;
    kill(pid, Signal::SIGCONT).unwrap();
    assert!(is_lost(st, &v), "{st} {v}");
    assert!(took < DETECT_LIMIT, "down only after {took:?}");
    eprintln!("frozen worker down after {took:?}");
    wait_worker(gw, "w1", "live", RETURN_LIMIT).await;
    wait_for(gw, "f-a", RETURN_LIMIT, is_ready).await;
    // Placed on again: w2 has fewer first, then the tie goes to w1 by name.
    assert_eq!(create(gw, "f-b").await, "w2");
    assert_eq!(create(gw, "f-c").await, "w1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_worker_is_taken_back_with_its_sandboxes() {
    let mut c = Cluster::start();
    create(&c.gateway, "r-a").await;
    c.restart_worker(0);
    // SIGTERM and restart may be quicker than the down bound: the gateway
    // sees the restart by the worker's uptime and re-reads its listing.
    let gw = &c.gateway;
    // Taken back: w1's second "is live" line (its listing re-read), and live.
    let t0 = Instant::now();
    loop {
        let log = gw.log_text();
        let lives = log
            .lines()
            .filter(|l| l.contains("worker w1 (") && l.contains("is live"))
            .count();
        if lives >= 2 && worker_state(gw, "w1").await == "live" {
            break;
        }
        assert!(
            t0.elapsed() < RETURN_LIMIT,
            "w1 not taken back:\n{}",
            gw.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for(gw, "r-a", RETURN_LIMIT, is_ready).await;
    let (st, v) = gw
        .post("/api/sandboxes/r-a/exec", json!({"argv": ["echo", "back"]}))
        .await;
    assert_eq!(
        (st, v["stdout"].as_str()),
        (StatusCode::OK, Some("back\n")),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_keeps_serving_old_sandboxes() {
    let mut c = Cluster::start();
    create(&c.gateway, "g-a").await;
    create(&c.gateway, "g-b").await;
    c.gateway.terminate();
    c.gateway = gateway(&c.gw_home, &c.workers, &c.token);
    let gw = &c.gateway;
    let (st, v) = state_of(gw, "g-b").await;
    assert_eq!(
        (st, v["worker"].as_str()),
        (StatusCode::OK, Some("w2")),
        "{v}"
    );
    let (st, v) = gw
        .post("/api/sandboxes/g-a/exec", json!({"argv": ["echo", "old"]}))
        .await;
    assert_eq!(
        (st, v["stdout"].as_str()),
        (StatusCode::OK, Some("old\n")),
        "{v}"
    );
    let (_, v) = gw.get("/api/sandboxes").await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(2), "{v}");
    // It remembers them as placed: the next create balances them.
    assert_eq!(create(gw, "g-c").await, "w1");
}

/// Runs `cmd`, which must exit by itself within `limit` (a server that
/// starts instead is killed, and the test fails rather than hangs).
fn exits_within(mut cmd: std::process::Command, limit: Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sandboxd");
    let t0 = Instant::now();
    while child.try_wait().expect("wait for sandboxd").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait for sandboxd");
            panic!(
                "sandboxd still ran {limit:?} later; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait for sandboxd")
}

#[test]
fn token_env_unset_or_empty_is_a_clear_startup_error() {
    let home = TempDir::new().unwrap();
    for (value, problem) in [(None, "is not set"), (Some(""), "is empty")] {
        let mut cmd = std::process::Command::new(test_support::sandboxd_bin());
        cmd.args(["serve", "--home"])
            .arg(home.path())
            .args(["--token-env", "SANDBOXD_NO_SUCH_TOKEN"])
            .env_remove("SANDBOXD_NO_SUCH_TOKEN");
        if let Some(v) = value {
            cmd.env("SANDBOXD_NO_SUCH_TOKEN", v);
        }
        let out = exits_within(cmd, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(out.stdout.is_empty(), "it printed a handle");
        assert!(
            err.contains("SANDBOXD_NO_SUCH_TOKEN") && err.contains(problem),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_token_is_every_nodes_and_never_logged() {
    let c = Cluster::start();
    assert_eq!(c.gateway.handle.token, c.token);
    assert_eq!(c.workers[1].handle.token, c.token);
    create(&c.gateway, "t-a").await;
    for s in c.workers.iter().chain([&c.gateway]) {
        assert!(!s.log_text().contains(&c.token), "the token is in a log");
    }
    // No gateway without workers.
    let mut cmd = std::process::Command::new(test_support::sandboxd_bin());
    cmd.args(["serve", "--home"])
        .arg(c.gw_home.path())
        .args(["--role", "gateway"]);
    let out = exits_within(cmd, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--worker"));
}
